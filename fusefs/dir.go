package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/tree"
)

// dirNode is a directory of the tree.
type dirNode struct {
	fs.Inode
	readOnly
	fsys *FS
	n    *tree.Node
}

var (
	_ = (fs.NodeLookuper)((*dirNode)(nil))
	_ = (fs.NodeOpendirHandler)((*dirNode)(nil))
	_ = (fs.NodeGetattrer)((*dirNode)(nil))
	_ = (fs.NodeStatfser)((*dirNode)(nil))
)

// Lookup answers from the tree; only a file whose size the tree lacks
// costs a (batched) request.
func (d *dirNode) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	d.fsys.busy()
	c := d.n.Child(name)
	if c == nil {
		return nil, syscall.ENOENT
	}
	if !c.IsDir() {
		if err := d.fsys.rd.EnsureSize(ctx, c); err != nil {
			return nil, toErrno(err)
		}
	}
	d.fsys.fillAttr(c, &out.Attr)
	ino := d.NewInode(ctx, d.fsys.node(c), fs.StableAttr{Mode: modeOf(c), Ino: c.Ino})
	if f, ok := ino.Operations().(*fileNode); ok && d.fsys.push != nil {
		d.fsys.push.knownNode(f)
	}
	return ino, 0
}

// node makes the go-fuse node for a tree node.
func (f *FS) node(n *tree.Node) fs.InodeEmbedder {
	if n.IsDir() {
		return &dirNode{fsys: f, n: n}
	}
	return &fileNode{fsys: f, n: n}
}

// OpendirHandle lists the directory from memory and lets the kernel cache
// the listing.
func (d *dirNode) OpendirHandle(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	d.fsys.busy()
	entries := make([]fuse.DirEntry, 0, len(d.n.Children)+2)
	parent := d.n
	if d.n.Parent != nil {
		parent = d.n.Parent
	}
	entries = append(entries,
		fuse.DirEntry{Name: ".", Mode: syscall.S_IFDIR, Ino: d.n.Ino},
		fuse.DirEntry{Name: "..", Mode: syscall.S_IFDIR, Ino: parent.Ino})
	for _, c := range d.n.Children {
		entries = append(entries, fuse.DirEntry{Name: c.Name, Mode: modeOf(c), Ino: c.Ino})
	}
	return fs.NewListDirStream(entries), fuse.FOPEN_CACHE_DIR | fuse.FOPEN_KEEP_CACHE, 0
}

func (d *dirNode) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	d.fsys.fillAttr(d.n, &out.Attr)
	return 0
}

// Statfs describes the visible tree only.
func (d *dirNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	out.Bsize, out.Frsize = 4096, 4096
	out.Blocks = uint64(d.fsys.usedBytes()+4095) / 4096
	out.Files = uint64(d.fsys.tree.Files + d.fsys.tree.Dirs + 1)
	out.NameLen = tree.MaxNameLen
	return 0
}
