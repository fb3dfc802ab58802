// Package daemon is chromafsd's core: one process per host serving every
// view of every collection it is asked for, to conversations that get
// their view as a directory and hand it to a sandbox.
//
// # Collections, views, mounts, attachments
//
//	collection   (name, layout): opened once (package view), one read
//	  │          engine (memory cache, host tier, Redis, the host-wide
//	  │          request budget) shared by all its views
//	  ▼
//	view         (collection, groups): its pruned tree, loaded again
//	  │          when the collection's one poll finds its stamp moved,
//	  │          swapped into every mount of it
//	  ▼
//	mount        a FUSE mount of a view, in the daemon's own directory
//	  │          (STATE_DIR/mnt, root only): one per view shared by the
//	  │          attachments of all its users (idmapped copies, owners.go;
//	  │          one per (view, user) where the kernel makes none, and for
//	  │          attachments with an access log), so their conversations
//	  │          share one kernel page cache; one of its own per private
//	  │          attachment (its own page cache, a complete access log);
//	  │          a shared one outlives its last attachment for
//	  │          Config.Linger, warm for the next (linger.go)
//	  ▼
//	attachment   a copy of a mount (open_tree + move_mount) placed on the
//	             caller's directory, a shared mount, for one conversation
//
// An attachment's root belongs to its user (the caller, or whom root
// serves it to with --owner) with mode 0500, so no other user of the host
// can list or read it, however it is placed: the mount's own root is, or
// the copy is idmapped to show root's files as the user's; the kernel
// checks that on every access (default_permissions), whatever it has
// cached. The
// front ends' mounts (CSI, Docker) are root's with 0555: their paths are
// private to the one pod or container they are bound into. Root daemon only: without privileges there are no copies,
// and every attachment is a FUSE mount of its own at its path
// (fusermount3), for the daemon's own user only, who may attach anything
// (as root may of a root daemon); after a restart its dead mounts are
// cleared and mounted again (nothing can be stacked without privileges,
// so sandboxes must bind them again).
//
// # Who may attach what, and where
//
// Who asks comes from the socket (package peercred), what they may see
// from the policy (package policy: root anything, others what a rule
// grants; a group not granted is refused, never narrowed), where they may
// attach from the way fusermount3 checks a mount point (package
// mountpath: an empty directory the caller owns and may write, reached as
// the caller without a symbolic link, and the mount placed on the very
// directory that was checked). An access log is a file the caller could
// write. Nothing a client says about itself is believed.
//
// # Restarts
//
// Attachments are kept in STATE_DIR (attachments.json and the journal of
// changes since it, see journal.go; with each copy's mount id). A daemon
// that stops, is killed or upgraded leaves its attachments' mounts in
// place (they answer ENOTCONN meanwhile). The next daemon re-creates
// every recorded attachment: a new mount of its view, and a copy of it
// stacked on the old one at the path (found by its mount id, not its
// name). Because the old copy was a shared mount, the new one
// propagates into the copies sandboxes made of it (bwrap --ro-bind, a
// Docker bind with rslave propagation): their new lookups answer again
// without restarting them. A descriptor opened into the old mount (a
// shell's working directory) stays on it: what the kernel cached of it
// answers, the rest is ENOTCONN.
// Detach (and Config.DetachOnExit) leave no mount behind but a lingering
// one, which Close drops.
//
// # Bounds
//
// Every client is hostile input: no subject may take what the host has
// for everyone (bounds.go). Each holds at most its policy limits
// (attachments, FUSE mounts, private attachments, layouts of its own);
// the host-wide bounds
// (Config.MaxMounts, Config.MaxAttachments) keep a reserve for root; a
// user holds at most Config.MaxConnsPerPeer API connections, idle ones
// are closed (server.go); a user's path resolutions that wait on a file
// system are bounded (package mountpath), and an access log is written
// from a bounded queue, never inside a FUSE request or under d.mu
// (package accesslog, NewQueued).
//
// Threads: go-fuse runs a few reader goroutines per mount (one while
// idle, up to min(GOMAXPROCS, 16) under load), each an OS thread while
// blocked in read(2); mounts are few (one per view, plus private ones
// and those of attachments with an access log), bounded by Config.MaxMounts, and the runtime's thread limit is
// raised to what that many mounts may need, so the bound met is a clear
// refusal, never the runtime's fatal one. Shared attachments cost no
// thread and no descriptor (a copy of a mount is not served apart).
// Memory: one budget for the host (Config.MemoryBytes, memory.go) bounds
// what grows with the data, every collection's pages, trees, views and
// search indexes, evicting what has gone unused longest (pages, then idle
// views whole) with a fair share for each collection, and with
// Config.CountHeap what else the heap holds; Go's soft limit
// (Config.MemoryLimit) a little above it bounds the garbage. Measured, a
// shared attachment costs a few KiB, a private one under 1 MiB.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/chromafs/chromafs/accesslog"
	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/backend"
	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/content"
	"github.com/chromafs/chromafs/hostcache"
	"github.com/chromafs/chromafs/internal/proc"
	"github.com/chromafs/chromafs/mountpath"
	"github.com/chromafs/chromafs/policy"
	"github.com/chromafs/chromafs/redistier"
	"github.com/chromafs/chromafs/treeload"
)

// Config is what a Daemon serves with.
type Config struct {
	// Conn is the Chroma server, tenant, database, token and timeout of
	// every collection (Conn.Collection is not used: clients name it).
	// Its Pool is the daemon's: every collection shares its connections.
	Conn chroma.Config
	// KeepWarm is how often a heartbeat keeps a connection to the server
	// open, so that the first attach of a collection does not pay its
	// handshakes (chroma.Pool); 0 means 30 s, below 0 none.
	KeepWarm time.Duration
	// Host and Remote are the host and Redis tiers (nil: none).
	Host   *hostcache.Cache
	Remote *redistier.Tier
	// CacheDir holds the host-wide request budget's slots.
	CacheDir string
	// HostRequests bounds requests in flight per collection from every
	// chromafs process of the host (0: no bound).
	HostRequests int
	// MemoryBytes is the host's memory budget (memory.go): every
	// collection's pages, decoded trees, views and search indexes;
	// default 1 GiB. MemoryCheck is how often what they hold is counted
	// again (default 1s).
	MemoryBytes int64
	MemoryCheck time.Duration
	// CountHeap counts against the budget what the process's heap holds
	// beyond the budget's own figures (memory.go, heapMeter): for a
	// process that is the daemon's alone (chromafsd), whose heap is then
	// the daemon's.
	CountHeap bool
	// CacheBytes bounds one collection's pages within the budget (0: its
	// fair share of the budget is its only bound).
	CacheBytes int64
	// MemoryLimit is the process's soft memory limit (the collector's),
	// above MemoryBytes: it bounds the garbage between two collections
	// (chromafsd's default: MemoryBytes + 15% + 64 MiB); 0 leaves Go's
	// default.
	MemoryLimit int64
	Prefetch    string
	Refresh     time.Duration
	PushPages   bool
	// Search turns on .search/ and .similar/ in every view, and names the
	// embedding function for collections that keep none.
	Search backend.SearchOptions
	// LazyAllow are the URL prefixes lazy pointers may be read from (nil:
	// any http(s) URL; empty: none).
	LazyAllow []string
	// Layout is the default layout of collections without a path tree;
	// ScanLimit bounds a scan.
	Layout    treeload.Layout
	ScanLimit int
	// StateDir keeps the attachments (attachments.json) and the daemon's
	// own mounts (mnt/).
	StateDir string
	Policy   *policy.Policy
	// MaxMounts bounds FUSE mounts (views' and private ones); default 1000.
	// MaxAttachments bounds the attachments (each a mount on the host's
	// mount table, below fs.mount-max); default 10000. Both keep a reserve
	// (a sixteenth) that only root may use, so that no other subject can
	// fill them for root. Each subject's share is the policy's (Limits).
	MaxMounts      int
	MaxAttachments int
	// MaxConnsPerPeer bounds the API connections one user (not root) holds
	// open, MaxConns those of every user but root together; defaults 32
	// and 512. Idle connections are closed after APIIdle (default 30s).
	MaxConnsPerPeer, MaxConns int
	APIIdle                   time.Duration
	// AccessLogQueue bounds, in bytes, what an access log may hold that its
	// file has not taken yet, AccessLogBudget what all of them may hold
	// together (events past either are dropped and counted); defaults 1
	// MiB and 64 MiB.
	AccessLogQueue  int
	AccessLogBudget int64
	// UserGroups gives a user's primary and supplementary groups as the
	// system's user database says now (a restore judges the policy with
	// them); nil: package os/user.
	UserGroups func(uid uint32) (gid uint32, groups []uint32, err error)
	// DetachOnExit makes Close detach every attachment (else they are
	// kept for the next daemon).
	DetachOnExit bool
	// Linger is how long a shared mount outlives its last attachment,
	// for the next conversation of its view to find it warm (linger.go);
	// 0: it goes with its last attachment.
	Linger time.Duration
	Log    *slog.Logger
}

// Daemon serves views; its methods may be called from many goroutines.
type Daemon struct {
	cfg        Config
	log        *slog.Logger
	privileged bool         // euid 0: mounts in STATE_DIR/mnt and copies on paths
	mountNS    string       // proc.MountNamespace(): what the records' mount ids are numbers of
	idmap      bool         // privileged, and the kernel makes idmapped copies of a FUSE mount (owners.go)
	privateMnt bool         // STATE_DIR/mnt is a private mount (privateMountDir)
	pool       *chroma.Pool // the connections to Chroma every collection shares
	policy     atomic.Pointer[policy.Policy]

	state *stateStore // the records, across restarts

	// attaches placed, and the requests to Chroma and round trips (one
	// after another) they waited for (chroma.Trace)
	attaches, attachRequests, attachRoundTrips atomic.Int64
	conns                                      *connLimiter
	logs                                       *accesslog.Budget // what every access log holds, not written yet
	// the host's memory budget (memory.go): views dropped for it and
	// loaded again after; watchMemory runs until stopWatch closes
	memory                 *cache.Budget
	heap                   *heapMeter    // nil unless Config.CountHeap
	placed                 chan struct{} // relieveSoon's signal to watchMemory
	viewEvictions, reloads atomic.Int64
	stopWatch              chan struct{}
	stopWatchOnce          sync.Once
	watching               sync.WaitGroup
	// opens of collections and loads of views (prepare.go), cancelled by
	// Close (loadsCtx), which waits for them (loading)
	loads       singleflight.Group
	loadsCtx    context.Context
	cancelLoads context.CancelFunc
	loading     sync.WaitGroup

	mu          sync.Mutex       // protects the following; held across placing an attach (not its loads: prepare.go) and detach
	closing     []*accesslog.Log // logs let go of, closed by unlock once d.mu is free
	collections map[string]*collection
	attachments map[string]*attachment // by id
	byPath      map[string]*attachment
	pending     map[string]record // restored records waiting for Chroma, by id
	retrying    chan struct{}     // closed by Close: retryPending ends
	// loadsStopped is set by Close before it waits for the loads: no
	// attach prepares after it (prepare.go)
	loadsStopped bool
	retries      sync.WaitGroup
	lingering    sync.WaitGroup // linger timers that have not run or been stopped
	mounts       int
	idmaps       map[[2]uint32]*mountpath.IDMap // by owner uid, gid (owners.go)
	evicted      map[string]struct{}            // ids of views dropped for memory (memory.go)
	overWarned   time.Time                      // when the log last said the attached views pass the budget
	closed       bool
}

// New prepares a daemon; Restore then re-creates what the last one had.
func New(cfg Config) (*Daemon, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxMounts <= 0 {
		cfg.MaxMounts = 1000
	}
	if cfg.MaxAttachments <= 0 {
		cfg.MaxAttachments = 10000
	}
	if cfg.MaxConnsPerPeer <= 0 {
		cfg.MaxConnsPerPeer = 32
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = 512
	}
	if cfg.APIIdle <= 0 {
		cfg.APIIdle = 30 * time.Second
	}
	if cfg.AccessLogQueue <= 0 {
		cfg.AccessLogQueue = 1 << 20
	}
	if cfg.AccessLogBudget <= 0 {
		cfg.AccessLogBudget = 64 << 20
	}
	if cfg.UserGroups == nil {
		cfg.UserGroups = systemGroups
	}
	if cfg.ScanLimit <= 0 {
		cfg.ScanLimit = 20000
	}
	if cfg.MemoryBytes <= 0 {
		cfg.MemoryBytes = 1 << 30
	}
	if cfg.MemoryCheck <= 0 {
		cfg.MemoryCheck = memoryCheck
	}
	if cfg.Layout.Name == "" {
		cfg.Layout.Name = "auto"
	}
	if cfg.Policy == nil {
		cfg.Policy = &policy.Policy{}
	}
	if !filepath.IsAbs(cfg.StateDir) {
		return nil, fmt.Errorf("state directory %q: want an absolute path", cfg.StateDir)
	}
	for _, d := range []string{cfg.StateDir, filepath.Join(cfg.StateDir, "mnt")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("state directory: %w", err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("state directory: %w", err)
		}
	}
	if cfg.MemoryLimit > 0 {
		debug.SetMemoryLimit(cfg.MemoryLimit)
	}
	// go-fuse reads each mount's requests with up to min(GOMAXPROCS, 16)
	// goroutines, each an OS thread while blocked in read(2): room for
	// every mount allowed, so that MaxMounts, not the runtime's default
	// 10,000 threads (a fatal error), is the bound met.
	if want := cfg.MaxMounts*(min(runtime.GOMAXPROCS(0), 16)+2) + 1000; want > 10000 {
		debug.SetMaxThreads(want)
	}
	d := &Daemon{
		cfg: cfg, log: cfg.Log, privileged: os.Geteuid() == 0, mountNS: proc.MountNamespace(), state: newStateStore(cfg.StateDir),
		conns: newConnLimiter(cfg.MaxConnsPerPeer, cfg.MaxConns), logs: accesslog.NewBudget(cfg.AccessLogBudget),
		collections: map[string]*collection{}, attachments: map[string]*attachment{}, byPath: map[string]*attachment{},
		pending: map[string]record{}, memory: cache.NewBudget(cfg.MemoryBytes), stopWatch: make(chan struct{}), placed: make(chan struct{}, 1),
	}
	if cfg.CountHeap {
		d.heap = newHeapMeter(readHeap)
	}
	d.policy.Store(cfg.Policy)
	if d.privileged {
		if err := mountFusectl(); err != nil {
			d.log.Warn("no fusectl: a stop or a detach waits for sandboxes' copies of a mount to go", "err", err)
		}
		if err := privateMountDir(filepath.Join(cfg.StateDir, "mnt")); err != nil {
			return nil, fmt.Errorf("state directory: %w", err)
		}
		d.privateMnt = true
		d.probeIDMap()
	}
	keepWarm := cfg.KeepWarm
	if keepWarm == 0 {
		keepWarm = 30 * time.Second
	}
	d.loadsCtx, d.cancelLoads = context.WithCancel(context.Background())
	d.pool = chroma.NewPool(cfg.Conn, keepWarm, d.log)
	d.cfg.Conn.Pool = d.pool
	d.watching.Add(1)
	go d.watchMemory(d.stopWatch)
	return d, nil
}

// Close stops serving: lingering mounts are dropped, every other mount's
// server ends (their mounts stay, dead, for the next daemon to stack on),
// unless Config.DetachOnExit, when every attachment is detached first. Attachments stay recorded either
// way but for the detached ones.
func (d *Daemon) Close() {
	d.stopWatchOnce.Do(func() { close(d.stopWatch) })
	d.watching.Wait()
	d.mu.Lock()
	if d.retrying != nil {
		close(d.retrying)
		d.retrying = nil
	}
	d.loadsStopped = true
	d.mu.Unlock()
	d.cancelLoads()
	d.retries.Wait()
	d.loading.Wait()         // no open or load uses a collection Close closes
	defer d.lingering.Wait() // a linger timer firing now finds d.closed
	d.mu.Lock()
	defer d.unlock()
	if d.closed {
		return
	}
	d.closed = true
	d.dropLingering()
	if d.cfg.DetachOnExit {
		for _, a := range d.sortedAttachments() {
			if err := d.detachLocked(a); err != nil {
				d.log.Warn("detach at exit", "attachment", a.ID, "path", a.Path, "err", err)
			}
		}
		d.compactLocked()
	}
	d.state.close()
	for _, c := range d.collections {
		c.close(d.cfg.DetachOnExit)
	}
	d.closeIDMaps()
	d.pool.Close()
	if d.privateMnt && len(d.attachments) == 0 && len(d.pending) == 0 {
		// nothing of it left for the next daemon (--detach-on-exit, or
		// none attached): the private bind of its mount directory goes too
		if err := syscall.Unmount(filepath.Join(d.cfg.StateDir, "mnt"), syscall.MNT_DETACH); err != nil {
			d.log.Warn("unmount the daemon's mount directory", "err", err)
		}
	}
	d.log.Info("stopped", "attachments_kept", len(d.attachments))
}

// unlock releases d.mu, then closes the access logs let go of meanwhile:
// a log's Close waits for what it queued to reach its file, never under
// d.mu.
func (d *Daemon) unlock() {
	logs := d.closing
	d.closing = nil
	d.mu.Unlock()
	for _, l := range logs {
		_ = l.Close()
	}
}

// closeLater has unlock close l (nil: nothing). d.mu is held.
func (d *Daemon) closeLater(l *accesslog.Log) {
	if l != nil {
		d.closing = append(d.closing, l)
	}
}

// newAccessLog is an attachment's access log on f: written by a
// goroutine of its own from a bounded queue, so that neither a FUSE
// request nor the daemon's lock ever waits on the file.
func (d *Daemon) newAccessLog(f *os.File) *accesslog.Log {
	return accesslog.NewQueued(f, d.cfg.AccessLogQueue, d.logs)
}

// Refresh asks the views of collection ("" every one) to check for a
// new tree now, and returns how many collections it asked. A caller who
// is not root reaches only collections it has attachments of.
func (d *Daemon) Refresh(uid uint32, collectionName string) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	mine := map[*collection]bool{}
	for _, a := range d.attachments {
		if uid == 0 || a.UID == uid {
			mine[a.mount.view.c] = true
		}
	}
	n := 0
	for _, c := range d.collections {
		if mine[c] && (collectionName == "" || c.name == collectionName) {
			c.trigger()
			n++
		}
	}
	if n == 0 && collectionName != "" {
		return 0, &Error{Code: api.CodeNotFound, Err: fmt.Errorf("no view of collection %q is attached", collectionName)}
	}
	return n, nil
}

// Status lists what the daemon serves: everything for root, else the
// caller's own attachments and the views and collections they use.
func (d *Daemon) Status(uid uint32) api.Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	var st api.Status
	if uid == 0 { // every one listed: room for them at once (a host's list, polled, of a thousand sites)
		views := 0
		for _, c := range d.collections {
			views += len(c.views)
		}
		if views > 0 { // none: the lists stay null, as they were
			st.Collections, st.Views = make([]api.Collection, 0, len(d.collections)), make([]api.View, 0, views)
		}
	}
	// what a user's listing shows beyond its attachments (root's shows all)
	var seenView map[*viewState]bool
	var seenCol map[*collection]bool
	if uid != 0 {
		seenView, seenCol = map[*viewState]bool{}, map[*collection]bool{}
	}
	for _, a := range d.sortedAttachments() {
		if uid != 0 && a.UID != uid {
			continue
		}
		st.Attachments = append(st.Attachments, a.Attachment)
		if uid != 0 {
			seenView[a.mount.view] = true
			seenCol[a.mount.view.c] = true
		}
	}
	for _, c := range d.collections { // a user's own lingering mounts
		for _, v := range c.views {
			for _, m := range v.mounts {
				if uid != 0 && m.linger != nil && (m.lingerUID == uid || m.uid == uid) {
					seenView[v], seenCol[c] = true, true
				}
			}
		}
	}
	for _, r := range d.sortedPending() {
		if uid == 0 || r.UID == uid {
			st.Attachments = append(st.Attachments, api.Attachment{ID: r.ID, Path: r.Path, UID: r.UID, Owner: r.OwnerUID, Private: r.Private, Created: r.Created, Waiting: true})
		}
	}
	for _, c := range d.sortedCollections() {
		if uid != 0 && !seenCol[c] {
			continue
		}
		cs := c.status()
		if uid != 0 { // the whole collection's, every view's: the host's figures
			cs.MemoryBytes, cs.PageEvictions = 0, 0
		}
		st.Collections = append(st.Collections, cs)
		for _, v := range c.sortedViews() {
			if uid == 0 || seenView[v] {
				st.Views = append(st.Views, v.status(d.cfg.Linger))
			}
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	mem := d.memory.Stats()
	st.Memory = api.Memory{Limit: debug.SetMemoryLimit(-1), Heap: int64(ms.HeapInuse)}
	if uid == 0 { // the host's figures, not a user's
		st.Memory.Budget, st.Memory.Pages, st.Memory.Trees, st.Memory.Overhead, st.Memory.PageEvictions = mem.MaxBytes, mem.Bytes, mem.Pinned, mem.Overhead, mem.Evictions
		st.Memory.ViewEvictions, st.Memory.Reloads = d.viewEvictions.Load(), d.reloads.Load()
	}
	st.Memory.RSS, _ = proc.RSS(os.Getpid())
	st.Threads, st.FDs = threadsAndFDs()
	return st
}

func (d *Daemon) sortedAttachments() []*attachment {
	out := make([]*attachment, 0, len(d.attachments))
	for _, a := range d.attachments {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func (d *Daemon) sortedCollections() []*collection {
	out := make([]*collection, 0, len(d.collections))
	for _, c := range d.collections {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// threadsAndFDs reads the process's thread count and open descriptors.
func threadsAndFDs() (int, int) {
	threads := 0
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Threads:"); ok {
				fmt.Sscan(strings.TrimSpace(v), &threads)
			}
		}
	}
	fds, _ := os.ReadDir("/proc/self/fd")
	return threads, len(fds)
}

// Error is a failure with the API's code for it.
type Error struct {
	Code string
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// codeOf is the API code of err.
func codeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	switch {
	case errors.Is(err, chroma.ErrNotFound):
		return api.CodeNotFound
	case chroma.Retryable(err), errors.Is(err, context.DeadlineExceeded):
		return api.CodeUnavailable
	}
	return api.CodeInternal
}

// newEngineConfig is the read engine's configuration for a collection.
func (d *Daemon) newEngineConfig(identity string) content.Config {
	// the engine judges a collection small (prefetch auto) against a
	// quarter of what its cache may hold: the budget, or its own bound
	cacheBytes := d.cfg.MemoryBytes
	if d.cfg.CacheBytes > 0 {
		cacheBytes = min(cacheBytes, d.cfg.CacheBytes)
	}
	cfg := content.Config{
		Identity: identity, CacheBytes: cacheBytes, Prefetch: d.cfg.Prefetch,
		Timeout: d.cfg.Conn.Timeout, Retries: 2, Log: d.log, BatchChunks: chroma.MaxGet,
	}
	if d.cfg.Host != nil {
		cfg.Host = d.cfg.Host
	}
	if d.cfg.Remote != nil {
		cfg.Remote = d.cfg.Remote
	}
	return cfg
}

// SetPolicy replaces the policy (SIGHUP): later requests, and the next
// restore, follow it; attachments made already stay.
func (d *Daemon) SetPolicy(p *policy.Policy) { d.policy.Store(p) }

// Policy is the policy in force (SetPolicy swaps it): the front ends that
// judge their own requests (Docker's create) read it here.
func (d *Daemon) Policy() *policy.Policy { return d.policy.Load() }
