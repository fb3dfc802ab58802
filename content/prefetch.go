package content

import (
	"context"
	"sync"

	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/tree"
)

// batchPages is how many pages one prefetch request asks for at most
// (fewer when they hold more than Config.BatchChunks chunks).
const batchPages = 100

// Prefetch is called on a content read in dir, and on a listing of dir by
// a walk that reads what it lists (package fusefs: such a walk's reads of
// pages pushed to the kernel never reach the mount). The first call in a
// group of directories (see planWalk; a directory of another tree than the
// plan's, another view's of a daemon's collection, is in the group of its
// path) starts background loads of that group and of the next Lookahead
// groups, in batched requests (loadFiles), so a process walking the tree
// in grep -r order finds files cached and the requests are pipelined. The file
// being read is left out: its reader fetches it alone, which is faster
// than waiting for a batch. A listing with no read does not call it, so
// metadata walks (find, ls -lR) cost no request. Each group loads once,
// and the batches claim their keys before returning: a read of one of
// their pages waits for it instead of asking again. It never blocks the
// caller.
//
// A walk that steps on (enters one of the Lookahead groups after the one
// it entered last) keeps its batches in flight: each batch that finishes
// after such a step, with fewer than Lookahead prefetch batches left in
// flight, sends the next group not yet loaded, up to twice Lookahead
// groups ahead of the walk (refill). The walk's own progress then no
// longer decides when the last groups are asked for: 80 ms from Chroma, a
// cold grep -r of 1,000 pages waited for its last two groups one after
// the other, each asked for only when the walk, slowed by the decoding of
// the answers before, got within Lookahead groups of it. Such a step also
// starts the first windows of the pages larger than a window of the
// lookahead's directories and of those above them it went through
// (scanLarge). A read that does not step on (a cat, a grep of one
// directory, a read far from the last) sends nothing more: the batches it
// started finish without a step. The walk's state is the plan's, shared
// by every reader of the engine; two readers stepping on at once both
// count.
func (e *Engine) Prefetch(dir *tree.Node, reading *tree.File) {
	if e.cfg.Prefetch == PrefetchNone || dir == nil {
		return
	}
	p := e.plan.Load()
	if _, seen := p.visited.LoadOrStore(dir, struct{}{}); seen {
		return
	}
	planned := p.planned(dir)
	if planned == nil {
		return
	}
	p.walked.Store(planned, struct{}{})
	g, ok := p.groupOf[planned]
	if !ok {
		return
	}
	stepped := p.enter(g, e.cfg.Lookahead)
	for h := g; h < len(p.groups) && h <= g+e.cfg.Lookahead; h++ {
		e.walkGroup(p, h, reading)
		if stepped {
			e.scanLarge(p, h, reading)
		}
	}
}

// walkGroup starts the load of group g for a walk (prefetchGroup), with
// refill told when each of its batches is done; it reports whether a
// request was sent.
func (e *Engine) walkGroup(p *walkPlan, g int, skip *tree.File) bool {
	steps := p.steps.Load()
	_, sent := e.prefetchGroup(p, g, skip, 1, e.walkGate, func() {
		e.spawn(func() { e.refill(p, steps) }) // its own goroutine: the batch hands its pages over without waiting for it
	})
	return sent
}

// refill is told that a walk's batch sent after steps steps is done: if
// the walk has stepped on since and fewer than Lookahead prefetch batches
// are in flight, it sends the next group not loaded yet within twice
// Lookahead groups of the group the walk entered last, so that as many
// batches stay in flight while the walk goes on.
func (e *Engine) refill(p *walkPlan, steps int64) {
	if e.ctx.Err() != nil || e.plan.Load() != p || p.steps.Load() == steps || e.prefetching.Load() >= int64(e.cfg.Lookahead) {
		return
	}
	cur := int(p.last.Load())
	for h := cur + 1; h < len(p.groups) && h <= cur+2*e.cfg.Lookahead; h++ {
		if h <= cur+e.cfg.Lookahead {
			e.scanLarge(p, h, nil)
		}
		if e.walkGroup(p, h, nil) {
			return
		}
	}
}

// prefetchGroup starts the load of one group's files, once, and returns
// what finishes when those batches are done, and whether it sent any;
// after, when set, is called as each batch is done. Its files take at
// most half the cache's room, divided by shares: prefetch all's groups in
// flight share it; a walk's groups each take half the room left when
// they are sent.
func (e *Engine) prefetchGroup(p *walkPlan, g int, skip *tree.File, shares int, gate chan struct{}, after func()) (*sync.WaitGroup, bool) {
	if _, done := p.prefetched.LoadOrStore(g, struct{}{}); done {
		return &sync.WaitGroup{}, false
	}
	budget := e.cache.Room() / 2 / int64(max(shares, 1))
	var files []*tree.File
	for _, dir := range p.groups[g] {
		for _, fl := range e.prefetchable(dir, &budget) {
			if fl != skip {
				files = append(files, fl)
			}
		}
	}
	return e.loadFiles(e.ctx, files, gate, after)
}

// scanLarge starts, once per group, the loads of the first windows of the
// pages of group g that a batch leaves out (past one window), for a walk
// that stepped on: a scan such as grep -r, which reads every page whole.
// Its reader of such a page then finds them loaded or in flight, and the
// page's readahead goes on from there; before, the scan asked for each
// window when it got to the page, one round trip after another at the end
// of a cold grep -r (two, 120 ms each, 80 ms from Chroma). A read that
// does not step on (a cat, an ls -l and a head) does not load them. skip
// is the page being read (its reader loads it). Each page starts its
// first readaheadWindows+1 windows, a request each, their bytes within
// half the cache's room: a docs repository's screenshots of 1-4 MiB
// are a window or four each, and a cap of four windows a group made its
// cold grep -r 1.45x and 1.78x the raw client's at 25 and 80 ms, against
// 1.23x and 1.19x without.
//
// The ancestors of the group's directories that the walk went through
// (Prefetch was told of them, in any view's tree) are scanned too, once each: a walk in name
// order comes back to them, and reads their pages between their
// subdirectories (a repository's 1.7 MB gt-lock.json at its root, read
// after the directories named before it). Their group was the walk's
// first, never stepped into: the scan's reader asked for the page's
// windows only when it got there, and waited 650-730 ms for them behind
// the batches in flight, a third of a cold grep -r of the repository, 25
// ms from Chroma. An ancestor the walk did not go through (grep -r of
// docs/api leaves docs/ alone) is not scanned.
func (e *Engine) scanLarge(p *walkPlan, g int, skip *tree.File) {
	if _, done := p.scanned.LoadOrStore(g, struct{}{}); done {
		return
	}
	budget := e.cache.Room() / 2
	for _, dir := range p.groups[g] {
		for d := dir; d != nil; d = d.Parent {
			if _, walked := p.walked.Load(d); d != dir && !walked {
				continue // a walk that did not go through it does not come back to it
			}
			if _, done := p.scannedDirs.LoadOrStore(d, struct{}{}); !done {
				e.scanDir(d, skip, &budget)
			}
		}
	}
}

// scanDir starts the first windows of dir's pages past one window (see
// scanLarge) while their bytes fit budget.
func (e *Engine) scanDir(dir *tree.Node, skip *tree.File, budget *int64) {
	for _, c := range dir.Children {
		fl := c.File
		if fl == nil || fl == skip || fl.URI() != "" || len(fl.Chunks) == 0 || e.cached(fl) {
			continue
		}
		if size, _ := fl.Size(); size <= e.cfg.WindowBytes {
			continue // the group's batch has it
		}
		wd := e.windowing(fl)
		n := min(len(fl.Chunks), (readaheadWindows+1)*wd.window)
		cost := e.cache.Cost(wd.offsets[n], n)
		if cost > *budget {
			continue
		}
		*budget -= cost
		for w := 0; w*wd.window < n; w++ {
			e.readahead(fl, wd, w)
		}
	}
}

// prefetchable lists the files of dir worth loading: not cached, not
// empty, small enough to arrive in one window, within the byte budget.
func (e *Engine) prefetchable(dir *tree.Node, budget *int64) []*tree.File {
	var out []*tree.File
	for _, c := range dir.Children {
		fl := c.File
		if fl == nil || fl.URI() != "" || (fl.Chunks != nil && len(fl.Chunks) == 0) || e.cached(fl) {
			continue
		}
		size, known := fl.Size()
		if !known {
			size = 0
		} else if size == 0 {
			continue
		}
		cost := e.cache.Cost(size, max(len(fl.Chunks), 1)) // as the cache counts it
		if size > e.cfg.WindowBytes || cost > *budget {
			continue
		}
		*budget -= cost
		out = append(out, fl)
	}
	return out
}

func (e *Engine) cached(fl *tree.File) bool {
	if fl.Chunks == nil {
		return e.cache.Contains(e.key(fl, wholePage))
	}
	return e.cache.Contains(e.key(fl, 0))
}

// loadFiles starts loads of whole pages in batches (batches), sharing
// flight keys with reads so a reader of a page in a running batch waits
// for it. The returned group finishes when the batches it started are
// done (its own: waiting for every flight would race with readers
// starting theirs); it reports whether it started any. after, when set,
// is called as each batch it started is done without an error. gate,
// when set, bounds how many of the batches sharing it load at once: each
// claims its keys at once, then waits for a place in the gate before it
// looks its pages up and asks for the rest, so that a walk's or a
// warm-up's many batches leave the engine's other slots to readers of
// pages in no batch. A reader of a page in a batch waits for that batch,
// as before a batch was cut at BatchChunks (then one slot sent its
// requests one after the other).
func (e *Engine) loadFiles(ctx context.Context, files []*tree.File, gate chan struct{}, after func()) (*sync.WaitGroup, bool) {
	var wg sync.WaitGroup
	started := false
	for _, batch := range e.batches(files) {
		if ctx.Err() != nil {
			break
		}
		byKey := make(map[string]*tree.File, len(batch))
		keys := make([]string, 0, len(batch))
		for _, fl := range batch {
			k := flightKeyWhole(fl)
			byKey[k] = fl
			keys = append(keys, k)
		}
		wg.Add(1)
		e.prefetching.Add(1)
		claimed := e.flights.DoBatch(keys, func(ctx context.Context, claimed []string) (map[string]any, error) {
			defer wg.Done()
			counted := true
			defer func() { // a panic in the load too (Flights recovers it)
				if counted {
					e.prefetching.Add(-1)
				}
			}()
			if gate != nil {
				select {
				case gate <- struct{}{}:
					defer func() { <-gate }()
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			out, err := e.loadBatch(ctx, claimed, byKey)
			counted = false
			e.prefetching.Add(-1) // before after: refill counts what is left
			if err == nil && after != nil {
				after()
			}
			return out, err
		})
		if len(claimed) == 0 { // nothing left to load: fn never runs
			e.prefetching.Add(-1)
			wg.Done()
		} else {
			started = true
		}
	}
	return &wg, started
}

// batches cuts files into batches of at most batchPages pages and
// Config.BatchChunks chunks (a page of more is a batch of its own): one
// request each for pages fetched by id, as chromafs-ingest's are. A batch
// of more chunks than one get returns is several requests one after the
// other in one slot: a docs repository's screenshots, 40 chunks each,
// made a group of 100 of them 14 requests in a row, the tail of its cold
// grep -r with one request in flight.
func (e *Engine) batches(files []*tree.File) [][]*tree.File {
	var out [][]*tree.File
	start, chunks := 0, 0
	for i, fl := range files {
		n := max(len(fl.Chunks), 1)
		if i > start && (i-start == batchPages || chunks+n > e.cfg.BatchChunks) {
			out = append(out, files[start:i])
			start, chunks = i, 0
		}
		chunks += n
	}
	if start < len(files) {
		out = append(out, files[start:])
	}
	return out
}

// flightKeyWhole is the key under which a whole page is loaded: window 0
// for chunked pages (prefetch only takes pages that fit one window), the
// whole-page key otherwise.
func flightKeyWhole(fl *tree.File) string {
	if fl.Chunks == nil {
		return wholeKey(fl)
	}
	return windowKey(fl, 0)
}

// loadBatch loads the pages of a batch through the chain: each is looked
// up in the tiers (memory again, inside the flight, then below it), and
// the rest are fetched from the source in one request. A page whose
// host-wide lock another load holds is left out: that load fetches it, and
// a reader of it waits for that. The locks this batch takes are released
// once its pages are written to the host tier, in the background, so that
// a process waiting for one of them finds it on disk.
func (e *Engine) loadBatch(ctx context.Context, keys []string, byKey map[string]*tree.File) (map[string]any, error) {
	out := make(map[string]any, len(keys))
	var want []*query
	unlocks := map[*query]cache.Unlock{}
	defer func() {
		for _, unlock := range unlocks {
			unlock() // pages this batch did not fetch
		}
	}()
	for _, k := range keys {
		fl := byKey[k]
		q := e.query(fl, wholeSpan(fl))
		if chunks, ok := e.lookup(ctx, q, 0); ok {
			out[k] = chunks
			e.tellLoaded(fl)
			continue
		}
		if e.cfg.Host != nil && q.below {
			unlock, locked := e.cfg.Host.TryLock(q.key)
			if !locked {
				continue
			}
			unlocks[q] = unlock
		}
		want = append(want, q)
	}
	if len(want) == 0 {
		return out, nil
	}
	return out, e.fetchBatch(ctx, want, out, unlocks)
}

// fetchBatch fetches the pages of qs from the source in one request into
// out (keyed by their flight keys), verified as every answer of the chain,
// and fills the tiers with them, each with its lock (taken from unlocks).
func (e *Engine) fetchBatch(ctx context.Context, qs []*query, out map[string]any, unlocks map[*query]cache.Unlock) error {
	refs := make([]Ref, len(qs))
	for i, q := range qs {
		refs[i] = pageRef(q.fl)
	}
	var pages map[string]Page
	err := e.fetch(ctx, &e.down, func(ctx context.Context) (err error) {
		pages, err = e.src.FetchPages(ctx, refs)
		return err
	})
	if err != nil {
		return err
	}
	for _, q := range qs {
		p, ok := pages[q.fl.Slug]
		if !ok || p.Err != nil {
			continue // the reader will fetch it alone and report the error
		}
		chunks, err := verify(q, e.fetched(p.Chunks))
		if err != nil {
			continue // the reader will fetch it alone and report the error
		}
		e.prefetchPages.Add(1)
		e.fillFromOrigin(q, chunks, unlocks[q])
		delete(unlocks, q)
		out[flightKeyWhole(q.fl)] = chunks
		e.tellLoaded(q.fl)
	}
	return nil
}

func (e *Engine) tellLoaded(fl *tree.File) {
	if fn := e.loaded.Load(); fn != nil {
		(*fn)(fl)
	}
}

// OnLoaded sets fn to be told of every page a prefetch puts whole into
// memory (from a tier below or from the source), verified: the FUSE layer
// then takes its bytes with Resident and hands them to the kernel's page
// cache, so that the first read of a prefetched page does not cross FUSE.
// fn must not block. A page a reader loads itself is not reported: its
// reads reach the kernel anyway.
func (e *Engine) OnLoaded(fn func(fl *tree.File)) {
	e.loaded.Store(&fn)
}

// Resident returns the chunks of fl when the whole page is in the memory
// cache, without loading anything or touching recency or stats.
func (e *Engine) Resident(fl *tree.File) ([][]byte, bool) {
	if fl.Chunks == nil {
		v, ok := e.cache.Peek(e.key(fl, wholePage))
		return [][]byte{v}, ok
	}
	first, ok := e.cache.Peek(e.key(fl, 0)) // the common answer on Lookup: no, without allocating
	if !ok || len(fl.Chunks) == 0 {
		return nil, false
	}
	out := make([][]byte, len(fl.Chunks))
	out[0] = first
	for i := 1; i < len(out); i++ {
		if out[i], ok = e.cache.Peek(e.key(fl, i)); !ok {
			return nil, false
		}
	}
	return out, true
}

// EnsureSize makes a file's size known before it is reported: the unknown
// sizes of its whole directory are loaded in one batch first.
func (e *Engine) EnsureSize(ctx context.Context, n *tree.Node) error {
	if _, ok := n.File.Size(); ok {
		return nil
	}
	var unknown []*tree.File
	for _, c := range n.Parent.Children {
		if c.File != nil {
			if _, ok := c.File.Size(); !ok {
				unknown = append(unknown, c.File)
			}
		}
	}
	e.loadFiles(e.ctx, unknown, nil, nil) // detached: the batch serves other callers too
	_, err := e.whole(ctx, n.File)        // waits for the batch, or loads alone
	return err
}
