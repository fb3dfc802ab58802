package tree

import (
	"sort"
	"strings"
	"sync/atomic"
)

// RootIno is the inode number of the mount root, as FUSE requires.
const RootIno = 1

// Tree is an immutable directory tree built from the visible entries of one
// tree version. Only file sizes that were unknown may be filled in later.
type Tree struct {
	Root    *Node
	Version string
	Files   int
	Dirs    int // not counting the root
	Links   int
	// Hidden are the slugs of the pages the tree's groups may not see,
	// sorted, when HiddenKnown (a tree built from the document; a tree
	// loaded from a snapshot does not know them). Only a search uses
	// them: it asks Chroma to leave those pages out.
	Hidden      []string
	HiddenKnown bool
	// Report is the view's unlisted report of the files it shows that are
	// not reassembled exactly (ReportPath; report.go), or nil. It is a
	// child of the root that no listing names: Lookup finds it by name,
	// while Walk, find, grep -r, tar and ls see only the docs.
	Report *Node
	// recorded holds the directories whose mtime the tree records (a
	// directory entry): they keep it, instead of the newest below them.
	recorded map[*Node]bool
	memBytes atomic.Int64 // MemoryBytes, once computed
}

// Node is a file or a directory.
type Node struct {
	Name     string
	Ino      uint64
	Parent   *Node
	Mtime    int64   // Unix seconds
	Nsec     uint32  // and nanoseconds
	Children []*Node // directories only, sorted by Name (bytewise)
	File     *File   // files only
	Link     *Link   // symbolic links only
	subdirs  int
}

// Link is a symbolic link: Target is what readlink returns, a relative
// path that resolves (at build time) to a node of the same tree.
type Link struct {
	Target string
}

// File holds what a file node needs to find and check its content.
type File struct {
	Slug   string
	Chunks []int64 // byte length of each chunk; nil when unknown
	SHA256 string
	// Version names this content: SHA256, or the tree version for a page
	// without one (its content may change with any new tree).
	Version string
	size    atomic.Int64 // -1 while unknown
	Exec    bool         // mode 0555 instead of 0444
	// elsewhere is set for the few pages whose bytes are not their own
	// chunks (a page of a big tree costs 64 bytes less without it).
	elsewhere *Elsewhere
}

// Elsewhere locates a page's bytes outside its own chunks.
type Elsewhere struct {
	URI string // a lazy pointer: the content is fetched from here
	// ChunkSHA256 are the digests of the pieces (Chunks) of a lazy page or
	// a mapped page: each piece is verified on its own.
	ChunkSHA256 []string
	// Records maps the page's chunks onto other writers' records.
	Records []Part
}

// URI is a lazy page's pointer, or "".
func (f *File) URI() string {
	if f.elsewhere == nil {
		return ""
	}
	return f.elsewhere.URI
}

// ChunkSHA256 are the digests of a lazy or mapped page's pieces, or nil.
func (f *File) ChunkSHA256() []string {
	if f.elsewhere == nil {
		return nil
	}
	return f.elsewhere.ChunkSHA256
}

// Records maps a mapped page's chunks onto other writers' records, or nil.
func (f *File) Records() []Part {
	if f.elsewhere == nil {
		return nil
	}
	return f.elsewhere.Records
}

// setElsewhere keeps e unless it is empty.
func (f *File) setElsewhere(e Elsewhere) {
	if e.URI != "" || e.ChunkSHA256 != nil || e.Records != nil {
		f.elsewhere = &e
	}
}

// IsDir reports whether n is a directory.
func (n *Node) IsDir() bool { return n.File == nil && n.Link == nil }

// Nlink is the link count a local file system would report: 1 for a file
// or a symbolic link, 2 plus the number of subdirectories for a directory.
func (n *Node) Nlink() uint32 {
	if !n.IsDir() {
		return 1
	}
	return uint32(2 + n.subdirs)
}

// Path is the node's path below the root, without a leading slash.
func (n *Node) Path() string {
	if n.Parent == nil {
		return ""
	}
	if n.Parent.Parent == nil {
		return n.Name
	}
	return n.Parent.Path() + "/" + n.Name
}

// Child returns the child called name, or nil.
func (n *Node) Child(name string) *Node {
	i := sort.Search(len(n.Children), func(i int) bool { return n.Children[i].Name >= name })
	if i < len(n.Children) && n.Children[i].Name == name {
		return n.Children[i]
	}
	return nil
}

// Size returns the file's byte size and whether it is known.
func (f *File) Size() (int64, bool) {
	s := f.size.Load()
	return s, s >= 0
}

// SetSize records a size computed from the file's content.
func (f *File) SetSize(n int64) { f.size.Store(n) }

// Lookup returns the node at path p ("" or "/" is the root), or nil. It
// finds the unlisted Report by its name too.
func (t *Tree) Lookup(p string) *Node {
	n := t.Root
	for _, c := range strings.Split(strings.Trim(p, "/"), "/") {
		if c == "" {
			continue
		}
		if n = t.child(n, c); n == nil {
			return nil
		}
	}
	return n
}

// child is n.Child(name), or the Report when n is the root and name its
// name.
func (t *Tree) child(n *Node, name string) *Node {
	if c := n.Child(name); c != nil || n != t.Root || name != ReportPath {
		return c
	}
	return t.Report
}

// RootChild returns the root's child called name, listed or not (the
// Report), or nil.
func (t *Tree) RootChild(name string) *Node { return t.child(t.Root, name) }

// Walk calls fn for every node below and including n, parents first,
// children in name order. It stops early when fn returns false.
func Walk(n *Node, fn func(*Node) bool) bool {
	if !fn(n) {
		return false
	}
	for _, c := range n.Children {
		if !Walk(c, fn) {
			return false
		}
	}
	return true
}

// inoAllocator derives inode numbers from paths so they are stable across
// mounts; collisions (astronomically rare) are resolved deterministically.
type inoAllocator map[uint64]struct{}

// take allocates ino, the FNV-1a hash of a path, or the next free number.
func (a inoAllocator) take(ino uint64) uint64 {
	for {
		if _, used := a[ino]; ino > RootIno && !used {
			break
		}
		ino++
	}
	a[ino] = struct{}{}
	return ino
}

// FNV-1a, 64 bits, continued over s from the hash h of what precedes it:
// a child's hash continues its directory's, without building its path.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// ChangedNames lists, in name order, the names of entries that differ
// between two versions of a directory: present in only one, or naming
// another inode (a file's content changed, or a file became a directory).
// Either side may be nil (a directory that does not exist in that version).
func ChangedNames(old, cur *Node) []string {
	var a, b []*Node
	if old != nil {
		a = old.Children
	}
	if cur != nil {
		b = cur.Children
	}
	var out []string
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || len(a) > 0 && a[0].Name < b[0].Name:
			out, a = append(out, a[0].Name), a[1:]
		case len(a) == 0 || b[0].Name < a[0].Name:
			out, b = append(out, b[0].Name), b[1:]
		default:
			if a[0].Ino != b[0].Ino {
				out = append(out, a[0].Name)
			}
			a, b = a[1:], b[1:]
		}
	}
	return out
}

// SameAttrs reports whether two versions of a node (with one inode
// number) look the same to stat: mtime, link count and, for files, size.
func SameAttrs(a, b *Node) bool {
	if a.Mtime != b.Mtime || a.Nsec != b.Nsec || a.Nlink() != b.Nlink() || a.IsDir() != b.IsDir() {
		return false
	}
	if a.IsDir() {
		return len(a.Children) == len(b.Children)
	}
	if a.Link != nil || b.Link != nil {
		return a.Link != nil && b.Link != nil && a.Link.Target == b.Link.Target
	}
	if a.File.Exec != b.File.Exec {
		return false
	}
	sa, _ := a.File.Size()
	sb, _ := b.File.Size()
	return sa == sb
}

// CarryMtimes gives every directory of cur whose entries are the same as
// in old (same names, same inodes), and whose mtime cur does not record,
// its mtime in old, so that a directory's
// mtime changes across versions only when its own entries change, as on a
// local disk (a derived mtime, the newest below it, would also move when
// something deeper changed). Call it before cur is served.
func CarryMtimes(old, cur *Tree) {
	var walk func(o, c *Node)
	walk = func(o, c *Node) {
		if len(ChangedNames(o, c)) == 0 && !cur.recorded[c] {
			c.Mtime, c.Nsec = o.Mtime, o.Nsec
		}
		for _, cc := range c.Children {
			if oc := o.Child(cc.Name); oc != nil && oc.IsDir() && cc.IsDir() {
				walk(oc, cc)
			}
		}
	}
	walk(old.Root, cur.Root)
}
