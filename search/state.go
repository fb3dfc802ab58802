package search

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/lexical"
	"github.com/chromafs/chromafs/tree"
)

// state is one tree version's: its pages by slug and by record (to fold
// Chroma's records onto the view's pages) and its lexical index.
type state struct {
	t        *tree.Tree
	bySlug   map[string]*tree.Node
	byRecord map[string]*tree.Node
	in       []string // the where filter of a semantic query: page in these,
	notIn    []string // or not in these (see scope)
	exact    bool     // the filter leaves out every hidden page
	inexact  string   // why not, when not
	files    []*tree.Node

	started  bool          // the index is being loaded or built (Searcher.mu)
	done     chan struct{} // closed once ix or err is set
	ix       *lexical.Index
	err      error
	failedAt time.Time
	read     atomic.Int64 // pages read so far by a build
	source   string       // "host" or "built"
	took     time.Duration
	encoded  int64
	skipped  int // pages left out of the index: they could not be read
	once     sync.Once
}

// Filter bounds: a where filter of more slugs than this is not sent.
const maxFilterSlugs = 5000

// retryAfter is how long a failed index build is kept before a search
// tries again.
const retryAfter = 5 * time.Second

func newState(t *tree.Tree) *state {
	st := &state{t: t, bySlug: map[string]*tree.Node{}, byRecord: map[string]*tree.Node{}, done: make(chan struct{})}
	tree.Walk(t.Root, func(n *tree.Node) bool {
		if n.File == nil {
			return true
		}
		st.files = append(st.files, n)
		if recs := n.File.Records(); recs != nil {
			for _, p := range recs {
				if p.ID != "" {
					st.byRecord[p.ID] = n
				}
			}
		} else if n.File.URI() == "" {
			st.bySlug[n.File.Slug] = n
		}
		return true
	})
	st.scope()
	return st
}

// scope picks the where filter that keeps Chroma's ranking within the
// view: none when nothing is hidden; "not in" the hidden slugs (the tree
// knows them, from its document or its snapshot) when they are at most
// maxFilterSlugs; else "in" the visible ones when those are. Where no
// filter can do it — more of both, or pages mapped onto another tool's
// records (which carry no page metadata) with some hidden — semantic
// search is off for the view (exact is false, inexact says why): the
// hidden pages' records would take places among the MaxResults, so that
// fewer than k pages came back, and a count would tell of them.
func (st *state) scope() {
	t := st.t
	nothingHidden := t.HiddenKnown && len(t.Hidden) == 0
	switch {
	case nothingHidden:
		st.exact = true
	case len(st.byRecord) > 0:
		st.inexact = "semantic search cannot be limited to this view (its pages are another tool's records, some of them hidden)"
	case t.HiddenKnown && len(t.Hidden) <= maxFilterSlugs:
		st.notIn, st.exact = t.Hidden, true
	case len(st.bySlug) <= maxFilterSlugs:
		for slug := range st.bySlug {
			st.in = append(st.in, slug)
		}
		slices.Sort(st.in)
		st.exact = true
	default:
		st.inexact = "semantic search cannot be limited to this view (too many pages are hidden from it for one query's filter)"
	}
}

func (st *state) finish(ix *lexical.Index, err error) {
	st.once.Do(func() {
		st.ix, st.err = ix, err
		if err != nil {
			st.failedAt = time.Now()
		}
		close(st.done)
	})
}

// retry reports whether the build failed long enough ago to try again.
func (st *state) retry() bool {
	select {
	case <-st.done:
		return st.err != nil && time.Since(st.failedAt) > retryAfter
	default:
		return false
	}
}

// index waits for the lexical index, within ctx.
func (st *state) index(ctx context.Context) (*lexical.Index, error) {
	select {
	case <-st.done:
	case <-ctx.Done():
		select {
		case <-st.done: // both ready: the index's answer is the better one
		default:
			return nil, fmt.Errorf("lexical index still building (%d of %d pages read): %w", st.read.Load(), len(st.files), ctx.Err())
		}
	}
	if st.err != nil {
		return nil, fmt.Errorf("lexical index: %w", st.err)
	}
	return st.ix, nil
}

// IndexStats describe the current lexical index.
type IndexStats struct {
	Ready                  bool
	Source                 string // "host" (read from the host tier) or "built"
	BuildSeconds           float64
	Pages, Passages, Terms int
	MemoryBytes, HostBytes int64
	PagesRead              int64
	Skipped                int // pages left out: they could not be read
}

func (st *state) stats() IndexStats {
	out := IndexStats{PagesRead: st.read.Load()}
	select {
	case <-st.done:
	default:
		return out
	}
	if st.ix == nil {
		return out
	}
	out.Ready, out.Source, out.BuildSeconds = true, st.source, st.took.Seconds()
	out.Pages, out.Passages, out.Terms = st.ix.Pages(), st.ix.Passages(), st.ix.Terms()
	out.MemoryBytes, out.HostBytes = st.ix.MemoryBytes(), st.encoded
	out.Skipped = st.skipped
	return out
}

// indexBound is the most bytes an encoded index of st's pages can take
// (it holds less than their text, and names their paths): a size the
// host tier's ref claims beyond it is not read.
func (st *state) indexBound() int64 {
	bound := int64(1 << 20)
	for _, n := range st.files {
		size, ok := n.File.Size()
		if !ok {
			if size = sumOf(n.File.Chunks); size == 0 {
				size = 1 << 20 // a size computed only when the page is read
			}
		}
		bound += 4*max(size, 0) + int64(len(n.Path())) + 64
	}
	return bound
}

// hostKey names the index of st's pages in the host tier: the digest of
// the view's pages (paths and content versions), so that every view that
// sees the same pages shares one entry, and no other view ever reads it.
func (s *Searcher) hostKey(st *state) cache.PageKey {
	h := sha256.New()
	for _, n := range st.files {
		fmt.Fprintf(h, "%s\x00%s\x00", n.Path(), n.File.Version)
	}
	return cache.PageKey{Collection: s.cfg.Identity, SHA256: hex.EncodeToString(h.Sum(nil)), Part: "lexical-index-v1"}
}

func sizeRef(k cache.PageKey) string { return "lexical-size\x00" + k.Name() }

// index loads st's lexical index from the host tier, or builds it and
// keeps it there.
func (s *Searcher) index(st *state) {
	start := time.Now()
	var k cache.PageKey
	if s.cfg.Host != nil && s.cfg.Identity != "" {
		k = s.hostKey(st)
		if ix, n, ok := s.fromHost(k, st.indexBound()); ok {
			st.source, st.took, st.encoded = "host", time.Since(start), n
			st.finish(ix, nil)
			s.cfg.Log.Info("search index ready", "source", "host", "pages", ix.Pages(), "passages", ix.Passages(), "took", st.took.Round(time.Millisecond))
			return
		}
	}
	ix, err := s.build(st)
	if err != nil {
		s.cfg.Log.Warn("search index build failed", "err", err, "pages_read", st.read.Load(), "pages", len(st.files))
		st.finish(nil, err)
		return
	}
	st.source, st.took = "built", time.Since(start)
	if data, err := ix.MarshalBinary(); err == nil {
		st.encoded = int64(len(data))
		if s.cfg.Host != nil && s.cfg.Identity != "" && st.skipped == 0 { // an index that lacks pages is not kept for others
			s.cfg.Host.Put(k, data)
			s.cfg.Host.SetRef(sizeRef(k), strconv.Itoa(len(data)))
		}
	} else {
		s.cfg.Log.Warn("search index not kept in the host tier", "err", err)
	}
	st.finish(ix, nil)
	s.cfg.Log.Info("search index ready", "source", "built", "pages", ix.Pages(), "left_out", st.skipped, "passages", ix.Passages(),
		"terms", ix.Terms(), "memory_bytes", ix.MemoryBytes(), "encoded_bytes", st.encoded, "took", st.took.Round(time.Millisecond))
}

// fromHost reads a kept index; the host tier verifies its digest, and the
// index checks its own structure.
func (s *Searcher) fromHost(k cache.PageKey, limit int64) (*lexical.Index, int64, bool) {
	v, ok := s.cfg.Host.Ref(sizeRef(k))
	if !ok {
		return nil, 0, false
	}
	size, err := strconv.ParseInt(v, 10, 64)
	if err != nil || size > limit {
		return nil, 0, false
	}
	data, ok := s.cfg.Host.Get(k, size)
	if !ok {
		return nil, 0, false
	}
	ix, err := lexical.Unmarshal(data)
	if err != nil {
		s.cfg.Log.Warn("search index in the host tier unusable; building it", "err", err)
		return nil, 0, false
	}
	return ix, size, true
}

// Passage sizes for pages whose chunk lengths are unknown.
const (
	passageBytes    = 4 << 10
	maxPassageBytes = 8 << 10
	// maxIndexedPage bounds the bytes of one page the index reads: a
	// larger page is left out of lexical search.
	maxIndexedPage = 16 << 20
)

// build reads every page of st's view (through the read engine, so from
// the nearest tier that has it) and indexes its passages. Lazy pages
// (their content lives behind a URL) and pages that are not UTF-8 text
// are left out.
func (s *Searcher) build(st *state) (*lexical.Index, error) {
	b := lexical.NewBuilder()
	ids := make([]uint32, len(st.files))
	for i, n := range st.files { // numbered in tree order, whatever order the reads end in
		ids[i] = b.AddPage(n.Path())
	}
	var mu sync.Mutex // the builder is not safe for concurrent use
	var skipped []string
	g, ctx := errgroup.WithContext(s.ctx)
	g.SetLimit(s.cfg.Workers)
	for i, n := range st.files {
		if n.File.URI() != "" {
			st.read.Add(1)
			continue
		}
		s.cfg.Reader.Prefetch(n.Parent, n.File) // batches the directory's pages, as a walk's reads do
		g.Go(func() error {
			data, err := s.readPage(ctx, n)
			st.read.Add(1)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				// a page that cannot be read (cat says EIO too) is left out,
				// up to a tenth of them: more mean the server is away, and
				// an index without them would answer wrongly
				if skipped = append(skipped, n.Path()); len(skipped) > len(st.files)/10 {
					return fmt.Errorf("%d pages could not be read (%s: %w)", len(skipped), n.Path(), err)
				}
				s.cfg.Log.Warn("search index: page left out", "path", n.Path(), "err", err)
				return nil
			}
			if data == nil || !utf8.Valid(data) {
				return nil
			}
			for _, sp := range passages(n.File, data) {
				b.Add(ids[i], sp.off, string(data[sp.off:sp.off+sp.n]))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	st.skipped = len(skipped)
	return b.Build(), nil
}

// readPage reads a whole page (nil for one larger than maxIndexedPage).
func (s *Searcher) readPage(ctx context.Context, n *tree.Node) ([]byte, error) {
	if err := s.cfg.Reader.EnsureSize(ctx, n); err != nil {
		return nil, err
	}
	size, ok := n.File.Size()
	if !ok {
		return nil, errors.New("size unknown")
	}
	if size > maxIndexedPage {
		return nil, nil
	}
	return readRange(ctx, s.cfg.Reader, n.File, 0, size)
}

// readRange reads bytes [off, off+size) of fl.
func readRange(ctx context.Context, rd Reader, fl *tree.File, off, size int64) ([]byte, error) {
	buf := make([]byte, size)
	for done := int64(0); done < size; {
		got, err := rd.ReadAt(ctx, fl, buf[done:], off+done)
		if err != nil {
			return nil, err
		}
		if got == 0 {
			return nil, fmt.Errorf("short read at %d of %d", done, size)
		}
		done += int64(got)
	}
	return buf, nil
}

type span struct{ off, n int64 }

// passages are the page's chunks as the ingest stored them, when their
// lengths are known and add up; else, and for a chunk longer than
// maxPassageBytes, pieces of about passageBytes ended at a line break (at
// most maxPassageBytes, on a UTF-8 boundary).
func passages(fl *tree.File, data []byte) []span {
	if sum := sumOf(fl.Chunks); len(fl.Chunks) == 0 || sum != int64(len(data)) {
		return pieces(data, 0, int64(len(data)), nil)
	}
	var out []span
	var off int64
	for _, n := range fl.Chunks {
		switch {
		case n > maxPassageBytes:
			out = pieces(data, off, off+n, out)
		case n > 0:
			out = append(out, span{off, n})
		}
		off += n
	}
	return out
}

// pieces cuts data[from:to] into passages, appended to out.
func pieces(data []byte, from, to int64, out []span) []span {
	for off := from; off < to; {
		end := min(off+passageBytes, to)
		for end < to && end-off < maxPassageBytes && data[end-1] != '\n' {
			end++
		}
		for end < to && !utf8.RuneStart(data[end]) {
			end++
		}
		out = append(out, span{off, end - off})
		off = end
	}
	return out
}

func sumOf(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}
