package fusefs

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/tree"
)

// Source is where content comes from; chroma.Store implements it.
type Source interface {
	FetchPage(ctx context.Context, ref chroma.PageRef, idx []int) ([]string, error)
	FetchPages(ctx context.Context, refs []chroma.PageRef) (map[string]chroma.Page, error)
}

// Prefetch modes.
const (
	PrefetchNone = "none"
	PrefetchDir  = "dir"
	PrefetchAll  = "all"
)

// Config tunes an FS. Zero values take the defaults noted.
type Config struct {
	Collection  string
	CacheBytes  int64         // default 256 MiB
	Prefetch    string        // none, dir (default) or all
	Timeout     time.Duration // per request attempt; default 30s
	Retries     int           // extra attempts for retryable errors; default 2
	WindowBytes int64         // bytes fetched per read miss; default 1 MiB
	Concurrency int           // requests in flight to Chroma; default 8
	Lookahead   int           // groups of ~100 pages prefetched ahead of a walk; default 2
	UID, GID    uint32
	CacheTTL    time.Duration // kernel entry/attr/negative timeout; default 1h
	FailTTL     time.Duration // how long a failed load answers at once; default 500ms, < 0 never
	Log         *slog.Logger
}

func (c *Config) defaults() {
	if c.CacheBytes <= 0 {
		c.CacheBytes = 256 << 20
	}
	if c.Prefetch == "" {
		c.Prefetch = PrefetchDir
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.Retries < 0 {
		c.Retries = 0
	}
	if c.WindowBytes <= 0 {
		c.WindowBytes = 1 << 20
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 8
	}
	if c.Lookahead <= 0 {
		c.Lookahead = 4
	}
	if c.FailTTL == 0 {
		c.FailTTL = 500 * time.Millisecond
	}
	if c.CacheTTL <= 0 {
		c.CacheTTL = time.Hour
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// FS is the state shared by every node of one mount.
type FS struct {
	cfg     Config
	tree    *tree.Tree
	src     Source
	cache   *cache.Cache
	flights cache.Flights
	sem     chan struct{} // bounds requests in flight

	ctx    context.Context // ends at Close: stops prefetch
	cancel context.CancelFunc
	wg     sync.WaitGroup // background prefetch goroutines

	prefetched sync.Map           // group index -> struct{}: its load started
	visited    sync.Map           // *tree.Node (dir) -> struct{}: a read happened in it
	failed     sync.Map           // flight key -> failure: recent failed loads
	groupOf    map[*tree.Node]int // walk-order group (<= batchPages files) of each
	groups     [][]*tree.Node     // the directories of each group

	fetches, fetchErrors, prefetchPages atomic.Int64
	totalBytes                          atomic.Int64 // sum of file sizes; -1 until all are known
}

// New returns an FS serving t with content from src.
func New(t *tree.Tree, src Source, cfg Config) *FS {
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	f := &FS{
		cfg: cfg, tree: t, src: src,
		cache: cache.New(cfg.CacheBytes), sem: make(chan struct{}, cfg.Concurrency),
		ctx: ctx, cancel: cancel, groupOf: map[*tree.Node]int{},
	}
	f.flights.Base = ctx
	f.totalBytes.Store(-1)
	f.planWalk()
	return f
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
	tree.Walk(f.tree.Root, func(n *tree.Node) bool {
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

// planWalk takes the directories that hold files in the order grep -r,
// tar and rg visit them (depth first, names sorted) and cuts that order
// into groups of about batchPages files: one prefetch request each.
func (f *FS) planWalk() {
	inGroup := 0
	tree.Walk(f.tree.Root, func(n *tree.Node) bool {
		files := countFiles(n)
		if !n.IsDir() || files == 0 {
			return true
		}
		if len(f.groups) == 0 || inGroup+files > batchPages {
			f.groups = append(f.groups, nil)
			inGroup = 0
		}
		g := len(f.groups) - 1
		f.groups[g] = append(f.groups[g], n)
		f.groupOf[n] = g
		inGroup += files
		return true
	})
}

func countFiles(dir *tree.Node) int {
	n := 0
	for _, c := range dir.Children {
		if !c.IsDir() {
			n++
		}
	}
	return n
}

// Root is the root node to mount.
func (f *FS) Root() fs.InodeEmbedder { return &dirNode{fsys: f, n: f.tree.Root} }

// Options are the go-fuse options for mounting f: read-only, long kernel
// cache timeouts, the given mount options added.
func (f *FS) Options(mo fuse.MountOptions) *fs.Options {
	ttl := f.cfg.CacheTTL
	mo.Options = append(mo.Options, "ro", "nosuid", "nodev", "default_permissions")
	if mo.FsName == "" {
		mo.FsName = "chromafs:" + f.cfg.Collection
	}
	if mo.Name == "" {
		mo.Name = "chromafs"
	}
	// No extended attributes exist: answering ENOSYS once makes the kernel
	// stop asking (ls -l would otherwise cost a request per file).
	mo.DisableXAttrs = true
	if mo.MaxReadAhead == 0 {
		mo.MaxReadAhead = 1 << 20
	}
	return &fs.Options{
		MountOptions: mo,
		EntryTimeout: &ttl, AttrTimeout: &ttl, NegativeTimeout: &ttl,
		UID: f.cfg.UID, GID: f.cfg.GID,
		RootStableAttr: &fs.StableAttr{Ino: tree.RootIno},
	}
}

// StartPrefetchAll warms the cache with the whole tree in the background
// (for --prefetch all), directory by directory, until the cache is full.
func (f *FS) StartPrefetchAll() {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for g := range f.groups {
			if f.ctx.Err() != nil || f.cache.Room() <= f.cfg.WindowBytes {
				return
			}
			f.prefetchGroup(g, nil)
			f.flights.Wait() // one batch at a time: bounded memory
		}
	}()
}

// Close stops background work and waits for it.
func (f *FS) Close() {
	f.cancel()
	f.wg.Wait()
	f.flights.Wait()
}

// Stats are the counters of one mount.
type Stats struct {
	Cache         cache.Stats
	Fetches       int64 // requests made by reads and prefetch (each may page)
	FetchErrors   int64
	Loads, Shared int64 // de-duplicated loads and callers that shared one
	PrefetchPages int64
}

// Stats returns a snapshot of the counters.
func (f *FS) Stats() Stats {
	return Stats{
		Cache: f.cache.Stats(), Fetches: f.fetches.Load(), FetchErrors: f.fetchErrors.Load(),
		Loads: f.flights.Loads(), Shared: f.flights.Shared(), PrefetchPages: f.prefetchPages.Load(),
	}
}

// String summarises the stats for a log line.
func (s Stats) String() string {
	return fmt.Sprintf("fetches=%d errors=%d cache_hits=%d cache_misses=%d cache_bytes=%d shared=%d prefetched_pages=%d",
		s.Fetches, s.FetchErrors, s.Cache.Hits, s.Cache.Misses, s.Cache.Bytes, s.Shared, s.PrefetchPages)
}
