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

// fileNode is a page of the tree.
type fileNode struct {
	fs.Inode
	readOnly
	fsys *FS
	// n is the page in the current tree; a refresh rebinds it to the new
	// tree's node of the same inode (same path, same content version).
	n       atomic.Pointer[tree.Node]
	cached  atomic.Bool  // the kernel has (some of) the page: read or pushed
	pushing atomic.Bool  // a push of the page is being written (one at a time)
	knownAt atomic.Int64 // unix nanoseconds of the last lookup
}

func (n *fileNode) node() *tree.Node { return n.n.Load() }

var (
	_ = (fs.NodeOpener)((*fileNode)(nil))
	_ = (fs.NodeReader)((*fileNode)(nil))
	_ = (fs.NodeFlusher)((*fileNode)(nil))
	_ = (fs.NodeGetattrer)((*fileNode)(nil))
	_ = (fs.NodeOnForgetter)((*fileNode)(nil))
)

// Open answers ENOSYS: the kernel then stops sending OPEN, FLUSH and
// RELEASE for every file and keeps the page cache across opens. Writes
// never get here: the mount is read-only.
func (n *fileNode) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, 0, syscall.ENOSYS
}

// Flush answers ENOSYS, so the kernel stops sending FLUSH on close.
func (n *fileNode) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	return syscall.ENOSYS
}

func (n *fileNode) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	var start time.Time
	if n.fsys.logging() {
		start = time.Now()
	}
	n.cached.Store(true)
	n.fsys.busy()
	tn := n.node()
	n.fsys.rd.Prefetch(tn.Parent, tn.File)
	if n.fsys.push != nil {
		n.fsys.markRead(tn.Parent)
	}
	var got int
	var err error
	if n.fsys.logging() {
		var from string
		got, from, err = n.fsys.rd.ReadAtFrom(ctx, tn.File, dest, off)
		n.fsys.access(ctx, accesslog.Event{Op: "read", Path: tn.Path(), Offset: int64p(off), Bytes: int64p(int64(got)), Tier: from}, start, toErrno(err))
	} else {
		got, err = n.fsys.rd.ReadAt(ctx, tn.File, dest, off)
	}
	if err != nil {
		return nil, toErrno(err)
	}
	return fuse.ReadResultData(dest[:got]), 0
}

func (n *fileNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	tn := n.node()
	if err := n.fsys.rd.EnsureSize(ctx, tn); err != nil {
		return toErrno(err)
	}
	n.fsys.fillAttr(tn, &out.Attr)
	return 0
}

// OnForget is called when the kernel forgot the inode: pushing its page
// would be refused.
func (n *fileNode) OnForget() {
	n.fsys.forget(n.node().Ino, n)
	if n.fsys.push != nil {
		n.fsys.push.forgotten(n)
	}
}
