// Package treeload loads a collection's path tree for a mount: it fetches
// the stored document (a tree stored in parts comes from the host tier when
// that holds the version the header names), waits out back-pressure
// (HTTP 429/503) within the caller's deadline, decodes and validates it,
// and builds the tree pruned to the mount's groups. The mount command, the
// tests and live refresh share it, so a tree is loaded one way everywhere.
package treeload

import (
	"context"
	"fmt"
	"time"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/tree"
)

// Source is where the stored tree comes from; chroma.Store implements it.
type Source interface {
	LoadTreeCached(ctx context.Context, tc chroma.TreeCache) ([]byte, string, error)
}

// Result is a loaded tree and what it cost.
type Result struct {
	Tree     *tree.Tree
	Warnings tree.Warnings // per-entry problems (the entries were skipped or hidden)
	Bytes    int           // size of the stored document
	Stamp    string        // the stored tree's version (chroma.Store.TreeStamp)
	Fetch    time.Duration // fetching (and reassembling) the document
	Build    time.Duration // decoding, validating and building
}

// Load fetches, decodes and builds the tree of src visible to groups. tc
// may be nil (no host tier). name is the collection, for messages.
func Load(ctx context.Context, src Source, tc chroma.TreeCache, name string, groups []string, lim tree.Limits) (Result, error) {
	start := time.Now()
	var raw []byte
	var stamp string
	err := chroma.WhileBusy(ctx, func() (err error) { raw, stamp, err = src.LoadTreeCached(ctx, tc); return err })
	if err != nil {
		return Result{}, err
	}
	fetched := time.Now()
	doc, err := tree.Decode(raw, lim)
	if err != nil {
		return Result{}, fmt.Errorf("collection %q: %w", name, err)
	}
	t := tree.BuildVisible(doc, groups, lim)
	return Result{Tree: t, Warnings: doc.Warnings, Bytes: len(raw), Stamp: stamp, Fetch: fetched.Sub(start), Build: time.Since(fetched)}, nil
}
