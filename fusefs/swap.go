package fusefs

import (
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"

	"github.com/chromafs/chromafs/tree"
)

// SwapStats says what a Swap told the kernel to drop.
type SwapStats struct {
	Entries int // names: added, removed, or naming a new inode
	Inodes  int // directories whose listing or attributes changed, files whose attributes changed
}

// dirChange is a directory the kernel knows whose entries changed.
type dirChange struct {
	node  *fs.Inode
	names []string
}

// Swap serves t from now on, and tells the kernel exactly what changed.
//
// Directories whose entries did not change keep their mtimes (see
// tree.CarryMtimes). Every node the kernel knows is rebound first: a directory to its new
// version (one atomic pointer, so a lookup or listing sees one version
// whole), a file to the new tree's node of the same inode. A file's inode
// number names its path and content version (see tree.assignInodes), so
// an unchanged file keeps its inode, its kernel page cache and its cache
// entries, while a changed one is a new inode, as after an atomic replace
// on a local disk: a process that has the old one open keeps reading the
// old version to its end, a new open gets the new one. A directory gone
// from t is served empty to whoever still holds it.
//
// Then, outside any request handler (it must not be called from one: the
// kernel may wait for handlers of the same directory) and with no lock a
// handler takes, it invalidates the changed names and the listings and
// attributes of the changed directories, and the attributes of files
// whose mtime changed; the directory part once more 20 ms later, for a
// lookup that raced the swap. The kernel answers ENOENT for what it does
// not cache; that is ignored.
func (f *FS) Swap(t *tree.Tree) SwapStats {
	f.swapMu.Lock()
	defer f.swapMu.Unlock()
	tree.CarryMtimes(f.tree.Load(), t)
	var dirs []dirChange
	var files []*fs.Inode
	for _, v := range f.live.Values() {
		switch n := v.(type) {
		case *dirNode:
			if c, ok := rebindDir(n, t); ok {
				dirs = append(dirs, c)
			}
		case *fileNode:
			if rebindLeaf(&n.n, t) {
				files = append(files, n.EmbeddedInode())
			}
		case *linkNode:
			if rebindLeaf(&n.n, t) {
				files = append(files, n.EmbeddedInode())
			}
		}
	}
	old := f.tree.Load()
	f.tree.Store(t)
	f.totalBytes.Store(-1)
	// the unlisted names at the root whose answers change: a listing's
	// invalidation does not reach them (.search and .similar, and all
	// below them, were the old tree's; the report, when it changed)
	var unlisted []string
	if f.cfg.Search != nil && old.Version != t.Version {
		f.cfg.Search.Prepare(t)
		unlisted = append(unlisted, searchName, similarName)
	}
	report := reportIno(old) != reportIno(t)
	if report {
		unlisted = append(unlisted, tree.ReportPath)
	}
	st := notify(dirs, files)
	f.dropRootEntries(unlisted)
	if report { // a name naming a new inode, as a listed one would be counted
		st.Entries++
	}
	// A LOOKUP or READDIR that read a directory's old version just before
	// the rebind may reach the kernel after the invalidations above (the
	// kernel ignores an invalidation for a name still being looked up):
	// say it again once such a request has surely been answered.
	time.Sleep(reinvalidateAfter)
	notify(dirs, nil)
	f.dropRootEntries(unlisted)
	return st
}

// dropRootEntries drops the kernel's entries of names at the root.
func (f *FS) dropRootEntries(names []string) {
	if root, _ := f.live.Load(tree.RootIno); root != nil {
		if d, ok := root.(*dirNode); ok {
			for _, name := range names {
				_ = d.NotifyEntry(name)
			}
		}
	}
}

// reportIno is the inode of t's unlisted report, 0 without one.
func reportIno(t *tree.Tree) uint64 {
	if t.Report == nil {
		return 0
	}
	return t.Report.Ino
}

// reinvalidateAfter is how long after a swap the directory invalidations
// are sent a second time; requests answered from memory take microseconds.
const reinvalidateAfter = 20 * time.Millisecond

// rebindDir points d at its version in t and reports what changed.
func rebindDir(d *dirNode, t *tree.Tree) (dirChange, bool) {
	v := d.v.Load()
	old := v.n
	cur := t.Lookup(old.Path())
	if cur == nil || !cur.IsDir() {
		cur = &tree.Node{Name: old.Name, Ino: old.Ino, Parent: old.Parent, Mtime: old.Mtime}
	}
	names := tree.ChangedNames(old, cur)
	next := &dirVersion{n: cur, gen: v.gen, before: v.before}
	if cur == t.Root {
		next.report = t.Report
	}
	if len(names) > 0 { // positions in the listing moved: a listing in progress goes on by name
		next.gen, next.before = v.gen+1, childNames(old)
	}
	d.v.Store(next)
	if len(names) == 0 && tree.SameAttrs(old, cur) {
		return dirChange{}, false
	}
	return dirChange{node: d.EmbeddedInode(), names: names}, true
}

// childNames are the names of n's children, in order.
func childNames(n *tree.Node) []string {
	out := make([]string, len(n.Children))
	for i, c := range n.Children {
		out[i] = c.Name
	}
	return out
}

// rebindLeaf points a file's or a link's node at its version in t when t
// has the same content (or target) at the same path (same inode), and
// reports whether its attributes changed. A replaced or removed file keeps
// its node: the old version, for whoever holds it open.
func rebindLeaf(n *atomic.Pointer[tree.Node], t *tree.Tree) bool {
	old := n.Load()
	cur := t.Lookup(old.Path())
	if cur == nil || cur.Ino != old.Ino {
		return false
	}
	n.Store(cur)
	return !tree.SameAttrs(old, cur)
}

// notify sends the invalidations, ignoring the kernel's ENOENT for what
// it does not cache.
func notify(dirs []dirChange, files []*fs.Inode) SwapStats {
	var st SwapStats
	for _, d := range dirs {
		for _, name := range d.names {
			_ = d.node.NotifyEntry(name)
			st.Entries++
		}
		_ = d.node.NotifyContent(0, 0) // the cached listing and the attributes
		st.Inodes++
	}
	for _, n := range files {
		_ = n.NotifyContent(-1, 0) // attributes only: the content is the same
		st.Inodes++
	}
	return st
}
