package fusefs

import (
	"context"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/accesslog"
	"github.com/chromafs/chromafs/tree"
)

// dirNode is a directory of the tree.
type dirNode struct {
	fs.Inode
	readOnly
	fsys *FS
	// v is the directory in the current tree; a refresh rebinds it, so
	// that each lookup and listing sees one tree version whole.
	v atomic.Pointer[dirVersion]
	// looked is set by a LOOKUP of a child by name (someone stats or
	// opens the entries); a listing of a big directory then gives their
	// attributes with the names again (see dirStream.Lookup).
	looked atomic.Bool
	// scannedAt is the unix nanoseconds of the last sign that something
	// reads its way through the directory (see markRead and scanning):
	// for scanWindow after it, the listings of its subdirectories hand
	// their files to the kernel (pushListed).
	scannedAt atomic.Int64
	// listed is set once the directory was listed through the mount.
	listed atomic.Bool
}

func (d *dirNode) node() *tree.Node { return d.v.Load().n }

// dirVersion is a directory in one tree version, and what a listing begun
// in the version before needs to go on in this one.
type dirVersion struct {
	n *tree.Node
	// report is the root's unlisted report of its tree (tree.Tree.Report),
	// nil elsewhere: one load gives the root's version and its report.
	report *tree.Node
	gen    uint32 // counts the refreshes that changed the directory's names
	// before holds the names of generation gen-1, in order: a listing
	// begun there goes on after the last name it was given.
	before []string
	// pushedTo is the listing position up to which pushListed went.
	pushedTo atomic.Int64
}

var (
	_ = (fs.NodeLookuper)((*dirNode)(nil))
	_ = (fs.NodeOpendirHandler)((*dirNode)(nil))
	_ = (fs.NodeGetattrer)((*dirNode)(nil))
	_ = (fs.NodeStatfser)((*dirNode)(nil))
	_ = (fs.NodeOnForgetter)((*dirNode)(nil))
)

// Lookup answers from the tree; only a file whose size the tree lacks
// costs a (batched) request.
func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d.looked.Store(true)
	return d.lookup(ctx, name, out)
}

func (d *dirNode) lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d.fsys.busy()
	v := d.v.Load()
	c := v.n.Child(name)
	if c == nil && name == tree.ReportPath {
		c = v.report // unlisted, found by name at the root
	}
	if c == nil {
		if in, ok := d.searchRoot(ctx, name, out); ok {
			return in, 0
		}
		if d.fsys.logging() {
			d.fsys.access(ctx, accesslog.Event{Op: "lookup", Path: childPath(d.node(), name)}, time.Now(), syscall.ENOENT)
		}
		return nil, syscall.ENOENT
	}
	if c.File != nil {
		if err := d.fsys.rd.EnsureSize(ctx, c); err != nil {
			return nil, toErrno(err)
		}
	}
	d.fsys.fillAttr(c, &out.Attr)
	if ch := d.GetChild(name); ch != nil && ch.StableAttr().Ino == c.Ino {
		// The kernel has this node already (a READDIRPLUS of the directory
		// looks its names up again): a new one would lose to it in go-fuse,
		// and be the one known() records, so that a refresh would rebind a
		// node the kernel does not have and leave the kernel's stale.
		return ch, 0
	}
	ino := d.NewInode(ctx, d.fsys.newNode(c), fs.StableAttr{Mode: modeOf(c), Ino: c.Ino})
	d.fsys.known(c.Ino, ino.Operations())
	if f, ok := ino.Operations().(*fileNode); ok && d.fsys.push != nil {
		d.fsys.push.knownNode(f)
	}
	return ino, 0
}

// newNode makes the go-fuse node for a tree node.
func (f *FS) newNode(n *tree.Node) fs.InodeEmbedder {
	switch {
	case n.IsDir():
		d := &dirNode{fsys: f}
		d.v.Store(&dirVersion{n: n})
		return d
	case n.Link != nil:
		l := &linkNode{fsys: f}
		l.n.Store(n)
		return l
	}
	fl := &fileNode{fsys: f}
	fl.n.Store(n)
	return fl
}

// OnForget is called when the kernel forgot the directory.
func (d *dirNode) OnForget() { d.fsys.forget(d.node().Ino, d) }

// OpendirHandle lists the directory from memory (a dirStream over this
// version of it) and lets the kernel cache the listing.
func (d *dirNode) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	d.fsys.busy()
	if !d.listed.Load() {
		d.listed.Store(true)
	}
	v := d.v.Load()
	n := v.n
	s := newDirStream(v)
	s.dir = d
	if d.fsys.logging() { // one event a listing, not one for each READDIR of its parts
		s.begin = func() {
			count := len(n.Children)
			d.fsys.access(ctx, accesslog.Event{Op: "readdir", Path: n.Path(), Entries: &count}, time.Now(), 0)
		}
	}
	return s, fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, 0
}

func (d *dirNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fsys.fillAttr(d.node(), &out.Attr)
	return 0
}

// Statfs describes the visible tree only: what it uses, out of a nominal
// size with room to spare, as remote file systems report (a read-only
// mount that reads 100% full pages every disk monitor).
func (d *dirNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	out.Bsize, out.Frsize = 4096, 4096
	used := uint64(d.fsys.usedBytes()+4095) / 4096
	out.Blocks = max(nominalBlocks, 2*used)
	out.Bfree, out.Bavail = out.Blocks-used, out.Blocks-used
	t := d.fsys.tree.Load()
	files := uint64(t.Files + t.Dirs + t.Links + 1)
	out.Files = max(nominalFiles, 2*files)
	out.Ffree = out.Files - files
	out.NameLen = tree.MaxNameLen
	return 0
}

// The nominal size statfs reports: 1 PiB and 1G inodes, as rclone does for
// remotes without a quota.
const (
	nominalBlocks = 1 << 50 / 4096
	nominalFiles  = 1 << 30
)
