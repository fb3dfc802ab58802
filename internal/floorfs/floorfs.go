// Package floorfs is the FUSE protocol's floor on a machine, for the
// bench: a read-only file system holding a directory tree's content in
// memory, as go-fuse nodes built before the mount, served with the very
// kernel options of a chromafs mount (fusefs.KernelOptions, fusefs.
// MountNodes: no OPEN, OPENDIR or FLUSH, cached entries, attributes and
// listings). Nothing it answers waits on a lock, a cache or a network: a
// cold kernel's first grep -r of it is what any FUSE file system would
// take here, request by request; what a chromafs view takes beyond it is
// chromafs's own.
package floorfs

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/fusefs"
	"github.com/chromafs/chromafs/tree"
)

// Tree is a directory tree read into memory: its directories and regular
// files (symbolic links and other kinds are left out).
type Tree struct {
	root  *dir
	files int
	bytes int64
	// reads counts the READs answered from memory (in a passthrough
	// mount, those the kernel did not pass through).
	reads atomic.Int64
	// pages holds every file's content by its path (MountChromafs);
	// built is the tree chromafs serves of them, made once.
	pages map[string][]byte
	built struct {
		sync.Once
		tree *tree.Tree
		err  error
	}
}

// Load reads the tree at root into memory.
func Load(root string) (*Tree, error) {
	t := &Tree{pages: map[string][]byte{}}
	t.root = &dir{tree: t}
	dirs := map[string]*dir{".": t.root}
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || rel == "." {
			return err
		}
		parent := dirs[filepath.Dir(rel)]
		switch {
		case e.IsDir():
			d := &dir{tree: t}
			dirs[rel] = d
			parent.kids = append(parent.kids, child{name: e.Name(), node: d})
		case e.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			parent.kids = append(parent.kids, child{name: e.Name(), node: &file{tree: t, data: b, path: p}})
			t.files++
			t.bytes += int64(len(b))
			t.pages[filepath.ToSlash(rel)] = b
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("floorfs: %w", err)
	}
	return t, nil
}

// Files and Bytes say what the tree holds; Reads how many READs reached
// its mounts.
func (t *Tree) Files() int   { return t.files }
func (t *Tree) Bytes() int64 { return t.bytes }
func (t *Tree) Reads() int64 { return t.reads.Load() }

// Mount serves a fresh copy of the tree's nodes at dir (a new mount: the
// kernel knows nothing of it) until the server is unmounted.
func (t *Tree) Mount(dir string) (*fuse.Server, error) {
	return t.mount(dir, false)
}

// MountPassthrough is Mount with FUSE passthrough: each open of a file
// opens the file it was loaded from and hands it to the kernel. Where the
// kernel or the privileges refuse, go-fuse answers READs instead (Reads
// counts them).
func (t *Tree) MountPassthrough(dir string) (*fuse.Server, error) {
	return t.mount(dir, true)
}

func (t *Tree) mount(dir string, passthrough bool) (*fuse.Server, error) {
	opts := fusefs.KernelOptions(fuse.MountOptions{FsName: "floorfs", Name: "floorfs"}, time.Hour)
	return fusefs.MountNodes(t.root.fresh(passthrough), dir, opts)
}

type child struct {
	name string
	node interface {
		fresh(passthrough bool) gofs.InodeEmbedder
	}
}

// dir is a directory: its children are added as persistent inodes when
// the mount first sees it, so lookups and listings are go-fuse's own
// answers from memory.
type dir struct {
	gofs.Inode
	tree        *Tree
	kids        []child
	passthrough bool
}

var _ = (gofs.NodeOnAdder)((*dir)(nil))

func (d *dir) fresh(passthrough bool) gofs.InodeEmbedder {
	return &dir{tree: d.tree, kids: d.kids, passthrough: passthrough}
}

func (d *dir) OnAdd(ctx context.Context) {
	for _, k := range d.kids {
		n := k.node.fresh(d.passthrough)
		mode := uint32(syscall.S_IFREG)
		if _, ok := n.(*dir); ok {
			mode = syscall.S_IFDIR
		}
		d.AddChild(k.name, d.NewPersistentInode(ctx, n, gofs.StableAttr{Mode: mode}), false)
	}
}

func (d *dir) Getattr(ctx context.Context, f gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o555
	return 0
}

// file is a regular file's content; like a chromafs file it answers
// OPEN and FLUSH with ENOSYS (the kernel then keeps its page cache and
// stops asking) and is read by offset. With passthrough, an OPEN opens
// the file at path instead (FLUSH still ENOSYS: a close costs no request).
type file struct {
	gofs.Inode
	tree        *Tree
	data        []byte
	path        string
	passthrough bool
}

var (
	_ = (gofs.NodeOpener)((*file)(nil))
	_ = (gofs.NodeReader)((*file)(nil))
	_ = (gofs.NodeFlusher)((*file)(nil))
	_ = (gofs.NodeGetattrer)((*file)(nil))
)

func (f *file) fresh(passthrough bool) gofs.InodeEmbedder {
	return &file{tree: f.tree, data: f.data, path: f.path, passthrough: passthrough}
}

func (f *file) Open(ctx context.Context, flags uint32) (gofs.FileHandle, uint32, syscall.Errno) {
	if !f.passthrough {
		return nil, 0, syscall.ENOSYS
	}
	fd, err := syscall.Open(f.path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, gofs.ToErrno(err)
	}
	return &backing{fd: fd}, 0, 0
}

// backing is an open file handed to the kernel for passthrough.
type backing struct{ fd int }

var (
	_ = (gofs.FilePassthroughFder)((*backing)(nil))
	_ = (gofs.FileReleaser)((*backing)(nil))
)

func (b *backing) PassthroughFd() (int, bool) { return b.fd, true }

func (b *backing) Release(ctx context.Context) syscall.Errno {
	return gofs.ToErrno(syscall.Close(b.fd))
}

func (f *file) Flush(ctx context.Context, fh gofs.FileHandle) syscall.Errno { return syscall.ENOSYS }

func (f *file) Getattr(ctx context.Context, fh gofs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFREG | 0o444
	out.Size = uint64(len(f.data))
	out.Blocks = (out.Size + 511) / 512
	return 0
}

func (f *file) Read(ctx context.Context, fh gofs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	f.tree.reads.Add(1)
	if off >= int64(len(f.data)) {
		return fuse.ReadResultData(nil), 0
	}
	return fuse.ReadResultData(f.data[off:min(int64(len(f.data)), off+int64(len(dest)))]), 0
}
