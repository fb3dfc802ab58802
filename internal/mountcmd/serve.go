package mountcmd

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chromafs/chromafs/accesslog"
	"github.com/chromafs/chromafs/backend"
	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/content"
	"github.com/chromafs/chromafs/fusefs"
	"github.com/chromafs/chromafs/hostcache"
	"github.com/chromafs/chromafs/internal/mountstart"
	"github.com/chromafs/chromafs/internal/sdnotify"
	"github.com/chromafs/chromafs/lazy"
	"github.com/chromafs/chromafs/redistier"
	"github.com/chromafs/chromafs/refresh"
	"github.com/chromafs/chromafs/search"
	"github.com/chromafs/chromafs/tree"
	"github.com/chromafs/chromafs/treeload"
	"github.com/chromafs/chromafs/view"
)

// serve mounts and serves until a signal or an external unmount.
func serve(o *options, ready func(error)) error {
	log, sink, logs, err := setupLogging(o)
	if err != nil {
		return err
	}
	defer logs.Close()
	mp, err := prepareMountpoint(log, o.mountpoint)
	if err != nil {
		return err
	}
	sigs, hups, stopSignals := catchSignals()
	defer stopSignals()
	m := &mounted{log: log, start: time.Now()}
	defer m.close()
	if m.handed = mountstart.AdopterFromEnv(o.conn.URL); m.handed != nil {
		o.conn.Dial = m.handed.DialContext
	}
	if err := m.load(o); err != nil {
		return err
	}
	if err := m.wire(o, mp); err != nil {
		return err
	}
	server, err := mount(log, mp, m.fsys, o, sink)
	if err != nil {
		return err
	}
	defer announce(log, o, mp)()
	ready(nil)
	m.serving(o, mp)
	m.wait(server, mp, sigs, hups)
	return nil
}

// catchSignals catches SIGINT/SIGTERM and SIGHUP from the start: one that
// arrives while mounting unmounts (or checks the tree) as soon as the
// mount exists, instead of killing the process and leaving a dead mount
// behind.
func catchSignals() (sigs, hups chan os.Signal, stop func()) {
	sigs = make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	hups = make(chan os.Signal, 1)
	signal.Notify(hups, syscall.SIGHUP)
	return sigs, hups, func() { signal.Stop(hups); signal.Stop(sigs) }
}

// mounted holds what a mount is made of, closed by close in the reverse
// order of their opening.
type mounted struct {
	log    *slog.Logger
	start  time.Time
	loaded time.Duration       // from start to the tree loaded
	trace  *chroma.Trace       // the requests the mount waited for until it answered (loadTree)
	handed *mountstart.Adopter // a --daemon child's: the connection its parent opened, or nil
	// what trace counted when the mount answered: requests, and round
	// trips one after another
	criticalRequests, criticalTrips atomic.Int64
	host                            *hostcache.Cache
	remote                          *redistier.Tier
	col                             *view.Collection[*chroma.Store]
	view                            *view.View[*chroma.Store]
	res                             treeload.Result
	remembered                      bool // res is the version this host served last, not checked yet (view.View.Remembered)
	engine                          *content.Engine
	fsys                            *fusefs.FS
	access                          *accesslog.Log
	refresher                       *refresh.Refresher
	search                          *search.Searcher // nil with --search=false
	latency                         *prometheus.HistogramVec
	closers                         []func()
}

// later runs fn at close.
func (m *mounted) later(fn func()) { m.closers = append(m.closers, fn) }

func (m *mounted) close() {
	for i := len(m.closers) - 1; i >= 0; i-- {
		m.closers[i]()
	}
}

// load opens the tiers below memory and the collection, and loads the
// tree. Loading the tree only allocates: collect only if the heap passes
// loadHeap, and let tuneGC set the real policy once the mount's first
// commands are served (serving; the heap is bounded meanwhile), which hands
// the load's garbage back. A lower bound made a 100,000-page tree
// of deep paths (38 MB of JSON) collect again and again near it: 1.5 s to
// mount-ready instead of 0.9 s.
func (m *mounted) load(o *options) error {
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(loadHeap)
	ctx, cancel := context.WithTimeout(context.Background(), 4*o.conn.Timeout)
	m.later(cancel)
	if m.host = openHostCache(m.log, o); m.host != nil {
		m.later(m.host.Close)
	}
	o.conn.Limiter = openBudget(m.log, o)
	remote, err := openRedis(m.log, o)
	if err != nil {
		return err
	}
	if m.remote = remote; remote != nil {
		m.later(remote.Close)
	}
	return m.loadTree(ctx, o)
}

// loadTree opens the collection and loads the view of --groups: on a
// host that served it before, the version it served last, with no
// request (checked right after the mount answers, by the refresher);
// else through Chroma.
func (m *mounted) loadTree(ctx context.Context, o *options) error {
	ctx, m.trace = chroma.WithTrace(ctx)
	cfg := view.Config[*chroma.Store]{
		Address: view.AddressOf(o.conn), Open: view.ChromaOpener{Conn: o.conn},
		Layout: o.layout, ScanLimit: o.scanLimit, Limits: tree.DefaultLimits, Log: m.log,
	}
	if m.host != nil {
		cfg.Host = m.host
	}
	col, err := view.Open(ctx, cfg)
	if err != nil {
		return err
	}
	m.later(func() { _ = col.Close() })
	m.col, m.view = col, col.View(o.groupList())
	m.res, m.remembered, err = m.view.LoadRemembered(ctx)
	m.loaded = time.Since(m.start)
	return err
}

// wire builds the read engine, the file system, live refresh and the
// metrics on the loaded tree.
func (m *mounted) wire(o *options, mp string) error {
	m.newEngine(o)
	access, err := openAccessLog(o)
	if err != nil {
		return err
	}
	m.access = access
	m.later(func() { _ = access.Close() })
	fcfg := fusefs.Config{Collection: o.conn.Collection, UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), NoKernelPush: !o.pushPages}
	if access != nil {
		fcfg.Access = access
	}
	if m.search = m.newSearcher(o); m.search != nil {
		fcfg.Search = m.search
		m.later(m.search.Close)
	}
	m.fsys = fusefs.New(m.res.Tree, m.engine, fcfg)
	m.later(m.fsys.Close)
	m.engine.OnLoaded(m.fsys.PageLoaded)
	m.refresher = newRefresher(o, m)
	m.later(m.refresher.Close)
	stopMetrics, err := serveMetrics(m.log, o.metricsAddr, func() *prometheus.Registry { return m.registry(mp, o.conn.Collection) })
	if err != nil {
		return err
	}
	m.later(stopMetrics)
	return nil
}

// newEngine builds the read engine: the memory cache, then the host
// tier, Redis, and the sources (Chroma, lazy pointers).
func (m *mounted) newEngine(o *options) {
	store := m.col.Store()
	m.latency = newLatency()
	cfg := content.Config{
		Identity: store.Identity(), CacheBytes: o.cacheBytes, Prefetch: o.prefetch,
		Timeout: o.conn.Timeout, Retries: 2, Log: m.log, BatchChunks: chroma.MaxGet,
		Observe: func(tier string, d time.Duration) { m.latency.WithLabelValues(tier).Observe(d.Seconds()) },
	}
	if m.host != nil {
		cfg.Host = m.host
	}
	if m.remote != nil {
		cfg.Remote = m.remote
	}
	uris := lazy.New(o.conn.Timeout, o.lazyPrefixes())
	m.later(uris.Close)
	cfg.URIs = backend.URIs(uris)
	m.engine = content.New(m.res.Tree, backend.Chroma(store), cfg)
	m.later(m.engine.Close)
}

// newSearcher makes the searcher of .search/ and .similar/ (nil with
// --search=false).
func (m *mounted) newSearcher(o *options) *search.Searcher {
	cfg := search.Config{Identity: m.col.Store().Identity(), Reader: m.engine, Timeout: o.conn.Timeout, Log: m.log}
	if m.host != nil {
		cfg.Host = m.host
	}
	return backend.NewSearcher(m.col.Store(), o.search, cfg)
}

// serving says the mount answers, then starts what must not delay it:
// the engine's background work and live refresh at once; what only
// serves later, the host tier's copy of the tree (for the next mount on
// this host) and the collector's policy (whose first collection marks the
// whole heap), once the first commands are served (afterFirst). Until
// then the collector stays off, as while loading, under a bound on the
// heap (boundHeap).
func (m *mounted) serving(o *options, mp string) {
	t := m.res.Tree
	sdnotify.Notify(m.log, "READY=1\nSTATUS=serving "+o.conn.Collection+" at "+mp)
	requests := m.trace.Requests()
	trips, waited := m.trace.RoundTrips()
	m.criticalRequests.Store(int64(requests))
	m.criticalTrips.Store(int64(trips))
	m.log.Info("mounted", "mountpoint", mp, "collection", o.conn.Collection, "pid", os.Getpid(), "files", t.Files, "dirs", t.Dirs, "links", t.Links,
		"tree", t.Version[:12], "tree_snapshot", m.res.Snapshot, "tree_unchecked", m.remembered, "tree_load", m.loaded.Round(time.Millisecond), "ready", time.Since(m.start).Round(time.Millisecond),
		"chroma_requests", requests, "chroma_round_trips", trips, "chroma_waited", waited.Round(time.Microsecond),
		"chroma_conn", m.handed.Said())
	if t.Lookup(tree.ReportPath) != nil { // the view's own list: of the files it shows
		m.log.Warn("some files were reassembled from another tool's chunks and are not byte-exact; see the list (unlisted: ls does not show it, cat does)",
			"file", filepath.Join(mp, tree.ReportPath))
	}
	nodes := t.Files + t.Dirs + t.Links
	boundHeap(o.cacheBytes, nodes)
	kept := m.view.Take() // before the refresher runs: a refresh failing at once discards what it kept, not this
	m.engine.Start()
	m.refresher.Start()
	m.afterFirst(func(closing bool) {
		m.handed.Close() // a dial from now on is the mount's own
		kept.Write()
		if !closing {
			tuneGC(o.cacheBytes, nodes) // after the mount answers: a full GC is not free on a large tree
		}
	})
}

// A cold mount's first commands come right after it answers (a user's
// ls, an agent's first look around); on two cores, writing the tree's
// snapshot and a first full collection beside them made them wait (the
// first ls after a cold mount: 2-18 ms, against 2 ms with both later).
// afterFirst lets them pass: it waits until no request has begun for
// firstQuiet (an agent's next command is 100s of ms away), at most
// firstWait.
const (
	firstQuiet = 10 * time.Millisecond
	firstWait  = time.Second
)

// afterFirst runs fn in its own goroutine once the mount is quiet
// (fusefs.FS.Quiet), firstWait after it answers at the latest, or at
// close (closing true), which waits for it.
func (m *mounted) afterFirst(fn func(closing bool)) {
	ctx, cancel := context.WithTimeout(context.Background(), firstWait)
	var closing atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.fsys.Quiet(ctx, firstQuiet)
		fn(closing.Load())
	}()
	m.later(func() { closing.Store(true); cancel(); <-done })
}

// wait serves until the mount is unmounted, or detached after a signal;
// SIGHUP checks the tree meanwhile.
func (m *mounted) wait(server *fuse.Server, mp string, sigs, hups <-chan os.Signal) {
	stopHUP := make(chan struct{})
	defer close(stopHUP)
	go refreshOnSIGHUP(m.log, hups, stopHUP, m.refresher)
	detached := make(chan struct{})
	go unmountOnSignal(m.log, sigs, server, mp, detached)
	served := make(chan struct{})
	go func() { server.Wait(); close(served) }()
	select {
	case <-served:
		sdnotify.Notify(m.log, "STOPPING=1")
		m.log.Info("unmounted", "mountpoint", mp, "stats", m.engine.Stats().String())
	case <-detached:
		m.log.Warn("detached while busy; exiting (open files there now fail)", "mountpoint", mp, "stats", m.engine.Stats().String())
	}
}
