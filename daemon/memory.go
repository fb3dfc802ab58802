package daemon

import (
	"runtime"
	"runtime/metrics"
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
// attachment went. watchMemory, every MemoryCheck and when a view or a
// mount is placed, drops every idle view unused since before the last use
// of a page the budget evicted since the last check
// (cache.Budget.TakeEvicted), and, while the pins pass half of what the
// heap's overhead (below) leaves of the budget (the pages keep at least
// the other half), the view idle longest. Dropping the last view of a
// collection closes it, its pages and pins going with it. A conversation that comes back attaches
// as a new one would: the view loads again from the host tier's
// snapshot of its tree (no request for the tree when the host tier has
// it) and its pages from the host tier. Views with an attachment are
// never dropped: when they alone pass the budget, the pages go (the log
// says so, once a minute) and the budget is too small for what is
// attached. The pins are counted again at every check and when a view is
// placed.

// The estimates miss what nobody declares: a mount's nodes beyond
// mountBytes (a session that walks a big tree), a tree decoded bigger
// than tree.MemoryBytes says, pages queued for the host tier's writer
// (content), answers being read, the compressor's window. With
// Config.CountHeap (chromafsd, whose heap is the daemon's alone) the
// heap counts them: heapMeter measures the live heap after garbage
// collections, less what the daemon held serving nothing, a fixed
// allowance (heapAllowance: what a daemon holds once it served anything,
// whatever it serves: the compressor's window, connections' buffers) and
// what the budget counts (pages and pins), and that overhead is counted
// against the budget too (cache.Budget.SetOverhead): pages make room for
// it, and idle views go when the pins pass half of what it leaves. The
// live heap then stays within the budget plus a fixed part, and Go's soft limit a
// little above it (chromafsd's --memory-limit auto) bounds the garbage
// between two collections: RSS within the budget plus 15% and a fixed
// part (docs/BENCHMARKS.md).
//
// Not counted: what the kernel holds for the mounts (dentries, inodes,
// page cache: the kernel's, not the daemon's).

// memoryCheck is how often watchMemory counts the pins when
// Config.MemoryCheck is 0.
const memoryCheck = time.Second

// mountBytes is what a mount holds in the daemon whatever it serves,
// measured (TestManySites at 300 sites: the heap of 100 mounts lingering
// after a session of find, grep -r and cat each, 72 MiB): go-fuse's
// request buffers, 132 KiB for each reader goroutine (up to three a mount
// stay blocked in read(2) with theirs; a sync.Pool keeps more), 47 MiB of
// it, the nodes of the session's lookups and the pusher's queue.
const mountBytes = 720 << 10

// watchMemory counts the pins and drops idle views under pressure, every
// Config.MemoryCheck and at once when a view or a mount was placed (its
// pins may pass the budget: an idle view's go before the pages of a view
// in use), until Close.
func (d *Daemon) watchMemory(stop <-chan struct{}) {
	defer d.watching.Done()
	tick := time.NewTicker(d.cfg.MemoryCheck)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		case <-d.placed:
		}
		d.mu.Lock()
		if !d.closed {
			d.relieveMemory()
		}
		d.unlock()
	}
}

// relieveSoon has watchMemory count the pins now: a view or a mount was
// placed. It does not wait.
func (d *Daemon) relieveSoon() {
	select {
	case d.placed <- struct{}{}:
	default:
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
	if d.heap != nil {
		st := d.memory.Stats()
		if over, ok := d.heap.measure(time.Now(), st.Bytes+st.Pinned); ok {
			// a sixteenth of the budget a check at most: a step evicts
			// under the budget's lock, which every read takes
			d.memory.SetOverhead(min(over, st.Overhead+d.cfg.MemoryBytes/16))
		}
	}
	for {
		// the pins pass half of what the overhead leaves (dropping views
		// frees pins; what else the heap holds it may not)
		st := d.memory.Stats()
		pinsOver := st.Pinned > (d.cfg.MemoryBytes-st.Overhead)/2
		// an idle view: every mount of it lingers (dropping one of a
		// view still attached elsewhere would free nothing)
		m := d.evictLingering("the memory budget (--memory)", func(m *mountState) bool {
			return (pinsOver || older(m)) && m.view.idle()
		})
		if m == nil {
			break
		}
		why := "trees, indexes and mounts pass half of what the heap beyond them leaves of the budget"
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
	if st := d.memory.Stats(); st.Pinned+st.Overhead > st.MaxBytes && time.Since(d.overWarned) > time.Minute {
		d.overWarned = time.Now()
		d.log.Warn("the trees, search indexes and mounts of the attached views pass the memory budget: no page stays cached; raise --memory",
			"budget", st.MaxBytes, "pinned", st.Pinned, "heap_beyond", st.Overhead)
	}
}

// heapMeter measures what the live heap holds beyond the budget's
// figures (see above). Not safe for concurrent use: watchMemory's.
type heapMeter struct {
	read    func() (live int64, cycles uint64) // readHeap; the tests' own
	base    int64                              // the live heap serving nothing, and heapAllowance
	cycles  uint64                             // at the last measurement
	counted int64                              // the budget's figures at the last check
	recent  []heapSample                       // see overheadWindow (0s before the first)
}

// heapSample is one measurement of the overhead.
type heapSample struct {
	at   time.Time
	over int64
}

// The overhead is the least of the measurements (one per garbage
// collection) of the last overheadSpan, and of at least the last
// overheadWindow: what a burst holds for a moment (a tree being decoded,
// answers being read) at a collection or several in a row does not evict
// pages, what stays does within seconds.
const (
	overheadWindow = 4
	overheadSpan   = 10 * time.Second
)

// heapAllowance is what the heap may hold beyond the budget's figures
// and what the daemon held serving nothing, uncounted: what a daemon
// holds once it served anything, whatever it serves (the host tier's
// compressor, 1-4 MiB, connections' buffers, the metrics' registry,
// pools), measured at 5-6 MiB with a few sites (TestManySites at CI's
// scale), with room.
const heapAllowance = 16 << 20

// newHeapMeter measures the live heap serving nothing, after a
// collection, with read.
func newHeapMeter(read func() (int64, uint64)) *heapMeter {
	runtime.GC()
	m := &heapMeter{read: read, recent: make([]heapSample, overheadWindow)}
	m.base, m.cycles = read()
	m.base += heapAllowance
	return m
}

// measure returns the overhead at now beyond counted (the budget's pages
// and pins) and the base (see overheadWindow). ok is false when no
// collection ran since the last measurement (the live heap is that of the
// last one: nothing new).
func (m *heapMeter) measure(now time.Time, counted int64) (overhead int64, ok bool) {
	// the live heap is that of a collection since the last check: what
	// the budget counted then or now, the more (what it let go since
	// may have been alive at the collection)
	prev := m.counted
	m.counted = counted
	live, cycles := m.read()
	if cycles == m.cycles {
		return 0, false
	}
	m.cycles = cycles
	m.recent = append(m.recent, heapSample{now, max(live-m.base-max(prev, counted), 0)})
	for len(m.recent) > overheadWindow && now.Sub(m.recent[0].at) > overheadSpan {
		m.recent = m.recent[1:]
	}
	overhead = m.recent[0].over
	for _, s := range m.recent[1:] {
		overhead = min(overhead, s.over)
	}
	return overhead, true
}

// readHeap reads the live heap (the bytes the last garbage collection
// marked) and the number of collections, from the runtime.
func readHeap() (live int64, cycles uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64()), s[1].Value.Uint64()
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
