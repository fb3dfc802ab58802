package fusefs

import (
	"context"
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/accesslog"
	"github.com/chromafs/chromafs/internal/idle"
	"github.com/chromafs/chromafs/tree"
)

// Reader reads page content (content.Engine): the node types' only way to
// the bytes of a file.
type Reader interface {
	// ReadAt reads fl at off into dest; fewer bytes only at end of file.
	ReadAt(ctx context.Context, fl *tree.File, dest []byte, off int64) (int, error)
	// ReadAtFrom is ReadAt that also names the cache tier or source the
	// bytes came from (for the access log; it costs a little more).
	ReadAtFrom(ctx context.Context, fl *tree.File, dest []byte, off int64) (int, string, error)
	// Prefetch is told of a content read in dir, or of a listing of dir
	// while something reads its way through the tree; it must not block.
	Prefetch(dir *tree.Node, reading *tree.File)
	// EnsureSize makes the size of n's file known before it is reported.
	EnsureSize(ctx context.Context, n *tree.Node) error
	// Resident returns the page's chunks when it is whole in memory,
	// without loading anything.
	Resident(fl *tree.File) ([][]byte, bool)
}

// Config tunes an FS. Zero values take the defaults noted.
type Config struct {
	Collection string
	UID, GID   uint32
	// RootPerm, when set, is the root directory's permission bits (at most
	// 0555): a host daemon serving one user's view gives 0500, so that no
	// other user can enter it, whatever the modes below.
	RootPerm uint32
	CacheTTL time.Duration // kernel entry/attr/negative timeout; default 1h
	// NoKernelPush turns off handing pages to the kernel's page cache:
	// prefetched ones and a listing's (see pusher, pushListed).
	NoKernelPush bool
	// PushQueue bounds the pages waiting to be pushed; default 4096.
	PushQueue int
	// Search, when set, answers the unlisted .search/ and .similar/ at
	// the root (see search.go); it is Prepared with every tree served.
	Search Searcher
	// Access, when set, is told of every lookup of a missing name,
	// listing, read and readlink that reaches this process (package
	// accesslog).
	Access AccessLog
}

// AccessLog records operations (accesslog.Log).
type AccessLog interface{ Write(accesslog.Event) }

// FS is the state shared by every node of one mount.
type FS struct {
	cfg        Config
	tree       atomic.Pointer[tree.Tree]         // the version served; Swap replaces it
	live       nodeMap[uint64, fs.InodeEmbedder] // the nodes the kernel knows, by inode
	swapMu     sync.Mutex                        // serializes Swap
	rd         Reader
	push       *pusher      // nil when NoKernelPush
	lastOp     atomic.Int64 // unix nanoseconds of the last lookup, listing or read
	totalBytes atomic.Int64 // sum of file sizes; -1 until all are known
	searchSeed maphash.Seed // keys the inode numbers of search nodes
}

// New returns an FS serving t, reading content through rd. Close it after
// the server has stopped.
func New(t *tree.Tree, rd Reader, cfg Config) *FS {
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = time.Hour
	}
	if cfg.PushQueue <= 0 {
		cfg.PushQueue = 4096
	}
	f := &FS{cfg: cfg, rd: rd, searchSeed: maphash.MakeSeed()}
	f.tree.Store(t)
	f.totalBytes.Store(-1)
	if cfg.Search != nil {
		cfg.Search.Prepare(t)
	}
	if !cfg.NoKernelPush {
		f.push = newPusher(rd, cfg.PushQueue, &f.lastOp)
	}
	return f
}

// busy notes that the mount is serving a request (see pusher.wait).
func (f *FS) busy() { f.lastOp.Store(time.Now().UnixNano()) }

// Quiet returns once no lookup, listing or read has begun for d, counted
// from the call at the earliest, or when ctx ends (then false; a long
// read still running counts as quiet). Work that can wait (what only a
// later mount needs, a full collection) waits with it for the time
// between an agent's commands, as pushes do, instead of taking a core
// from the first of them.
func (f *FS) Quiet(ctx context.Context, d time.Duration) bool {
	from := time.Now().UnixNano()
	return idle.Until(ctx.Done(), func(now int64) time.Duration {
		return d - time.Duration(now-max(from, f.lastOp.Load()))
	})
}

// Close stops the pusher's goroutine.
func (f *FS) Close() {
	if f.push != nil {
		f.push.close()
	}
}

// PageLoaded is told that the read engine holds fl whole (content.Engine's
// OnLoaded hook): the page is pushed into the kernel's page cache if the
// kernel knows its inode. It never blocks.
func (f *FS) PageLoaded(fl *tree.File) {
	if f.push != nil {
		f.push.loaded(fl)
	}
}

// PushStats returns the pusher's counters (zero when it is off).
func (f *FS) PushStats() PushStats {
	if f.push == nil {
		return PushStats{}
	}
	return f.push.stats()
}

// usedBytes is the sum of the visible files' sizes (unknown ones count 0).
// It is computed once every size is known, then kept: sizes of a tree
// version never change.
func (f *FS) usedBytes() int64 {
	if n := f.totalBytes.Load(); n >= 0 {
		return n
	}
	var sum int64
	complete := true
	tree.Walk(f.tree.Load().Root, func(n *tree.Node) bool {
		if n.File != nil {
			s, ok := n.File.Size()
			complete = complete && ok
			sum += max(s, 0)
		}
		return true
	})
	if complete {
		f.totalBytes.Store(sum)
	}
	return sum
}

// Root is the root node to mount.
func (f *FS) Root() fs.InodeEmbedder {
	t := f.tree.Load()
	root := f.newNode(t.Root)
	root.(*dirNode).v.Store(&dirVersion{n: t.Root, report: t.Report})
	f.known(tree.RootIno, root)
	return root
}

// known records that the kernel knows the node of inode ino.
func (f *FS) known(ino uint64, n fs.InodeEmbedder) { f.live.Store(ino, n) }

// forget is told that the kernel forgot n.
func (f *FS) forget(ino uint64, n fs.InodeEmbedder) { f.live.CompareAndDelete(ino, n) }

// Options are the go-fuse options for mounting f: KernelOptions with
// f's cache timeout, its owner and its root's inode number.
func (f *FS) Options(mo fuse.MountOptions) *fs.Options {
	if mo.FsName == "" {
		mo.FsName = "chromafs:" + f.cfg.Collection
	}
	opts := KernelOptions(mo, f.cfg.CacheTTL)
	opts.UID, opts.GID = f.cfg.UID, f.cfg.GID
	opts.RootStableAttr = &fs.StableAttr{Ino: tree.RootIno}
	return opts
}

// KernelOptions are the options every chromafs mount gives the kernel,
// the given mount options added: read-only, no set-uid or devices, the
// kernel checking permissions, no extended attributes, 1 MiB of
// readahead, and entries, attributes and negative lookups cached for ttl.
// The bench's protocol floor (internal/floorfs) mounts with them too.
func KernelOptions(mo fuse.MountOptions, ttl time.Duration) *fs.Options {
	mo.Options = append(mo.Options, "ro", "nosuid", "nodev", "default_permissions")
	if mo.Name == "" {
		mo.Name = "chromafs"
	}
	// No extended attributes exist: answering ENOSYS once makes the kernel
	// stop asking (ls -l would otherwise cost a request per file).
	mo.DisableXAttrs = true
	if mo.MaxReadAhead == 0 {
		mo.MaxReadAhead = 1 << 20
	}
	return &fs.Options{MountOptions: mo, EntryTimeout: &ttl, AttrTimeout: &ttl, NegativeTimeout: &ttl}
}
