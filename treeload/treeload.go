// Package treeload loads a collection's path tree for a mount: it fetches
// the stored document (a tree stored in parts comes from the host tier when
// that holds the version the header names), waits out back-pressure
// (HTTP 429/503) within the caller's deadline, decodes and validates it,
// and builds the tree pruned to the mount's groups. Package view decides
// when it runs (a snapshot, the host tier's copy, a scan of another tool's
// records) for a mount and its refreshes; the tests load through it too,
// so a tree is loaded one way everywhere.
package treeload

import (
	"context"
	"fmt"
	"sort"
	"strings"
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
	Snapshot bool          // the tree came from a snapshot (no decode, no build)
	Records  int           // the records a scan read (Count's); 0 for a stored tree
}

// SnapshotCache keeps built trees (tree.Snapshot) by the stored tree's
// stamp and the groups they were pruned to, so that a restart of a mount
// with the same view loads its tree without decoding or building. A tree
// cache (the host tier's) may implement it; Load then asks it first.
type SnapshotCache interface {
	// HasSnapshot reports whether a snapshot of some stamp is kept for
	// view: only then is the stamp asked for (one request that a first
	// mount on a host would spend for nothing).
	HasSnapshot(view string) bool
	// Snapshot returns the snapshot kept for stamp and view, if any.
	Snapshot(stamp, view string) ([]byte, bool)
	// KeepSnapshot is told of a tree built for stamp and view; it may
	// encode and store it later (not while mounting).
	KeepSnapshot(stamp, view string, t *tree.Tree)
}

// StampSource names the stored tree's version in one small request
// (chroma.Store.TreeStamp), for the snapshot path.
type StampSource interface {
	TreeStamp(ctx context.Context) (string, error)
}

// View names what a tree was pruned to: the groups (sorted, deduplicated)
// and the limits it was validated with.
func View(groups []string, lim tree.Limits) string {
	set := tree.GroupSet(groups)
	keys := make([]string, 0, len(set))
	for g := range set {
		keys = append(keys, g)
	}
	sort.Strings(keys)
	return fmt.Sprintf("groups=%s;limits=%d/%d/%d", strings.Join(keys, "\x00"), lim.MaxDecoded, lim.MaxEntries, lim.MaxDepth)
}

// Load fetches, decodes and builds the tree of src visible to groups. tc
// may be nil (no host tier). name is the collection, for messages. When tc
// keeps snapshots and src names its stamp, a snapshot of the same stamp
// and view is used instead (one request); a snapshot that does not decode
// is ignored.
func Load(ctx context.Context, src Source, tc chroma.TreeCache, name string, groups []string, lim tree.Limits) (Result, error) {
	start := time.Now()
	sc, _ := tc.(SnapshotCache)
	ss, _ := src.(StampSource)
	view := View(groups, lim)
	if sc != nil && ss != nil && sc.HasSnapshot(view) {
		if res, ok := fromSnapshot(ctx, ss, sc, view, start); ok {
			return res, nil
		}
	}
	res, err := load(ctx, src, tc, name, groups, lim, start)
	if err == nil && sc != nil && res.Stamp != "" {
		sc.KeepSnapshot(res.Stamp, view, res.Tree)
	}
	return res, err
}

// FromSnapshot is the snapshot sc keeps for stamp and the view of groups
// and lim, built into a tree, with no request: for a caller that knows
// the stamp it wants (package view's remembered version); ok is false when
// there is none or it does not decode.
func FromSnapshot(sc SnapshotCache, stamp string, groups []string, lim tree.Limits) (Result, bool) {
	return fromSnapshot(context.Background(), knownStamp(stamp), sc, View(groups, lim), time.Now())
}

// knownStamp is a StampSource that names a stamp its caller knows.
type knownStamp string

func (s knownStamp) TreeStamp(context.Context) (string, error) { return string(s), nil }

// fromSnapshot loads the snapshot of the current stamp, if the cache has
// one that decodes.
func fromSnapshot(ctx context.Context, ss StampSource, sc SnapshotCache, view string, start time.Time) (Result, bool) {
	var stamp string
	if err := chroma.WhileBusy(ctx, func() (err error) { stamp, err = ss.TreeStamp(ctx); return err }); err != nil {
		return Result{}, false
	}
	data, ok := sc.Snapshot(stamp, view)
	if !ok {
		return Result{}, false
	}
	fetched := time.Now()
	t, err := tree.FromSnapshot(data)
	if err != nil {
		return Result{}, false
	}
	return Result{Tree: t, Bytes: len(data), Stamp: stamp, Fetch: fetched.Sub(start), Build: time.Since(fetched), Snapshot: true}, true
}

func load(ctx context.Context, src Source, tc chroma.TreeCache, name string, groups []string, lim tree.Limits, start time.Time) (Result, error) {
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
