package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/backend"
	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/content"
	"github.com/chromafs/chromafs/hostcache"
	"github.com/chromafs/chromafs/lazy"
	"github.com/chromafs/chromafs/refresh"
	"github.com/chromafs/chromafs/search"
	"github.com/chromafs/chromafs/tree"
	"github.com/chromafs/chromafs/treeload"
	"github.com/chromafs/chromafs/view"
)

// collection is one opened collection with one layout, and its views.
type collection struct {
	d      *Daemon
	key    string // name and layout
	name   string
	layout treeload.Layout
	cfg    view.Config[*chroma.Store]
	col    *view.Collection[*chroma.Store] // nil until prepare opened it
	engine *content.Engine                 // made with the first view
	cache  *cache.Cache                    // the engine's memory cache, one of the host's budget (memory.go)
	uris   *lazy.Client
	budget *hostcache.Budget
	views  map[string]*viewState // by groups key
	// prepared are the views prepare loaded, not placed yet, and
	// preparing counts the attaches between prepare and their end
	// (endPrepareLocked), both by groups key: c closes when it has neither
	// views nor such attaches
	prepared  map[string]preparedView
	preparing map[string]int
	closed    bool
	// mounts every mount of the collection's views, told of pages the
	// engine loaded (to push them into their kernel page caches)
	mounts sync.Map // *mountState -> struct{}
	// live are the views' refreshers, for the poller (which must not wait
	// for d.mu, held across placing attaches)
	live     sync.Map // *viewState -> struct{}
	stopPoll chan struct{}
	polling  sync.WaitGroup
	polls    atomic.Int64           // the poller's checks of the stamp (one request each)
	polled   atomic.Pointer[string] // the stamp the poller found last
	started  sync.Once              // the engine's prefetch (startEngine)
}

// collectionKey names a collection opened with a layout.
func collectionKey(name string, l treeload.Layout) string { return name + "\x00" + layoutKey(l) }

// viewID names the view of the collection of key for groups: 12 hex
// digits, the same for every daemon.
func viewID(key string, groups []string) string {
	sum := sha256.Sum256([]byte(key + "\x00" + groupsKey(groups)))
	return hex.EncodeToString(sum[:6])
}

// layoutKey names a layout for keys and views' ids.
func layoutKey(l treeload.Layout) string {
	b, _ := json.Marshal(l)
	return string(b)
}

// groupsKey is a canonical form of a set of groups.
func groupsKey(groups []string) string {
	g := append([]string(nil), groups...)
	sort.Strings(g)
	return strings.Join(g, ",")
}

// layoutOf is the layout a request asks for, over the daemon's default.
// The key holding records' access groups (--groups-key) is the
// operator's, never a client's: a client naming another (or one no
// record has, which makes every file public) would undo access control
// for a collection without a path tree, so only root may set it.
func (d *Daemon) layoutOf(l api.Layout, root bool) (treeload.Layout, error) {
	if l.GroupsKey != "" && !root && l.GroupsKey != d.cfg.Layout.GroupsKey {
		return treeload.Layout{}, &Error{Code: api.CodeRefused, Err: fmt.Errorf("groups_key %q: the key of records' access groups is the daemon's (--groups-key), not a client's", l.GroupsKey)}
	}
	out := d.cfg.Layout
	if l.Name != "" {
		out = treeload.Layout{Name: l.Name, GroupsKey: d.cfg.Layout.GroupsKey}
	}
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&out.PathKey, l.PathKey)
	set(&out.OrderKey, l.OrderKey)
	set(&out.OffsetKey, l.OffsetKey)
	set(&out.Unit, l.OffsetUnit)
	set(&out.GroupsKey, l.GroupsKey)
	if err := out.Validate(); err != nil {
		return out, &Error{Code: api.CodeBadRequest, Err: err}
	}
	return out, nil
}

// newCollection makes the collection name with layout, not opened yet
// (prepare opens it, outside d.mu). d.mu is held.
func (d *Daemon) newCollection(name string, layout treeload.Layout) (*collection, error) {
	conn := d.cfg.Conn
	conn.Collection = name
	if err := conn.Validate(); err != nil {
		return nil, &Error{Code: api.CodeBadRequest, Err: err}
	}
	key := collectionKey(name, layout)
	c := &collection{d: d, key: key, name: name, layout: layout, views: map[string]*viewState{}, prepared: map[string]preparedView{}, preparing: map[string]int{},
		cache: d.memory.New(d.cfg.CacheBytes)}
	if d.cfg.HostRequests > 0 && d.cfg.CacheDir != "" {
		bkey := strings.Join([]string{conn.URL, conn.Tenant, conn.Database, conn.Collection}, "\x00")
		b, err := hostcache.OpenBudget(d.cfg.CacheDir, bkey, d.cfg.HostRequests)
		if err != nil {
			d.log.Warn("running without the host-wide request budget", "collection", name, "err", err)
		} else {
			c.budget, conn.Limiter = b, b
		}
	}
	cfg := view.Config[*chroma.Store]{
		Address: view.AddressOf(conn), Open: view.ChromaOpener{Conn: conn},
		Layout: layout, ScanLimit: d.cfg.ScanLimit, Limits: tree.DefaultLimits, Log: d.log.With("collection", name),
	}
	if d.cfg.Host != nil {
		cfg.Host = d.cfg.Host
	}
	// a new view of a loaded collection builds from the tree it holds,
	// with no request, and serves the version its other views serve: the
	// collection's one poll confirms that version every interval (a
	// daemon that does not poll serves one version until chromafs
	// refresh)
	cfg.Fresh = 2 * d.cfg.Refresh
	if d.cfg.Refresh <= 0 {
		cfg.Fresh = math.MaxInt64
	}
	c.cfg = cfg
	return c, nil
}

// viewFor returns the view of groups: the one c serves, or the one
// prepare loaded for it. d.mu is held.
func (c *collection) viewFor(groups []string) (*viewState, error) {
	gk := groupsKey(groups)
	if v, ok := c.views[gk]; ok {
		return v, nil
	}
	p, ok := c.prepared[gk]
	if !ok {
		return nil, errViewGone
	}
	delete(c.prepared, gk)
	vw, res := p.vw, p.res
	if c.engine == nil {
		c.newEngine(res.Tree)
	}
	v := &viewState{c: c, id: viewID(c.key, groups), groups: groups, view: vw, mounts: map[string]*mountState{}}
	v.tree.Store(res.Tree)
	v.search = c.newSearcher()
	// polled once per collection (poll), loaded per view when it moved
	v.refresher = vw.Refresher(refresh.Config{Timeout: 4 * c.d.cfg.Conn.Timeout, Apply: v.apply, Unchecked: p.remembered}, res)
	v.kept = vw.Take() // before the refresher runs: a refresh failing at once discards what it kept, not this
	v.refresher.Start()
	if p := c.polled.Load(); p != nil && *p != res.Stamp {
		// the poll found another version than the one built (it moved
		// while this view loaded): this view checks at once, as the
		// others did when the poll found it
		v.refresher.Trigger()
	}
	c.views[gk] = v
	c.live.Store(v, struct{}{})
	if c.stopPoll == nil && c.d.cfg.Refresh > 0 {
		c.stopPoll = make(chan struct{})
		c.polling.Add(1)
		go c.poll(res.Stamp)
	}
	c.d.log.Info("view loaded", "view", v.id, "collection", c.name, "groups", gk, "files", res.Tree.Files, "tree_snapshot", res.Snapshot, "tree_unchecked", p.remembered,
		"reloaded_after_memory_eviction", c.d.reloaded(v.id))
	c.account()
	c.d.relieveSoon()
	return v, nil
}

// newEngine makes the read engine every view of c shares.
func (c *collection) newEngine(t *tree.Tree) {
	store := c.col.Store()
	cfg := c.d.newEngineConfig(store.Identity())
	cfg.Cache = c.cache
	c.uris = lazy.New(c.d.cfg.Conn.Timeout, c.d.cfg.LazyAllow)
	cfg.URIs = backend.URIs(c.uris)
	c.engine = content.New(t, backend.Chroma(store), cfg)
	c.engine.OnLoaded(func(fl *tree.File) {
		c.mounts.Range(func(k, _ any) bool { k.(*mountState).fsys.PageLoaded(fl); return true })
	})
}

// beginLocked writes to the host tier what a view placed for the first
// time fetched or built when it loaded (the tree's text, the view's
// snapshot: viewFor took them, view.View.Take), in the background: the
// attach does not wait for the compressing and writing, nor hold d.mu
// across it. Close waits for it (d.loading); a daemon stopping writes
// nothing new. A view dropped meanwhile still writes its snapshot (the
// next load reads it). d.mu is held.
func (d *Daemon) beginLocked(v *viewState) {
	k := v.kept
	v.kept = view.Kept{}
	if d.loadsStopped || k.Empty() {
		return
	}
	d.loading.Add(1)
	go func() {
		defer d.loading.Done()
		k.Write()
	}()
}

// startEngine starts the engine's prefetch (Config.Prefetch) once, when
// the attach that placed c's first view is done (placed and saved, just
// before its answer): not while it is placed, where it would compete with
// the attach for the host's cores (a dropped view's attach on a busy host
// waited for its own prefetch), and before the conversation reads, so
// that the pages arrive while the agent thinks (started at the first
// request instead, 50 conversations attached at once and reading at once
// made twice the requests and waited 4-5x longer). A closed engine
// starts nothing.
func (c *collection) startEngine() {
	c.started.Do(c.engine.Start) // c.engine is set before any view is placed
}

// newSearcher makes a view's searcher (nil when searching is off): one
// per view, shared by its mounts, reading through the collection's
// engine.
func (c *collection) newSearcher() *search.Searcher {
	store := c.col.Store()
	cfg := search.Config{Identity: store.Identity(), Reader: c.engine, Timeout: c.d.cfg.Conn.Timeout, Log: c.d.log.With("collection", c.name)}
	if c.d.cfg.Host != nil {
		cfg.Host = c.d.cfg.Host
	}
	return backend.NewSearcher(store, c.d.cfg.Search, cfg)
}

func (v *viewState) closeSearch() {
	if v.search != nil {
		v.search.Close()
	}
}

// trigger asks every view to poll now.
func (c *collection) trigger() {
	c.live.Range(func(k, _ any) bool { k.(*viewState).refresher.Trigger(); return true })
}

// poll asks the collection's stamp every Config.Refresh (one small
// request, however many views) and, when it moved, has every view load
// its tree (each checks the stamp again, and loads only if it moved for
// it).
func (c *collection) poll(last string) {
	defer c.polling.Done()
	tick := time.NewTicker(c.d.cfg.Refresh)
	defer tick.Stop()
	for {
		select {
		case <-c.stopPoll:
			return
		case <-tick.C:
		}
		c.polls.Add(1)
		ctx, cancel := context.WithTimeout(context.Background(), 4*c.d.cfg.Conn.Timeout)
		stamp, err := c.col.Stamp(ctx)
		cancel()
		if err != nil {
			c.d.log.Warn("refresh poll failed; the views keep their trees", "collection", c.name, "err", err)
			continue
		}
		c.polled.Store(&stamp)
		if stamp != last {
			last = stamp
			c.trigger()
		}
	}
}

// dropView forgets v once its last mount is gone. d.mu is held.
func (c *collection) dropView(v *viewState) {
	if len(v.mounts) > 0 {
		return
	}
	c.live.Delete(v)
	v.refresher.Close()
	v.closeSearch()
	delete(c.views, groupsKey(v.groups))
	c.d.log.Info("view dropped", "view", v.id, "collection", c.name)
	c.closeIfUnused()
}

// closeIfUnused closes c and forgets it once it has no view and no attach
// is preparing it. d.mu is held.
func (c *collection) closeIfUnused() {
	if len(c.views) > 0 || len(c.preparing) > 0 || c.closed {
		return
	}
	c.close(true)
	if c.d.collections[c.key] == c {
		delete(c.d.collections, c.key)
	}
}

// close stops c's views (their mounts' servers end; with unmount, the
// mounts in STATE_DIR/mnt go too) and its engine.
func (c *collection) close(unmount bool) {
	if c.closed {
		return
	}
	c.closed = true
	if c.stopPoll != nil {
		close(c.stopPoll)
		c.polling.Wait()
		c.stopPoll = nil
	}
	for _, v := range c.views {
		v.refresher.Close()
		for _, m := range v.mounts {
			m.stop(unmount)
		}
		v.closeSearch()
	}
	if c.engine != nil {
		c.engine.Close()
	}
	c.cache.Close()
	if c.uris != nil {
		c.uris.Close()
	}
	if c.col != nil {
		_ = c.col.Close()
	}
}

func (c *collection) sortedViews() []*viewState {
	out := make([]*viewState, 0, len(c.views))
	for _, v := range c.views {
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (c *collection) status() api.Collection {
	s := api.Collection{Name: c.name, Views: len(c.views), Polls: c.polls.Load()}
	if c.col != nil { // nil while an attach opens it
		s.Requests = c.col.Store().Requests()
	}
	if c.engine != nil {
		st := c.engine.Stats()
		s.PagesCached, s.CacheBytes, s.Fetched = int64(st.Cache.Entries), st.Cache.Bytes, st.FetchedBytes
	}
	st := c.cache.Stats()
	s.MemoryBytes, s.PageEvictions = st.Pinned, st.Evictions
	return s
}

// viewState is one view: its tree, its refresher, its mounts.
type viewState struct {
	c         *collection
	id        string
	groups    []string
	view      *view.View[*chroma.Store]
	tree      atomic.Pointer[tree.Tree]
	refresher *refresh.Refresher
	search    *search.Searcher       // nil when searching is off
	mounts    map[string]*mountState // by mount key (a user's shared one, or a private attachment's)
	reads     atomic.Int64
	bytes     atomic.Int64
	errors    atomic.Int64
	kept      view.Kept // what its load kept for the host tier, until beginLocked writes it
}

// apply swaps a refreshed tree into every mount of v.
func (v *viewState) apply(t *tree.Tree) int {
	v.tree.Store(t)
	if v.c.engine != nil {
		v.c.engine.SetTree(t)
	}
	n := 0
	v.c.mounts.Range(func(k, _ any) bool {
		if m := k.(*mountState); m.view == v {
			st := m.fsys.Swap(t)
			n += st.Entries + st.Inodes
		}
		return true
	})
	return n
}

func (v *viewState) status(linger time.Duration) api.View {
	t := v.tree.Load()
	n := 0
	for _, m := range v.mounts {
		n += m.attachments
	}
	out := api.View{
		ID: v.id, Collection: v.c.name, Groups: append([]string{}, v.groups...), Layout: apiLayout(v.c.layout),
		Attachments: n, Files: t.Files, Tree: t.Version[:min(12, len(t.Version))],
		Reads: v.reads.Load(), Bytes: v.bytes.Load(), Errors: v.errors.Load(), Inexact: t.Inexact(),
	}
	if n, until := v.lingeringMounts(linger); n > 0 {
		out.Lingering, out.LingerUntil = n, &until
	}
	if v.search != nil {
		st := v.search.Stats()
		out.Searches, out.SearchFailures, out.SearchIndexBytes = st.Searches, st.Failures, st.Index.MemoryBytes
	}
	return out
}

func apiLayout(l treeload.Layout) api.Layout {
	return api.Layout{Name: l.Name, PathKey: l.PathKey, OrderKey: l.OrderKey, OffsetKey: l.OffsetKey, OffsetUnit: l.Unit, GroupsKey: l.GroupsKey}
}

// counting is the engine as one view's mounts read it: it counts the
// view's reads, bytes and errors.
type counting struct {
	*content.Engine
	v *viewState
}

func (r counting) ReadAt(ctx context.Context, fl *tree.File, dest []byte, off int64) (int, error) {
	n, err := r.Engine.ReadAt(ctx, fl, dest, off)
	r.count(n, err)
	return n, err
}

func (r counting) ReadAtFrom(ctx context.Context, fl *tree.File, dest []byte, off int64) (int, string, error) {
	n, tier, err := r.Engine.ReadAtFrom(ctx, fl, dest, off)
	r.count(n, err)
	return n, tier, err
}

func (r counting) count(n int, err error) {
	r.v.reads.Add(1)
	r.v.bytes.Add(int64(n))
	if err != nil {
		r.v.errors.Add(1)
	}
}

// describeView names a view for messages.
func describeView(name string, groups []string) string {
	if len(groups) == 0 {
		return fmt.Sprintf("collection %q (public pages)", name)
	}
	return fmt.Sprintf("collection %q with groups %s", name, strings.Join(groups, ","))
}
