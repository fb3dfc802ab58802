package chroma

import (
	"context"
	"errors"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
)

// ErrRecreated: the collection under this name is not the one whose id
// the store was opened with (deleted and created again).
var ErrRecreated = errors.New("collection was re-created")

// OpenByID is Open for a collection whose id the caller remembers from an
// earlier mount (the host tier keeps it): nothing is requested until the
// store is used, and LoadTreeCached then costs one request, the tree
// header, addressed by id. The collection itself is opened on the first
// content read that needs it. If the id no longer names a collection, the
// header request fails with ErrNotFound and the caller opens it by name
// (Reopen, in place); until then, if the name names another collection,
// reads fail with ErrRecreated instead of mixing two collections.
func OpenByID(cfg Config, id string) (*Store, error) {
	s, err := newStore(cfg, nil)
	if err != nil {
		return nil, err
	}
	s.id = id
	return s, nil
}

// Reopen opens the collection by its name again, in place, for a store
// opened by an id the server no longer knows (the collection was deleted,
// or deleted and created again under its name): from then on the store,
// and whatever reads through it, reads the collection the name names now
// (its ID and Identity are that one's). One request.
func (s *Store) Reopen(ctx context.Context) error {
	return s.connect(ctx, s.ef, false, true)
}

// collection returns the opened collection, opening it by name first when
// the store was opened by id.
func (s *Store) collection(ctx context.Context) (v2.Collection, error) {
	s.mu.Lock()
	coll := s.coll
	s.mu.Unlock()
	if coll != nil {
		return coll, nil
	}
	if err := s.connect(ctx, s.ef, false, false); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.coll, nil
}

// callColl is call with the opened collection.
func (s *Store) callColl(ctx context.Context, fn func(ctx context.Context, coll v2.Collection) error) error {
	coll, err := s.collection(ctx)
	if err != nil {
		return err
	}
	return s.call(ctx, func(ctx context.Context) error { return fn(ctx, coll) })
}

// opened reports whether the collection has been opened.
func (s *Store) opened() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.coll != nil
}
