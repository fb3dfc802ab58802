// Package content is chromafs's read engine: it turns "bytes [off, off+n)
// of this page of the tree" into bytes, whatever the backend. It sits
// between the FUSE adapter (fusefs), which knows nothing of caches or
// requests, and a [Source] (Chroma, through a thin adapter), which knows
// nothing of files.
//
// A read walks one chain, down once and back up once:
//
//	ReadAt(fl, off, n)
//	  │  chunk by chunk
//	  ▼
//	memory ─── hit ─────────────────────────────────────────► bytes
//	  │ miss        (the hot path: one LRU lookup, no allocation)
//	  ▼
//	failure memory ── a failed read's re-read, just after ──► EIO at once
//	  │
//	  ▼
//	flight (one load per window or page; readers, readahead and
//	  │     prefetch batches share it)
//	  ▼  walk ─────────────────────────────────────────────── up: fill
//	memory          checked again, inside the flight             ▲
//	host tier       disk, shared by the host's mounts  ┐ under   │ memory,
//	remote tier     Redis, shared by the fleet's hosts ┘ the     │ then host
//	  │                           host-wide lock, re-checked     │ and remote
//	  ▼                                                          │ (in the
//	source          the collection's records (own layout, or     │ background)
//	                other writers' records for a mapped page),   │
//	                or a lazy pointer's URI: fetch's bound,      │
//	                deadline and retries                         │
//	  │                                                          │
//	  └──► verify: chunk lengths and piece digests the tree ─────┘
//	       records (one place, chain.go); a tier's answer that
//	       does not verify is a miss, the source's is EIO
//
// It owns everything between the two ends:
//
//   - Tiers (chain.go, tiers.go), nearest first: a byte-bounded LRU in
//     memory ([cache.Cache]), an optional host tier on disk shared by every
//     mount process of the host ([HostTier], package hostcache), an
//     optional remote tier shared by the hosts of a fleet ([RemoteTier],
//     package redistier), then the source. What comes from the source is
//     written to the tiers below memory by a background writer, off the
//     read path. Entries are keyed by content identity ([cache.PageKey]:
//     the collection's identity and the page's SHA-256), never by mount or
//     tree version, so an unchanged page keeps them across tree versions
//     and restarts. A tier that fails is skipped, never turned into EIO.
//   - Loads: windows of chunks per read miss (windowing), so reading the
//     first KiB of a 50 MiB page does not download 50 MiB; readahead for
//     sequential readers; de-duplicated flights, so 64 readers of one page
//     make one request; host-wide locks, so N processes wanting one page
//     make one.
//   - Prefetch: the first read in a directory loads its walk-order group of
//     about 100 pages, and the next ones, in batched requests running ahead
//     of grep -r (a batch is one request: at most 100 pages and
//     BatchChunks chunks; each page looked up in the tiers first, the
//     rest asked for, verified like any answer), Concurrency-1 batches
//     at a time so that a reader of a page in no batch finds a slot;
//     metadata walks cost nothing. A walk that steps on from group to
//     group keeps its batches in flight (refill) and loads the first
//     windows of its large pages, and of the ancestors it went through,
//     with them.
//     Prefetch all (and auto, for a small collection, or one the host
//     tier holds in a mount process of its own) warms every page once
//     Start is called (after mounting; a host daemon calls it once the
//     attach that placed the collection's first view is done), half the
//     engine's requests in flight (a group of about 100 pages is one
//     batch or more; a directory of more files is a group of its own,
//     of several), pages larger than a window too. Every page a
//     prefetch puts into memory is reported to OnLoaded (the FUSE layer
//     pushes it into the kernel's page cache). SetTree switches prefetch
//     to a refreshed tree.
//   - Sources: the collection ([Source]); a lazy pointer's content comes
//     from its URI ([URISource], package lazy); a page mapped onto another
//     tool's records from those records. What another party may change is
//     checked piece by piece against the digests the tree records.
//     ReadAtFrom also names the tier that served a read (the access log).
//   - Failure policy: a bound on requests in flight, a deadline per attempt,
//     retries with capped jittered backoff for temporary failures,
//     back-pressure ([ErrBusy]: HTTP 429/503) waited out within the read's
//     budget, a failed read's re-read answered at once and a single
//     attempt per load while the source keeps failing (failure.go: both
//     bounded, and neither keeps the first read after the server is back
//     from it), panics turned into errors. Any error it
//     returns means "no bytes": callers never see a short or zero-filled
//     read.
//
// It is tested without a kernel or a server (a fake Source); the real
// thing is tested in integration_test.
package content

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/tree"
)

// Ref names one version of a page in the source.
type Ref struct {
	Slug string
	// SHA256 selects the chunks written for this version; "" accepts any
	// chunk of the page (collections not written by chromafs-ingest).
	SHA256 string
	// Chunks are the known chunk lengths; nil when unknown.
	Chunks []int64
	// Parts map a page onto other writers' records (tree.File.Records).
	Parts []tree.Part
}

// Page is one page of a batch: its chunks in index order, or why they
// could not be trusted.
type Page struct {
	Chunks []string
	Err    error
}

// Source is where content comes from.
type Source interface {
	// FetchPage returns the chunks of ref with the given indexes, in index
	// order; nil idx means every chunk.
	FetchPage(ctx context.Context, ref Ref, idx []int) ([]string, error)
	// FetchPages returns whole pages; the error is for the transport, a
	// page that cannot be trusted gets its own Page.Err.
	FetchPages(ctx context.Context, refs []Ref) (map[string]Page, error)
}

// Errors a Source wraps so that the engine knows what to do.
var (
	// ErrTemporary: may go away by itself (unreachable, timed out, 5xx):
	// retried Retries times.
	ErrTemporary = errors.New("temporary failure")
	// ErrBusy: back-pressure (HTTP 429/503, a quota): asked again while
	// the read's budget lasts.
	ErrBusy = errors.New("source busy")
	// ErrBadPage: the chunks do not fit what the tree records.
	ErrBadPage = errors.New("page chunks inconsistent")
)

// URISource fetches the content of lazy pointers (package lazy): pages
// whose bytes live at a URI instead of in the source.
type URISource interface {
	// FetchRange returns exactly the bytes [off, off+n) at uri, or an
	// error wrapping ErrTemporary or ErrBusy when asking again may work.
	FetchRange(ctx context.Context, uri string, off, n int64) ([]byte, error)
}

// HostTier is a cache of pages shared by the mounts of a host
// (hostcache.Cache): verified on every Get, locked across processes so
// that one of them fetches a page the others want at the same moment.
type HostTier interface {
	Get(k cache.PageKey, size int64) ([]byte, bool)
	// Has reports whether an entry for k is on disk, without reading or
	// verifying it (Get does both).
	Has(k cache.PageKey) bool
	Put(k cache.PageKey, data []byte)
	TryLock(k cache.PageKey) (cache.Unlock, bool)
	Lock(ctx context.Context, k cache.PageKey, wait time.Duration) (cache.Unlock, bool)
}

// RemoteTier is a cache of pages shared by the hosts of a fleet
// (redistier.Tier), below the host tier: verified on every Get, skipped
// when it fails.
type RemoteTier interface {
	Get(ctx context.Context, k cache.PageKey, size int64) ([]byte, bool)
	Put(k cache.PageKey, data []byte)
}

// Prefetch modes. Auto is dir, plus all when the collection is small:
// its visible pages add up to at most SmallCollection and a quarter of the
// memory cache. Fetched once per host (the host tier), all of a small
// collection costs less than the requests a session would make one
// directory at a time, and it arrives while the agent thinks. An engine
// with a memory cache of its own (a mount process, which starts empty;
// a daemon's engines keep their pages from one conversation to the next)
// also warms all when the host tier already holds the pages (a sample of
// them: hostSample) and they fit half its memory cache: a next
// conversation on the host then warms from disk, with no request, what
// it would otherwise read from disk while the agent waits (a docs
// repository of 82 MiB, mostly images, at 25 ms from Chroma: the next
// conversation's session 1.99x the local copy's, 1.03x warmed).
const (
	PrefetchNone = "none"
	PrefetchDir  = "dir"
	PrefetchAll  = "all"
	PrefetchAuto = "auto"
)

// SmallCollection is the most that auto prefetches whole.
const SmallCollection = 64 << 20

// Config tunes an Engine. Zero values take the defaults noted.
type Config struct {
	Identity   string     // the collection's identity (tenant/database/id) in cache keys
	Host       HostTier   // optional host tier, below the memory cache
	Remote     RemoteTier // optional tier shared across hosts, below the host tier
	URIs       URISource  // reads lazy pointers; nil: reading one is an error
	CacheBytes int64      // default 256 MiB
	// Cache, when set, is the memory cache, one of a budget several
	// engines share (chromafsd's, cache.Budget), and CacheBytes what it
	// may hold at most (prefetch judges a collection small against it);
	// its maker closes it after the engine. Nil: a cache of CacheBytes of
	// the engine's own.
	Cache       *cache.Cache
	Prefetch    string        // none, dir, all or auto (default)
	Timeout     time.Duration // per request attempt; default 30s
	Retries     int           // extra attempts for temporary failures; default 0
	WindowBytes int64         // bytes fetched per read miss; default 1 MiB
	Concurrency int           // requests in flight from this engine; default 8
	// BatchChunks is the most chunks one prefetch request asks for: the
	// results the source returns for one request (chroma.MaxGet, Chroma
	// Cloud's limit); default 300.
	BatchChunks int
	// Lookahead is how many groups of ~100 pages a walk prefetches ahead
	// of the one it is in, and the prefetch batches (sent or waiting at
	// the walk's gate) below which refill sends more; default
	// Concurrency-2. The walk's gate (Concurrency-1 batches loading at
	// once) leaves a reader of a page in no batch a request.
	Lookahead int
	FailTTL   time.Duration // how long a failed read's re-read is answered at once; default 500ms, < 0 never
	Log       *slog.Logger
	// Observe, when set, is told how long each host tier lookup ("host"),
	// remote tier lookup ("remote") and request to the source ("source")
	// took.
	Observe func(tier string, d time.Duration)
}

func (c *Config) defaults() {
	if c.CacheBytes <= 0 {
		c.CacheBytes = 256 << 20
	}
	if c.Prefetch == "" {
		c.Prefetch = PrefetchAuto
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	c.Retries = max(c.Retries, 0)
	if c.WindowBytes <= 0 {
		c.WindowBytes = 1 << 20
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 8
	}
	if c.Lookahead <= 0 {
		c.Lookahead = max(c.Concurrency-2, 1)
	}
	if c.BatchChunks <= 0 {
		c.BatchChunks = 300
	}
	if c.FailTTL == 0 {
		c.FailTTL = 500 * time.Millisecond
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	if c.Observe == nil {
		c.Observe = func(string, time.Duration) {}
	}
}

// Engine reads the pages of one tree.
type Engine struct {
	cfg     Config
	src     Source
	cache   *cache.Cache
	flights cache.Flights
	sem     chan struct{} // bounds requests in flight
	// walkGate bounds a walk's prefetch batches loading at once (see
	// loadFiles): Concurrency-1, a request left to a reader of a page in
	// no batch when the walk alone is loading.
	walkGate chan struct{}

	ctx    context.Context // ends at Close: stops prefetch and requests
	cancel context.CancelFunc
	wg     sync.WaitGroup // background prefetch goroutines

	plan       atomic.Pointer[walkPlan]         // the current tree and its prefetch groups
	failed     failures                         // recent failed loads, for the kernel's re-reads
	down       outage                           // the collection's source keeps failing
	windowings sync.Map                         // *tree.File -> *windowing, built on first read
	tiers      []tier                           // the chain above the source, nearest first: memory, host, remote
	tierWrites *writeQueue                      // pages for the tiers below memory, written by tierWriter
	lastRead   atomic.Int64                     // unix nanoseconds of the last ReadAt
	loaded     atomic.Pointer[func(*tree.File)] // see OnLoaded

	fetches, fetchErrors, prefetchPages, fetchedBytes atomic.Int64
	// prefetching counts the prefetch batches in flight (see refill).
	prefetching atomic.Int64
	// ownCache is set when the memory cache is the engine's own (no
	// Config.Cache: a mount process's, which starts empty).
	ownCache bool
	// spawnMu guards closed: no goroutine is started (spawn) once Close
	// has begun.
	spawnMu sync.Mutex
	closed  bool
}

// spawn runs fn in a goroutine Close waits for, unless Close has begun.
func (e *Engine) spawn(fn func()) {
	e.spawnMu.Lock()
	defer e.spawnMu.Unlock()
	if e.closed {
		return
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		fn()
	}()
}

// New returns an engine reading the pages of t from src.
func New(t *tree.Tree, src Source, cfg Config) *Engine {
	cfg.defaults()
	own := cfg.Cache == nil
	if own {
		cfg.Cache = cache.New(cfg.CacheBytes)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Engine{
		cfg: cfg, src: src, ownCache: own,
		cache: cfg.Cache, sem: make(chan struct{}, cfg.Concurrency),
		walkGate: make(chan struct{}, max(cfg.Concurrency-1, 1)),
		ctx:      ctx, cancel: cancel,
	}
	e.flights.Base = ctx
	e.tiers = e.buildTiers()
	e.plan.Store(planWalk(t))
	if cfg.Host != nil || cfg.Remote != nil {
		e.tierWrites = &writeQueue{ready: make(chan struct{}, 1)}
		e.wg.Add(1)
		go e.tierWriter()
	}
	return e
}

// walkPlan is one tree version and its prefetch groups: the directories
// that hold files, in the order grep -r, tar and rg visit them (depth
// first, names sorted), cut into groups of about batchPages files, a
// prefetch batch or more each (loadFiles).
type walkPlan struct {
	tree       *tree.Tree
	groups     [][]*tree.Node     // the directories of each group
	groupOf    map[*tree.Node]int // walk-order group of each directory
	prefetched sync.Map           // group index -> struct{}: its load started
	visited    sync.Map           // *tree.Node (dir) -> struct{}: Prefetch was told of it
	// walked: the plan's *tree.Node for each directory Prefetch was told
	// of, whatever tree it came from (scanLarge's ancestors)
	walked  sync.Map
	scanned sync.Map // group index -> struct{}: scanLarge started its large pages
	// scannedDirs: *tree.Node (dir) -> struct{}, scanLarge started the
	// large pages of that directory
	scannedDirs sync.Map
	// last is the group a walk entered last (Prefetch was told of one of
	// its directories), -1 before any; steps counts the times a walk
	// stepped on: entered one of the lookahead groups after last (see
	// refill).
	last  atomic.Int64
	steps atomic.Int64
}

// enter notes that a walk entered group g, and reports whether that was a
// step on: g is one of the lookahead groups after the one entered last.
func (p *walkPlan) enter(g, lookahead int) bool {
	prev := p.last.Swap(int64(g))
	if prev < 0 || int64(g) <= prev || int64(g) > prev+int64(lookahead) {
		return false
	}
	p.steps.Add(1)
	return true
}

// planned is the plan's directory for dir, whose walk-order group is
// dir's: dir itself, or, for a directory of another tree than the plan's
// (a daemon's views of one collection share its engine, whose plan is one
// view's tree), the plan's directory of the same path; nil when it has
// none.
func (p *walkPlan) planned(dir *tree.Node) *tree.Node {
	if _, ok := p.groupOf[dir]; ok {
		return dir
	}
	return p.tree.Lookup(dir.Path())
}

func planWalk(t *tree.Tree) *walkPlan {
	p := &walkPlan{tree: t, groupOf: map[*tree.Node]int{}}
	p.last.Store(-1)
	inGroup := 0
	tree.Walk(t.Root, func(n *tree.Node) bool {
		files := countFiles(n)
		if !n.IsDir() || files == 0 {
			return true
		}
		if len(p.groups) == 0 || inGroup+files > batchPages {
			p.groups = append(p.groups, nil)
			inGroup = 0
		}
		g := len(p.groups) - 1
		p.groups[g] = append(p.groups[g], n)
		p.groupOf[n] = g
		inGroup += files
		return true
	})
	return p
}

// SetTree makes t the tree that prefetch walks (a refresh swapped it in).
// Reads of files of an earlier tree keep working: content is named by its
// version, not by the tree it came from.
func (e *Engine) SetTree(t *tree.Tree) { e.plan.Store(planWalk(t)) }

func countFiles(dir *tree.Node) int {
	n := 0
	for _, c := range dir.Children {
		if c.File != nil {
			n++
		}
	}
	return n
}

// Start begins the background work the prefetch mode asks for (a mount
// process once its mount answers; a host daemon once the attach that
// placed the collection's first view is done): warming the whole collection for all,
// and for auto when the collection is small or the host tier holds it
// (warmsFromHost). It does not wait: auto's judgement walks the tree in
// the background too.
func (e *Engine) Start() {
	switch e.cfg.Prefetch {
	case PrefetchAll:
		e.startPrefetchAll()
	case PrefetchAuto:
		e.spawn(func() {
			if e.small() || e.warmsFromHost() {
				e.startPrefetchAll()
			}
		})
	}
}

// warmsFromHost reports whether prefetch auto warms the whole collection
// though it is not small: the memory cache is the engine's own, the
// pages fit half of it and the host tier holds them (hostHolds).
func (e *Engine) warmsFromHost() bool {
	return e.ownCache && e.cfg.Host != nil && e.fits(e.cfg.CacheBytes/2) && e.hostHolds()
}

// small reports whether the visible pages, as far as their sizes are
// known, fit SmallCollection and a quarter of the memory cache.
func (e *Engine) small() bool {
	return e.fits(min(int64(SmallCollection), e.cfg.CacheBytes/4))
}

// hostSample is how many pages hostHolds looks for.
const hostSample = 32

// hostHolds reports whether the host tier holds the tree's pages: of the
// pages a batch loads whole (at most a window), hostSample spread over
// the tree in walk order are all on disk.
func (e *Engine) hostHolds() bool {
	var pages []*tree.File
	tree.Walk(e.plan.Load().tree.Root, func(n *tree.Node) bool {
		fl := n.File
		if fl != nil && fl.URI() == "" && len(fl.Chunks) > 0 {
			if size, ok := fl.Size(); ok && size > 0 && size <= e.cfg.WindowBytes {
				pages = append(pages, fl)
			}
		}
		return e.ctx.Err() == nil
	})
	if len(pages) == 0 {
		return false
	}
	step := max(1, len(pages)/hostSample)
	for i := 0; i < len(pages); i += step {
		q := e.query(pages[i], wholeSpan(pages[i]))
		if !q.below || !e.cfg.Host.Has(q.key) {
			return false
		}
	}
	return true
}

// fits reports whether the visible pages, as far as their sizes are
// known, add up to at most limit bytes as the memory cache counts them.
func (e *Engine) fits(limit int64) bool {
	var total int64
	small := true
	tree.Walk(e.plan.Load().tree.Root, func(n *tree.Node) bool {
		if n.File != nil && n.File.URI() == "" {
			size, _ := n.File.Size()
			total += e.cache.Cost(max(size, 0), max(len(n.File.Chunks), 1))
			small = total <= limit
		}
		return small
	})
	return small
}

// startPrefetchAll warms the cache with the whole tree in the background,
// half the engine's requests in flight (its batches share a gate of
// Concurrency/2: 25-80 ms from Chroma, one at a time would take a round
// trip and the server's time per batch) and as many groups started at
// most, then the pages too large for a batch, until the cache is full.
// Each group's budget is its share of the room left, so the groups
// started together take at most half.
func (e *Engine) startPrefetchAll() {
	e.spawn(func() {
		p := e.plan.Load()
		ahead := max(1, e.cfg.Concurrency/2)
		gate := make(chan struct{}, ahead) // half the engine's requests, whatever the groups' sizes
		var inflight []*sync.WaitGroup
		full := false // closed, or the cache has no room left
		for g := range p.groups {
			if len(inflight) == ahead {
				inflight[0].Wait()
				inflight = inflight[1:]
			}
			if full = e.ctx.Err() != nil || e.cache.Room() <= e.cfg.WindowBytes; full {
				break
			}
			wg, _ := e.prefetchGroup(p, g, nil, ahead, gate, nil)
			inflight = append(inflight, wg)
		}
		for _, wg := range inflight {
			wg.Wait()
		}
		if !full {
			e.prefetchLarge(p.tree)
		}
	})
}

// prefetchLarge loads the pages that batches leave out (larger than a
// window) window by window, sharing each window's flight with readers,
// while the cache has room for them; each is reported to OnLoaded once
// whole.
func (e *Engine) prefetchLarge(t *tree.Tree) {
	tree.Walk(t.Root, func(n *tree.Node) bool {
		fl := n.File
		if fl == nil || fl.Chunks == nil || fl.URI() != "" || e.cached(fl) {
			return e.ctx.Err() == nil
		}
		if size, _ := fl.Size(); size > e.cfg.WindowBytes && size <= e.cache.Room()/2 {
			e.prefetchPage(fl)
		}
		return e.ctx.Err() == nil
	})
}

// prefetchPage loads every window of fl; it gives up at the first failure
// (a reader then fetches and reports it).
func (e *Engine) prefetchPage(fl *tree.File) {
	wd := e.windowing(fl)
	for w := 0; w*wd.window < len(fl.Chunks); w++ {
		if _, err := e.flights.Do(e.ctx, windowKey(fl, w), e.loadWindow(fl, wd, w)); err != nil {
			return
		}
	}
	e.prefetchPages.Add(1)
	e.tellLoaded(fl)
}

// Close stops background work and requests, and waits for them.
func (e *Engine) Close() {
	e.spawnMu.Lock()
	e.closed = true
	e.spawnMu.Unlock()
	e.cancel()
	e.wg.Wait()
	e.flights.Wait()
	e.drainTierWrites() // anything a late batch queued
}

// Stats are the counters of one engine.
type Stats struct {
	Cache         cache.Stats
	Fetches       int64 // requests made by reads and prefetch (each may page)
	FetchErrors   int64
	Loads, Shared int64 // de-duplicated loads and callers that shared one
	PrefetchPages int64
	FetchedBytes  int64 // content bytes that came from the source
}

// Stats returns a snapshot of the counters.
func (e *Engine) Stats() Stats {
	return Stats{
		Cache: e.cache.Stats(), Fetches: e.fetches.Load(), FetchErrors: e.fetchErrors.Load(),
		Loads: e.flights.Loads(), Shared: e.flights.Shared(), PrefetchPages: e.prefetchPages.Load(),
		FetchedBytes: e.fetchedBytes.Load(),
	}
}

// String summarises the stats for a log line.
func (s Stats) String() string {
	return fmt.Sprintf("fetches=%d errors=%d cache_hits=%d cache_misses=%d cache_bytes=%d shared=%d prefetched_pages=%d",
		s.Fetches, s.FetchErrors, s.Cache.Hits, s.Cache.Misses, s.Cache.Bytes, s.Shared, s.PrefetchPages)
}
