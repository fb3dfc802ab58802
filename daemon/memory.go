package daemon

import (
	"time"
)

// One memory budget for the host (Config.MemoryBytes, cache.Budget). What
// grows with the data counts against it:
//
//   - every collection's pages: each collection's memory cache is one of
//     the budget's, evicted least recently used first, with fairness (a
//     collection in use within its share loses nothing to another's
//     growth; an idle one, no view attached, has no share: its pages go
//     first);
//   - what each collection holds besides: its decoded tree document, its
//     views' trees, their search indexes — estimates (tree.MemoryBytes,
//     lexical.Index.MemoryBytes) — and its views' mounts (mountBytes
//     each), pinned in its cache (cache.Cache.Pin), so its pages make
//     room for them.
//
// What has gone unused longest goes first, pages or whole idle views: a
// lingering mount (linger.go) is an idle view, unused since its last
// attachment went. watchMemory, every MemoryCheck, drops every idle view
// unused since before the last use of a page the budget evicted since
// the last check (cache.Budget.TakeEvicted), and, while the pins pass
// half the budget (the pages keep at least the other half), the view
// idle longest. Dropping the last view of a collection closes it, its
// pages and pins going with it. A conversation that comes back attaches
// as a new one would: the view loads again from the host tier's
// snapshot of its tree (no request for the tree when the host tier has
// it) and its pages from the host tier. Views with an attachment are
// never dropped: when they alone pass the budget, the pages go (the log
// says so, once a minute) and the budget is too small for what is
// attached. The pins are counted again at every check and when a view is
// placed.

// Not counted: what the kernel holds for the mounts (dentries, inodes,
// page cache: the kernel's, not the daemon's), a mount's nodes beyond
// mountBytes (a session that walks a big tree), pages queued for the host
// tier's writer (content), the API's connections, and the Go runtime's
// own; docs/BENCHMARKS.md measures that overhead beside the budget.

// memoryCheck is how often watchMemory counts the pins when
// Config.MemoryCheck is 0.
const memoryCheck = time.Second

// mountBytes is what a mount holds in the daemon whatever it serves,
// measured (scripts/bench.sh --only sites: the heap of 190 mounts, most
// lingering after a short session): go-fuse's request buffers, 132 KiB
// for each reader goroutine (one or more per mount; a sync.Pool keeps
// them), and the nodes of a session's lookups.
const mountBytes = 512 << 10

// watchMemory counts the pins and drops idle views under pressure, every
// Config.MemoryCheck, until Close.
func (d *Daemon) watchMemory(stop <-chan struct{}) {
	defer d.watching.Done()
	tick := time.NewTicker(d.cfg.MemoryCheck)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		d.mu.Lock()
		if !d.closed {
			d.relieveMemory()
		}
		d.unlock()
	}
}

// relieveMemory counts every collection's pins and drops the idle views
// the budget wants gone (see above). d.mu is held.
func (d *Daemon) relieveMemory() {
	for _, c := range d.collections {
		c.account()
	}
	evictedUse, evicted := d.memory.TakeEvicted()
	older := func(m *mountState) bool { return evicted && m.idleSince.Before(evictedUse) }
	for {
		pinsOver := d.memory.Stats().Pinned > d.cfg.MemoryBytes/2
		// an idle view: every mount of it lingers (dropping one of a
		// view still attached elsewhere would free nothing)
		m := d.evictLingering("the memory budget (--memory)", func(m *mountState) bool {
			return (pinsOver || older(m)) && m.view.idle()
		})
		if m == nil {
			break
		}
		why := "trees, indexes and mounts pass half the budget"
		if older(m) {
			why = "idle since before the last use of a page evicted"
		}
		if _, ok := m.view.c.views[groupsKey(m.view.groups)]; !ok { // the view went with it
			d.log.Info("idle view dropped for memory", "view", m.view.id, "collection", m.view.c.name, "why", why)
			d.viewEvictions.Add(1)
			d.rememberEvicted(m.view.id)
		}
		m.view.c.account()
	}
	if st := d.memory.Stats(); st.Pinned > st.MaxBytes && time.Since(d.overWarned) > time.Minute {
		d.overWarned = time.Now()
		d.log.Warn("the trees, search indexes and mounts of the attached views pass the memory budget: no page stays cached; raise --memory",
			"budget", st.MaxBytes, "pinned", st.Pinned)
	}
}

// rememberEvicted notes that view id went for memory, so that its next
// load counts as a reload. The notes are bounded: past maxEvictedNotes
// they start again. d.mu is held.
func (d *Daemon) rememberEvicted(id string) {
	const maxEvictedNotes = 10000
	if d.evicted == nil || len(d.evicted) >= maxEvictedNotes {
		d.evicted = map[string]struct{}{}
	}
	d.evicted[id] = struct{}{}
}

// reloaded counts the load of view id as a reload when it went for
// memory. d.mu is held.
func (d *Daemon) reloaded(id string) bool {
	if _, ok := d.evicted[id]; !ok {
		return false
	}
	delete(d.evicted, id)
	d.reloads.Add(1)
	return true
}

// idle reports whether every mount of v lingers (no attachment). d.mu is
// held.
func (v *viewState) idle() bool {
	for _, m := range v.mounts {
		if m.linger == nil {
			return false
		}
	}
	return true
}

// account pins in c's cache what c holds besides its pages (its decoded
// document, its views' trees, mounts and search indexes) and tells the cache
// whether c is idle: no view attached, no attach preparing one. d.mu is
// held.
func (c *collection) account() {
	if c.closed {
		return
	}
	idle := len(c.preparing) == 0 && len(c.prepared) == 0
	var n int64
	if c.col != nil {
		n += c.col.MemoryBytes()
	}
	for _, v := range c.views {
		n += v.tree.Load().MemoryBytes() + int64(len(v.mounts))*mountBytes
		if v.search != nil {
			n += v.search.Stats().Index.MemoryBytes
		}
		idle = idle && v.idle()
	}
	c.cache.Pin(n)
	c.cache.SetIdle(idle)
}
