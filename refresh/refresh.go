// Package refresh keeps a mount's tree current without a remount. A
// Refresher polls the collection's tree stamp (one small request: the
// header's recorded SHA-256) every Interval and on Trigger (SIGHUP); when
// the stamp changed it loads the new tree in the background (the same
// treeload path as the mount, so access pruning, validation and the host
// tier's tree cache apply) and hands it to Apply, which swaps it in and
// invalidates what changed in the kernel (fusefs.FS.Swap).
//
// A stamp or tree that fails to load, decode or validate leaves the
// current version served: the failure is logged, counted, and retried at
// the next poll. A mount that serves a version it has not checked (the
// one a host served last, package view's Remembered) sets Unchecked: the
// first poll runs at Start, and polls are retried until one finds the
// version current or swaps the current one in, whatever Interval is.
// Refreshes never overlap: one goroutine does them all, and it ends at
// Close.
package refresh

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromafs/chromafs/tree"
	"github.com/chromafs/chromafs/treeload"
)

// Config wires a Refresher to its source and its mount.
type Config struct {
	// Interval between polls; 0 polls only on Trigger.
	Interval time.Duration
	// Unchecked says the tree served at New was not checked: Start polls
	// at once, and a poll that fails is retried after a second, then
	// twice as long each time up to Interval (a minute when Interval is
	// 0), until one succeeds; then polls follow Interval.
	Unchecked bool
	// Timeout bounds one poll and load; default 1 minute.
	Timeout time.Duration
	// Stamp returns the stored tree's stamp (chroma.Store.TreeStamp).
	Stamp func(ctx context.Context) (string, error)
	// Load loads and builds the stored tree for the mount's groups.
	Load func(ctx context.Context) (treeload.Result, error)
	// Apply swaps t in and returns how many kernel cache entries it
	// invalidated.
	Apply func(t *tree.Tree) int
	// Applied, if set, runs once a new version is swapped in and counted:
	// work that must not delay the swap (keeping the tree in the host
	// tier). It runs on the refresher's goroutine, so Close waits for it.
	Applied func()
	Log     *slog.Logger
}

// Stats are a Refresher's counters.
type Stats struct {
	Version     string    // the served tree's version (tree.Tree.Version)
	Files       int       // files in it
	Polls       int64     // stamps asked for
	Refreshes   int64     // new versions swapped in
	Failures    int64     // polls or loads that failed (the old version stayed)
	Invalidated int64     // kernel cache entries invalidated by refreshes
	LastRefresh time.Time // when the served version was swapped in (zero: at mount)
	LastPoll    time.Time // when a poll last succeeded
}

// Refresher polls and swaps; see the package doc.
type Refresher struct {
	cfg     Config
	trigger chan struct{}
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu    sync.Mutex // protects the following
	stamp string     // the served tree's stamp
	st    Stats

	polls, refreshes, failures, invalidated atomic.Int64
}

// New returns a Refresher for a mount serving t, loaded with stamp.
func New(cfg Config, t *tree.Tree, stamp string) *Refresher {
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Refresher{cfg: cfg, trigger: make(chan struct{}, 1), ctx: ctx, cancel: cancel,
		stamp: stamp, st: Stats{Version: t.Version, Files: t.Files}}
}

// Start begins polling in the background.
func (r *Refresher) Start() {
	r.wg.Add(1)
	go r.run()
}

// Trigger asks for a poll now (SIGHUP); it never blocks, and triggers that
// arrive during a poll fold into one more.
func (r *Refresher) Trigger() {
	select {
	case r.trigger <- struct{}{}:
	default:
	}
}

// Close stops polling and waits for a refresh in progress.
func (r *Refresher) Close() {
	r.cancel()
	r.wg.Wait()
}

func (r *Refresher) run() {
	defer r.wg.Done()
	if r.cfg.Unchecked {
		r.check()
	}
	var tick <-chan time.Time
	if r.cfg.Interval > 0 {
		t := time.NewTicker(r.cfg.Interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-tick:
		case <-r.trigger:
		}
		r.Poll()
	}
}

// check polls until a poll finds the served version current or swaps the
// current one in (Config.Unchecked), backing off between failures.
func (r *Refresher) check() {
	limit := r.cfg.Interval
	if limit <= 0 {
		limit = time.Minute
	}
	wait := min(time.Second, limit)
	for {
		if _, ok := r.poll(); ok {
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-r.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-r.trigger:
			t.Stop()
		}
		wait = min(2*wait, limit)
	}
}

// Poll checks the stamp once and refreshes when it changed; it reports
// whether a new version was swapped in. Errors are logged and counted.
func (r *Refresher) Poll() bool {
	swapped, _ := r.poll()
	return swapped
}

// poll is Poll; current reports that the served version is the current
// one (found so, or swapped in).
func (r *Refresher) poll() (swapped, current bool) {
	ctx, cancel := context.WithTimeout(r.ctx, r.cfg.Timeout)
	defer cancel()
	r.polls.Add(1)
	stamp, err := r.cfg.Stamp(ctx)
	if err != nil {
		r.fail("poll", err)
		return false, false
	}
	r.mu.Lock()
	same := stamp == r.stamp
	r.st.LastPoll = time.Now()
	r.mu.Unlock()
	if same {
		return false, true
	}
	swapped = r.refresh(ctx)
	return swapped, swapped
}

// refresh loads the stored tree and swaps it in.
func (r *Refresher) refresh(ctx context.Context) bool {
	start := time.Now()
	res, err := r.cfg.Load(ctx)
	if err != nil {
		r.fail("load", err)
		return false
	}
	n := r.cfg.Apply(res.Tree)
	r.refreshes.Add(1)
	r.invalidated.Add(int64(n))
	r.mu.Lock()
	r.stamp = res.Stamp
	r.st.Version, r.st.Files, r.st.LastRefresh = res.Tree.Version, res.Tree.Files, time.Now()
	r.mu.Unlock()
	r.cfg.Log.Info("tree refreshed", "tree", short(res.Tree.Version), "files", res.Tree.Files, "dirs", res.Tree.Dirs, "links", res.Tree.Links,
		"invalidated", n, "fetch", res.Fetch.Round(time.Millisecond), "build", res.Build.Round(time.Millisecond),
		"took", time.Since(start).Round(time.Millisecond))
	for _, w := range res.Warnings.List {
		r.cfg.Log.Warn("path tree: " + w)
	}
	if r.cfg.Applied != nil {
		r.cfg.Applied()
	}
	return true
}

func (r *Refresher) fail(what string, err error) {
	r.failures.Add(1)
	r.cfg.Log.Warn("tree refresh failed; still serving the current version", "step", what, "err", err)
}

// Stats returns a snapshot of the counters.
func (r *Refresher) Stats() Stats {
	r.mu.Lock()
	st := r.st
	r.mu.Unlock()
	st.Polls, st.Refreshes, st.Failures, st.Invalidated = r.polls.Load(), r.refreshes.Load(), r.failures.Load(), r.invalidated.Load()
	return st
}

func short(v string) string {
	if len(v) > 12 {
		return v[:12]
	}
	return v
}
