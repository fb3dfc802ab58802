package search

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/tree"
)

// Reader reads pages (content.Engine): the lexical index reads every page
// of its view through it, so pages come from the nearest tier that holds
// them, verified.
type Reader interface {
	ReadAt(ctx context.Context, fl *tree.File, dest []byte, off int64) (int, error)
	EnsureSize(ctx context.Context, n *tree.Node) error
	// Prefetch is told of a read in dir (the engine then loads the
	// directory's pages in batches); it must not block.
	Prefetch(dir *tree.Node, reading *tree.File)
}

// Host is the host tier (hostcache.Cache), where a built lexical index is
// kept for every process of the host.
type Host interface {
	Get(k cache.PageKey, size int64) ([]byte, bool)
	Put(k cache.PageKey, data []byte)
	Ref(name string) (string, bool)
	SetRef(name, value string)
}

// Neighbor is a record near a query vector.
type Neighbor struct {
	ID, Page, PageSHA, Text string // Page: its page metadata (a slug)
	Distance                float64
	// Line is the line of the page its text begins on (its chunk_line
	// metadata), 0 when it has none.
	Line int
}

// PageRef names a page's records, for its stored vectors.
type PageRef struct {
	Slug, SHA256 string
	Chunks       int      // its chunk count, when chromafs-ingest wrote it (ids derive from it)
	Records      []string // the records of another tool it is mapped onto
	Limit        int      // the most vectors wanted
}

// Vectors is Chroma's side of a search (backend.Vectors adapts
// chroma.Store).
type Vectors interface {
	// Near asks, in one query, for the n nearest records of each vector,
	// restricted to the records whose page metadata is in `in` (when set)
	// and not in notIn (when set).
	Near(ctx context.Context, vectors [][]float32, n int, in, notIn []string) ([][]Neighbor, error)
	// PageVectors returns the stored vectors of a page's chunks.
	PageVectors(ctx context.Context, p PageRef) ([][]float32, error)
}

// Embedder embeds a query with the collection's embedding function.
type Embedder interface {
	Embed(ctx context.Context, text string) ([]float32, error)
	Name() string
}

// Config configures a Searcher. Zero values take the defaults noted.
type Config struct {
	// Identity is the collection's identity (content keys of the host
	// tier).
	Identity string
	Reader   Reader
	Host     Host    // nil: the index is built in every process
	Vectors  Vectors // nil: no semantic search, no .similar/
	Embedder Embedder
	// NoSemantic says why Embedder is nil (for .README and errors).
	NoSemantic string
	// Similar is set when the stored vectors mean something (a collection
	// not written with consistent_hash): .similar/ works without a model.
	Similar bool
	// Resolve, when set, finds Embedder, NoSemantic and Similar when a
	// search or .README first needs them (asking Chroma for the
	// collection's configuration costs a request a mount need not make
	// otherwise); an error is a failure to ask, tried again next time.
	Resolve func(ctx context.Context) (Embedding, error)
	// Timeout bounds a search, waits for the lexical index included
	// (the mount's --timeout); default 30 s.
	Timeout time.Duration
	// Workers bounds the index build's concurrent page reads; default 4.
	Workers int
	// CacheEntries bounds the results kept per view; default 512.
	CacheEntries int
	// FirstBuild, when above 0, is how long after a Prepare the index of
	// a view that no process of the host has kept starts being built (see
	// firstOnHost); else it is built when a search needs it.
	FirstBuild time.Duration
	Log        *slog.Logger
}

// Embedding is how a collection's queries are embedded: Embedder nil when
// they cannot be (NoSemantic says why), and whether its stored vectors
// mean something (Similar).
type Embedding struct {
	Embedder   Embedder
	NoSemantic string
	Similar    bool
}

// MaxResults is the most records one query asks Chroma for (Chroma
// Cloud's quota).
const MaxResults = 300

// Searcher answers one view's searches. It is safe for concurrent use.
type Searcher struct {
	cfg     Config
	ctx     context.Context // cancelled by Close: stops index builds
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	closed  bool
	latest  *tree.Tree // the newest tree Prepared: every search is of it
	cur     *state     // latest's state, made by the first search that needs it
	results *lru.Cache[string, *Results]
	kept    int64 // bytes of the results kept (bounded by maxKeptBytes)
	embeds  *lru.Cache[string, []float32]
	flights singleflight.Group
	st      counters

	semMu    sync.Mutex // held while Config.Resolve runs
	sem      Embedding  // Config's, or what Resolve found
	resolved bool
}

type counters struct {
	searches, failures, chromaQueries atomic.Int64
	// firstChecks counts firstOnHost's decisions made (a test waits for
	// one before it asserts what the decision did)
	firstChecks atomic.Int64
}

// maxKeptBytes bounds the text of the results a Searcher keeps.
const maxKeptBytes = 32 << 20

// New returns a Searcher; Prepare it with each tree it serves.
func New(cfg Config) *Searcher {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 4
	}
	if cfg.CacheEntries <= 0 {
		cfg.CacheEntries = 512
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if (cfg.Embedder == nil || cfg.Vectors == nil) && cfg.NoSemantic == "" && cfg.Resolve == nil {
		cfg.NoSemantic = "no embedding function"
	}
	s := &Searcher{cfg: cfg, sem: Embedding{Embedder: cfg.Embedder, NoSemantic: cfg.NoSemantic, Similar: cfg.Similar}}
	s.resolved = cfg.Resolve == nil
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.results, _ = lru.NewWithEvict[string, *Results](cfg.CacheEntries, func(_ string, r *Results) { s.kept -= r.bytes() })
	s.embeds, _ = lru.New[string, []float32](cfg.CacheEntries)
	return s
}

// Close stops the builds and searches in progress and waits for them;
// a search after Close fails.
func (s *Searcher) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// enter counts a goroutine Close waits for; false once closed.
func (s *Searcher) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	return true
}

// SemanticAvailable reports whether queries can be embedded, as far as is
// known (false until Config.Resolve has answered).
func (s *Searcher) SemanticAvailable() bool {
	s.semMu.Lock()
	defer s.semMu.Unlock()
	return s.sem.Embedder != nil && s.cfg.Vectors != nil
}

// semantics returns how queries are embedded, asking Config.Resolve the
// first time; an error is a failure to ask (the answer then says semantic
// search is off, for now).
func (s *Searcher) semantics(ctx context.Context) (Embedding, error) {
	s.semMu.Lock()
	defer s.semMu.Unlock()
	if !s.resolved {
		sem, err := s.cfg.Resolve(ctx)
		if err != nil {
			return Embedding{NoSemantic: "the collection's embedding function could not be asked for (the log says why)"}, err
		}
		if sem.Embedder == nil && sem.NoSemantic == "" {
			sem.NoSemantic = "no embedding function"
		}
		s.sem, s.resolved = sem, true
	}
	sem := s.sem
	if s.cfg.Vectors == nil {
		sem.Embedder, sem.Similar = nil, false
	}
	return sem, nil
}

// Prepare makes t the tree every search is of from now on (a mount that
// swaps its tree later than another of the view sees the new answers a
// moment early: they are links, resolved in its own tree). The pages are
// mapped, and the lexical index loaded from the host tier, when a search
// needs them; the index is built in the background at once for a view
// that has searched already, and for a view whose index no process of the
// host has kept yet (see firstOnHost). Prepare never waits.
func (s *Searcher) Prepare(t *tree.Tree) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.latest != nil && s.latest.Version == t.Version {
		return
	}
	s.latest = t
	if c := s.cur; c != nil && c.started {
		s.cur = newState(t)
		s.startLocked(s.cur)
		return
	}
	if s.cfg.Host != nil && s.cfg.Identity != "" && s.cfg.FirstBuild > 0 && !s.closed {
		s.wg.Add(1) // s.mu is held: Close cannot be waiting yet
		go func() {
			defer s.wg.Done()
			s.firstOnHost(t)
		}()
	}
}

// firstOnHost builds t's index at once when no process of the host has
// kept one for its pages: that costs the host once, and every later mount
// of the view finds it there at its first search (a mount that finds it
// loads it only then).
func (s *Searcher) firstOnHost(t *tree.Tree) {
	timer := time.NewTimer(s.cfg.FirstBuild) // the mount's first requests come first
	defer timer.Stop()
	select {
	case <-s.ctx.Done():
		return
	case <-timer.C:
	}
	defer s.st.firstChecks.Add(1)
	st := s.state(t)
	if st.t != t {
		return // a newer tree came meanwhile
	}
	if _, kept := s.cfg.Host.Ref(sizeRef(s.hostKey(st))); !kept {
		s.started(st)
	}
}

// state returns the latest tree's state (t's when nothing was Prepared),
// making it when it is a new version, or when its build failed a while
// ago.
func (s *Searcher) state(t *tree.Tree) *state {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.latest == nil {
		s.latest = t
	}
	if c := s.cur; c != nil && c.t == s.latest && !c.retry() {
		return c
	}
	s.cur = newState(s.latest)
	return s.cur
}

// started returns st once its index is being loaded or built.
func (s *Searcher) started(st *state) *state {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.startLocked(st)
	return st
}

func (s *Searcher) startLocked(st *state) {
	if st.started {
		return
	}
	st.started = true
	if s.closed {
		st.finish(nil, errors.New("search closed"))
		return
	}
	s.wg.Add(1) // s.mu is held: Close cannot be waiting yet
	go func() {
		defer s.wg.Done()
		s.index(st)
	}()
}

// Search runs the query a .search/ directory name holds over the latest
// tree (t is the caller's, used when none was Prepared).
func (s *Searcher) Search(ctx context.Context, t *tree.Tree, name string) (*Results, error) {
	q, err := ParseName(name)
	if err != nil {
		return nil, err
	}
	if q.Mode == Semantic {
		sem, err := s.semantics(ctx)
		if err != nil {
			return nil, s.failed(q, err, time.Now())
		}
		if sem.Embedder == nil {
			return nil, fmt.Errorf("%w: semantic search: %s", ErrUnsupported, sem.NoSemantic)
		}
	}
	return s.cached(ctx, s.state(t), q, func(ctx context.Context, st *state) (*Results, error) {
		return s.run(ctx, st, q)
	})
}

// SimilarTo ranks the pages like the page at path (.similar/PATH/), by
// its stored vectors.
func (s *Searcher) SimilarTo(ctx context.Context, t *tree.Tree, path string, k int) (*Results, error) {
	sem, err := s.semantics(ctx)
	if err != nil {
		return nil, s.failed(Query{Text: path, Mode: Similar}, err, time.Now())
	}
	if !sem.Similar {
		return nil, fmt.Errorf("%w: .similar/: the collection's stored vectors carry no meaning", ErrUnsupported)
	}
	if k <= 0 {
		k = DefaultK
	}
	q := Query{Text: path, K: k, Mode: Similar}
	return s.cached(ctx, s.state(t), q, func(ctx context.Context, st *state) (*Results, error) {
		return s.similar(ctx, st, q)
	})
}

// cached answers q from the results kept for st's tree version, else runs
// it once for every concurrent asker, bounded by the timeout. A failure is
// counted and logged once, with its reason, and never kept; neither is a
// partial answer (hybrid while the lexical index builds).
func (s *Searcher) cached(ctx context.Context, st *state, q Query, run func(context.Context, *state) (*Results, error)) (*Results, error) {
	key := st.t.Version + "\x00" + q.key()
	if r, ok := s.results.Get(key); ok {
		return asked(r, q), nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	ch := s.flights.DoChan(key, func() (any, error) {
		// The flight outlives a caller that gives up (another may wait on
		// it), but not the timeout.
		if !s.enter() {
			return nil, errors.New("search closed")
		}
		defer s.wg.Done()
		// a little shorter than the caller's wait: its reason (an index
		// still building) arrives before the caller gives up
		fctx, fcancel := context.WithTimeout(s.ctx, s.cfg.Timeout-min(100*time.Millisecond, s.cfg.Timeout/10))
		defer fcancel()
		if r, ok := s.results.Get(key); ok { // re-checked inside the flight
			return r, nil
		}
		s.st.searches.Add(1)
		start := time.Now()
		r, err := run(fctx, st)
		if err != nil {
			return nil, s.failed(q, err, start)
		}
		if !q.NoSnippets { // lines are numbered for the report's lines only
			s.locate(fctx, st.t, r.Hits)
		}
		s.cfg.Log.Debug("search", "query", q.Text, "mode", q.Mode, "k", q.K, "results", len(r.Hits), "took", time.Since(start))
		if !r.partial {
			s.keep(key, r)
		}
		return r, nil
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return asked(res.Val.(*Results), q), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("search interrupted or past %s: %w", s.cfg.Timeout, ctx.Err())
	}
}

// asked is r as q asked for it: results kept for one query answer
// another that differs only in what the report shows (snippets).
func asked(r *Results, q Query) *Results {
	if r.Query == q {
		return r
	}
	c := *r
	c.Query = q
	return &c
}

// keep adds r to the results kept, within maxKeptBytes.
func (s *Searcher) keep(key string, r *Results) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, had := s.results.Peek(key); had {
		return
	}
	s.kept += r.bytes()
	s.results.Add(key, r)
	for s.kept > maxKeptBytes && s.results.Len() > 1 {
		s.results.RemoveOldest()
	}
}

func (s *Searcher) failed(q Query, err error, start time.Time) error {
	if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnsupported) {
		s.st.failures.Add(1)
		s.cfg.Log.Warn("search failed", "query", q.Text, "mode", q.Mode, "took", time.Since(start).Round(time.Millisecond), "err", err)
	}
	return err
}

// indexGrace is how long hybrid waits for a lexical index still building
// before it answers with semantic ranking alone (and says so).
const indexGrace = time.Second

// run answers a query in its mode.
func (s *Searcher) run(ctx context.Context, st *state, q Query) (*Results, error) {
	switch q.Mode {
	case Lexical:
		hits, err := s.lexical(ctx, st, q.Text, q.K)
		return &Results{Query: q, Hits: hits}, err
	case Semantic:
		hits, err := s.semantic(ctx, st, q.Text, q.K)
		return &Results{Query: q, Hits: hits}, err
	}
	info, err := s.semantics(ctx)
	if err != nil {
		return nil, err
	}
	if info.Embedder == nil || !st.exact {
		hits, err := s.lexical(ctx, st, q.Text, q.K)
		return &Results{Query: q, Hits: hits, Note: "semantic search is not available here: lexical ranking only"}, err
	}
	var sem []Hit
	var semErr error
	done := make(chan struct{})
	go func() { // s.run runs in a flight Close waits for: this ends before it
		defer close(done)
		sem, semErr = s.semantic(ctx, st, q.Text, q.K)
	}()
	wait, cancel := context.WithTimeout(ctx, indexGrace)
	_, ixErr := s.started(st).index(wait)
	cancel()
	<-done
	if semErr != nil {
		return nil, semErr
	}
	if ixErr != nil && errors.Is(ixErr, context.DeadlineExceeded) && ctx.Err() == nil {
		return &Results{Query: q, Hits: sem, partial: true,
			Note: "the lexical index is still being built: semantic ranking only (search again in a moment for hybrid)"}, nil
	}
	lex, err := s.lexical(ctx, st, q.Text, q.K) // fuses each ranking's top k: see fuse
	if err != nil {
		return nil, err
	}
	return &Results{Query: q, Hits: fuse(q.K, lex, sem)}, nil
}

// Stats are a Searcher's counters and its current index's costs.
type Stats struct {
	Searches, Failures, ChromaQueries int64
	Index                             IndexStats
}

// Stats returns the counters.
func (s *Searcher) Stats() Stats {
	s.mu.Lock()
	cur := s.cur
	s.mu.Unlock()
	out := Stats{Searches: s.st.searches.Load(), Failures: s.st.failures.Load(), ChromaQueries: s.st.chromaQueries.Load()}
	if cur != nil {
		out.Index = cur.stats()
	}
	return out
}
