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

// linkNode is a symbolic link of the tree. Its target was resolved when
// the tree was built: it names something this mount shows.
type linkNode struct {
	fs.Inode
	readOnly
	fsys *FS
	// n is the link in the current tree; a refresh rebinds it to the new
	// tree's node of the same inode (same path, same target).
	n atomic.Pointer[tree.Node]
}

func (l *linkNode) node() *tree.Node { return l.n.Load() }

var (
	_ = (fs.NodeReadlinker)((*linkNode)(nil))
	_ = (fs.NodeGetattrer)((*linkNode)(nil))
	_ = (fs.NodeOnForgetter)((*linkNode)(nil))
)

func (l *linkNode) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	l.fsys.busy()
	n := l.node()
	if l.fsys.logging() {
		l.fsys.access(ctx, accesslog.Event{Op: "readlink", Path: n.Path(), Detail: n.Link.Target}, time.Now(), 0)
	}
	return []byte(n.Link.Target), 0
}

func (l *linkNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	l.fsys.fillAttr(l.node(), &out.Attr)
	return 0
}

// OnForget is called when the kernel forgot the link.
func (l *linkNode) OnForget() { l.fsys.forget(l.node().Ino, l) }
