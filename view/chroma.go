package view

import (
	"context"

	"github.com/chromafs/chromafs/chroma"
)

// ChromaOpener opens collections of a Chroma server with chroma.Open and
// chroma.OpenByID (no embedding function: a view only reads).
type ChromaOpener struct{ Conn chroma.Config }

// Open opens the collection Conn names.
func (o ChromaOpener) Open(ctx context.Context) (*chroma.Store, error) {
	return chroma.Open(ctx, o.Conn, nil)
}

// OpenByID opens the collection of id, requesting nothing yet.
func (o ChromaOpener) OpenByID(id string) (*chroma.Store, error) {
	return chroma.OpenByID(o.Conn, id)
}

// AddressOf is the address of the collection conn names.
func AddressOf(conn chroma.Config) Address {
	return Address{Server: conn.URL, Tenant: conn.Tenant, Database: conn.Database, Collection: conn.Collection}
}
