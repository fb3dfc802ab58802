package fusefs

import (
	"context"
	"sort"
	"syscall"

	"github.com/chromafs/chromafs/tree"
	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// dirStream lists one version of a directory from the tree, by position:
// 0 is ".", 1 is "..", then the children in name order. Opening one costs
// nothing and seeking is O(log n), so that a READDIR(PLUS) at any offset —
// noOpendir opens a handle for each — costs only the entries it returns
// (a handle that copied the listing made `ls` of a 100,000-entry
// directory quadratic).
//
// An offset is the position after an entry, tagged with the directory's
// generation (bits 32-62). A READDIR that continues a listing begun before
// a refresh changed the directory's names carries the generation before:
// it goes on after the last name it was given, so that every name in both
// versions is listed once, as on a local disk.
type dirStream struct {
	v         *dirVersion
	n, parent *tree.Node
	gen       uint32
	before    []string // the previous generation's names (dirVersion)
	pos       int
	dir       *dirNode // the listed directory, for Lookup; nil in tests
	// start is the position of the first entry read (0: the listing's
	// first part; -1 before any); plus, once plusKnown, whether this part
	// gives each entry's attributes (see Lookup).
	start           int
	plus, plusKnown bool
	// begin, if set, is called once when the listing is read from its
	// start (not at a READDIR continuing one): the access log's event.
	begin func()
}

var (
	_ = (fs.FileReaddirenter)((*dirStream)(nil))
	_ = (fs.FileSeekdirer)((*dirStream)(nil))
	_ = (fs.FileReleasedirer)((*dirStream)(nil))
	_ = (fs.FileLookuper)((*dirStream)(nil))
	_ = (fs.DirStream)((*dirStream)(nil))
)

func newDirStream(v *dirVersion) *dirStream {
	parent := v.n
	if v.n.Parent != nil {
		parent = v.n.Parent
	}
	return &dirStream{v: v, n: v.n, parent: parent, gen: v.gen, before: v.before, start: -1}
}

// genBits masks a generation into an offset's bits 32-62 (d_off is signed).
const genBits = 1<<31 - 1

func (s *dirStream) offset(pos int) uint64 { return uint64(s.gen&genBits)<<32 | uint64(pos) }

func (s *dirStream) HasNext() bool { return s.pos < len(s.n.Children)+2 }

// Next returns the entry at the position and moves past it; its offset is
// the position of the one after it, where a READDIR continuing from it
// seeks to.
func (s *dirStream) Next() (fuse.DirEntry, syscall.Errno) {
	var e fuse.DirEntry
	switch s.pos {
	case 0:
		e = fuse.DirEntry{Name: ".", Mode: syscall.S_IFDIR, Ino: s.n.Ino}
	case 1:
		e = fuse.DirEntry{Name: "..", Mode: syscall.S_IFDIR, Ino: s.parent.Ino}
	default:
		c := s.n.Children[s.pos-2]
		e = fuse.DirEntry{Name: c.Name, Mode: modeOf(c), Ino: c.Ino}
	}
	s.pos++
	e.Off = s.offset(s.pos)
	return e, 0
}

func (s *dirStream) Readdirent(ctx context.Context) (*fuse.DirEntry, syscall.Errno) {
	if s.start < 0 {
		s.start = s.pos
		if s.begin != nil && s.start == 0 {
			s.begin()
		}
		if s.start > 2 && s.dir != nil {
			// the kernel took in the parts before this one
			s.dir.pushListed(s.v, s.start)
		}
	}
	if !s.HasNext() {
		return nil, 0
	}
	e, errno := s.Next()
	return &e, errno
}

func (s *dirStream) Seekdir(ctx context.Context, off uint64) syscall.Errno {
	gen, pos := uint32(off>>32), off&(1<<32-1)
	if gen == (s.gen-1)&genBits && s.before != nil && pos > 2 && pos <= uint64(len(s.before)+2) {
		last := s.before[pos-3] // the last name that listing was given
		s.pos = 2 + sort.Search(len(s.n.Children), func(i int) bool { return s.n.Children[i].Name > last })
		return 0
	}
	if pos > uint64(len(s.n.Children)+2) {
		return syscall.EINVAL
	}
	s.pos = int(pos) // this generation, or one too old to know: by position
	return 0
}

func (s *dirStream) Close() {}

func (s *dirStream) Releasedir(ctx context.Context, releaseFlags uint32) {}

// plusDirMax is the largest directory whose every READDIRPLUS answer gives
// each entry's attributes (and makes the kernel, and go-fuse, keep an
// inode for it). Past it, a listing does so as the kernel's own
// "readdirplus auto" policy does (which go-fuse does not offer): for its
// first part, and for a part read after a LOOKUP in the directory. A plain
// ls of 100,000 names then costs no inode for each (4x faster); ls -l or
// grep -r look the rest up by name.
const plusDirMax = 4096

// Lookup gives an entry's attributes in a READDIRPLUS answer — or, for a
// part of a big directory's listing without them, nothing: the kernel
// takes an entry of node id 0 as a name only (fuse_direntplus_link).
func (s *dirStream) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if !s.plusKnown {
		s.plus = len(s.n.Children) <= plusDirMax || s.start == 0 || s.dir.looked.Swap(false)
		s.plusKnown = true
	}
	if !s.plus {
		return nil, syscall.ENOENT // go-fuse leaves the entry's node id 0
	}
	return s.dir.lookup(ctx, name, out)
}
