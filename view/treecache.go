package view

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"sync"

	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/tree"
)

// treeCache keeps a view's trees in the host tier: stored trees named like
// pages by the collection's identity and the digest of their text, and
// verified against that digest when read back (chroma.TreeCache); and
// snapshots of built trees (treeload.SnapshotCache), named by the tree's
// stamp and a digest of the view, checked against the digest written with
// them. What a load gives it is kept until View.Flush (or Take).
type treeCache struct {
	host Host
	view string // the view's name (treeload.View): whose served version it remembers; set once

	mu       sync.Mutex // protects the following
	identity string
	sha      string // a tree to write at View.Flush
	text     []byte
	snap     *tree.Tree // a built tree to keep as a snapshot at View.Flush
	snapKey  cache.PageKey
	snapView string
	served   string // the stamp of the tree served last, to remember at View.Flush ("": none new)
	taken    uint64 // how many times take handed over what View.Flush writes
}

// forStore points c at st's collection and returns it as the tree cache
// to use, or nil without a host tier.
func (c *treeCache) forStore(st Store) chroma.TreeCache {
	if c.host == nil {
		return nil
	}
	c.mu.Lock()
	c.identity = st.Identity()
	c.mu.Unlock()
	return c
}

func (c *treeCache) Get(sha string, size int64) ([]byte, bool) {
	return c.host.Get(cache.PageKey{Collection: c.ident(), SHA256: sha}, size)
}

// Put keeps the tree for View.Flush: compressing and writing a large tree while
// mounting would delay the mount (and the garbage collector is off then).
func (c *treeCache) Put(sha string, text []byte) {
	c.mu.Lock()
	c.sha, c.text = sha, text
	c.mu.Unlock()
}

func (c *treeCache) ident() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.identity
}

// discard forgets what View.Flush would write.
func (c *treeCache) discard() {
	c.mu.Lock()
	c.text, c.snap, c.served = nil, nil, ""
	c.mu.Unlock()
}

// serve is told the stamp of a tree the view serves now, for View.Flush to
// remember as the version it served last (Remembered).
func (c *treeCache) serve(stamp string) {
	c.mu.Lock()
	c.served = stamp
	c.mu.Unlock()
}

// Kept is what a load kept for the host tier (View.Take), to be written
// later (Write): taken when the tree is served, it is no longer the tree
// cache's, so that a refresh failing meanwhile does not discard it.
type Kept struct {
	c        *treeCache
	gen      uint64 // the take's (treeCache.taken)
	sha      string
	text     []byte
	snap     *tree.Tree
	snapKey  cache.PageKey
	snapView string
	identity string
	served   string
	// the collection's id, under its ref (View.Take): a store opened by
	// name, remembered for the next run
	idRef, id string
}

// take hands over what View.Flush would write (but the collection's id).
func (c *treeCache) take() Kept {
	if c.host == nil {
		return Kept{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.taken++
	k := Kept{c: c, gen: c.taken, sha: c.sha, text: c.text, snap: c.snap, snapKey: c.snapKey, snapView: c.snapView, identity: c.identity, served: c.served}
	c.text, c.snap, c.served = nil, nil, ""
	return k
}

// Empty reports whether k has nothing to write.
func (k Kept) Empty() bool {
	return k.c == nil || k.text == nil && k.snap == nil && k.served == "" && k.id == ""
}

// Write writes k to the host tier. The stamp of the version served is
// remembered only if nothing was taken after k (a refresh's newer one
// wins, whichever is written first).
func (k Kept) Write() {
	c := k.c
	if k.Empty() {
		return
	}
	if k.text != nil {
		c.host.Put(cache.PageKey{Collection: k.identity, SHA256: k.sha}, k.text)
	}
	if k.snap != nil {
		data := k.snap.Snapshot()
		c.host.Put(k.snapKey, data)
		c.host.SetRef(snapshotRef(k.snapKey), strconv.Itoa(len(data)))
		c.host.SetRef(viewRef(k.identity, k.snapView), "1")
	}
	if k.id != "" {
		c.host.SetRef(k.idRef, k.id)
	}
	if k.served != "" {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.taken == k.gen {
			c.host.SetRef(c.servedRef(k.identity), k.served)
		}
	}
}

// snapshotKey names the snapshot of the tree of stamp built for view: the
// collection's identity, the stamp, the snapshot's format (v4: see
// tree.FromSnapshot; older ones are never asked for) and a digest of the
// view (groups and limits), so that a mount with other groups never reads
// it.
func snapshotKey(identity, stamp, view string) cache.PageKey {
	sum := sha256.Sum256([]byte(view))
	return cache.PageKey{Collection: identity, SHA256: stamp, Part: "tree-snapshot-v4-" + hex.EncodeToString(sum[:16])}
}

func snapshotRef(k cache.PageKey) string { return "snapshot-size\x00" + k.Name() }

// Snapshot returns the kept snapshot of stamp for view (the host tier
// verifies the entry's digest; the size comes from a ref written with it).
func (c *treeCache) Snapshot(stamp, view string) ([]byte, bool) {
	k := snapshotKey(c.ident(), stamp, view)
	v, ok := c.host.Ref(snapshotRef(k))
	if !ok {
		return nil, false
	}
	size, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, false
	}
	return c.host.Get(k, size)
}

// KeepSnapshot keeps t for View.Flush: encoding and writing it while mounting
// would delay the mount.
func (c *treeCache) KeepSnapshot(stamp, view string, t *tree.Tree) {
	c.mu.Lock()
	c.snap, c.snapKey, c.snapView = t, snapshotKey(c.identity, stamp, view), view
	c.mu.Unlock()
}

// viewRef names the ref saying that snapshots of view are kept.
func viewRef(identity, view string) string {
	sum := sha256.Sum256([]byte(identity + "\x00" + view))
	return "snapshot-view\x00" + hex.EncodeToString(sum[:])
}

// servedRef names the ref holding the stamp of the tree the view served
// last on this host (of the collection of identity).
func (c *treeCache) servedRef(identity string) string {
	sum := sha256.Sum256([]byte(identity + "\x00" + c.view))
	return "served-stamp\x00" + hex.EncodeToString(sum[:])
}

// lastServed returns the stamp of the tree the view served last on this
// host, as View.Flush remembered it.
func (c *treeCache) lastServed() (string, bool) {
	return c.host.Ref(c.servedRef(c.ident()))
}

// HasSnapshot reports whether a snapshot for view was ever kept here.
func (c *treeCache) HasSnapshot(view string) bool {
	_, ok := c.host.Ref(viewRef(c.ident(), view))
	return ok
}
