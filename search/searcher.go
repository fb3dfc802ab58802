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
}

// PageRef names a page's records, for its stored vectors.
type PageRef struct {
	Slug, SHA256 string
	Chunks       int      // its chunk count, when chromafs-ingest wrote it (ids derive from it)
	Records      []string // the records of another tool it is mapped onto
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
	// Timeout bounds a search, waits for the lexical index included
	// (the mount's --timeout); default 30 s.
	Timeout time.Duration
	// Workers bounds the index build's concurrent page reads; default 4.
	Workers int
	// CacheEntries bounds the results kept per view; default 512.
	CacheEntries int
	Log          *slog.Logger
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
	cur     *state // the newest tree's
	prev    *state // the one before: a request that read the tree before a swap
	results *lru.Cache[string, *Results]
	embeds  *lru.Cache[string, []float32]
	flights singleflight.Group
	st      counters
}

type counters struct {
	searches, failures, chromaQueries atomic.Int64
}

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
	if (cfg.Embedder == nil || cfg.Vectors == nil) && cfg.NoSemantic == "" {
		cfg.NoSemantic = "no embedding function"
	}
	s := &Searcher{cfg: cfg}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.results, _ = lru.New[string, *Results](cfg.CacheEntries)
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

// SemanticAvailable reports whether queries can be embedded.
func (s *Searcher) SemanticAvailable() bool { return s.cfg.Embedder != nil && s.cfg.Vectors != nil }

// Prepare makes t the tree searched from now on: it maps its pages. The
// lexical index of a tree is loaded or built in the background once a
// search needs it (a mount whose agent never searches pays nothing), and
// at once for a new version of a tree whose index was in use. Preparing
// the same version again does nothing; Prepare never waits.
func (s *Searcher) Prepare(t *tree.Tree) {
	s.stateFor(t)
}

// stateFor returns t's state, making it when t is a new version, or when
// the last build failed a while ago.
func (s *Searcher) stateFor(t *tree.Tree) *state {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cur
	if c != nil && c.t.Version == t.Version && !c.retry() {
		return c
	}
	if p := s.prev; p != nil && p.t.Version == t.Version && !p.retry() {
		return p // not made current again: the swap has happened
	}
	st := newState(t)
	s.cur, s.prev = st, c
	if c != nil && c.started {
		s.startLocked(st)
	}
	return st
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
		s.mu.Lock()
		if s.cur == st { // the version before is no longer asked for
			s.prev = nil
		}
		s.mu.Unlock()
	}()
}

// Search runs the query a .search/ directory name holds over t.
func (s *Searcher) Search(ctx context.Context, t *tree.Tree, name string) (*Results, error) {
	q, err := ParseName(name)
	if err != nil {
		return nil, err
	}
	if q.Mode == Semantic && !s.SemanticAvailable() {
		return nil, fmt.Errorf("%w: semantic search: %s", ErrUnsupported, s.cfg.NoSemantic)
	}
	return s.cached(ctx, t, q, func(ctx context.Context, st *state) (*Results, error) {
		return s.run(ctx, st, q)
	})
}

// SimilarTo ranks the pages like the page at path (.similar/PATH/), by
// its stored vectors.
func (s *Searcher) SimilarTo(ctx context.Context, t *tree.Tree, path string, k int) (*Results, error) {
	if s.cfg.Vectors == nil || !s.cfg.Similar {
		return nil, fmt.Errorf("%w: .similar/: the collection's stored vectors carry no meaning", ErrUnsupported)
	}
	if k <= 0 {
		k = DefaultK
	}
	q := Query{Text: path, K: k, Mode: Similar}
	return s.cached(ctx, t, q, func(ctx context.Context, st *state) (*Results, error) {
		return s.similar(ctx, st, q)
	})
}

// cached answers q from the results kept for t's version, else runs it
// once for every concurrent asker, within the timeout. Failures are
// logged with their reason and never kept.
func (s *Searcher) cached(ctx context.Context, t *tree.Tree, q Query, run func(context.Context, *state) (*Results, error)) (*Results, error) {
	key := t.Version + "\x00" + q.key()
	if r, ok := s.results.Get(key); ok {
		return r, nil
	}
	s.st.searches.Add(1)
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	start := time.Now()
	ch := s.flights.DoChan(key, func() (any, error) {
		// The flight outlives a caller that gives up (another may wait on
		// it), but not the timeout.
		if !s.enter() {
			return nil, errors.New("search closed")
		}
		defer s.wg.Done()
		fctx, fcancel := context.WithTimeout(s.ctx, s.cfg.Timeout)
		defer fcancel()
		if r, ok := s.results.Get(key); ok { // re-checked inside the flight
			return r, nil
		}
		r, err := run(fctx, s.stateFor(t))
		if err == nil {
			s.results.Add(key, r)
		}
		return r, err
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, s.failed(q, res.Err, start)
		}
		r := res.Val.(*Results)
		s.cfg.Log.Debug("search", "query", q.Text, "mode", q.Mode, "k", q.K, "results", len(r.Hits), "took", time.Since(start))
		return r, nil
	case <-ctx.Done():
		return nil, s.failed(q, fmt.Errorf("search took longer than %s: %w", s.cfg.Timeout, ctx.Err()), start)
	}
}

func (s *Searcher) failed(q Query, err error, start time.Time) error {
	if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnsupported) {
		s.st.failures.Add(1)
		s.cfg.Log.Warn("search failed", "query", q.Text, "mode", q.Mode, "took", time.Since(start).Round(time.Millisecond), "err", err)
	}
	return err
}

// run answers a query in its mode.
func (s *Searcher) run(ctx context.Context, st *state, q Query) (*Results, error) {
	depth := q.K // see fuse
	switch q.Mode {
	case Lexical:
		hits, err := s.lexical(ctx, st, q.Text, q.K)
		return &Results{Query: q, Hits: hits}, err
	case Semantic:
		hits, err := s.semantic(ctx, st, q.Text, q.K)
		return &Results{Query: q, Hits: hits}, err
	}
	if !s.SemanticAvailable() {
		hits, err := s.lexical(ctx, st, q.Text, q.K)
		return &Results{Query: q, Hits: hits, Note: "semantic search is not available here: lexical ranking only"}, err
	}
	var lex, sem []Hit
	var lexErr, semErr error
	var wg sync.WaitGroup
	wg.Go(func() { lex, lexErr = s.lexical(ctx, st, q.Text, depth) })
	sem, semErr = s.semantic(ctx, st, q.Text, depth)
	wg.Wait()
	if err := errors.Join(lexErr, semErr); err != nil {
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
