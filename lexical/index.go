package lexical

import (
	"math"
	"slices"
	"sort"
	"strings"
	"sync"
	"unsafe"
)

// BM25's parameters.
const (
	k1    = 1.2
	bNorm = 0.75 // b
)

// Index is an immutable BM25 index of one view's pages, safe for concurrent
// use. Make one with a [Builder] or [Unmarshal].
type Index struct {
	// Page i's name is names[nameOff[i]:nameOff[i+1]].
	names   string
	nameOff []uint32

	// Passages, by id (their order of Add).
	passPage []uint32
	passOff  []int64
	passLen  []int64
	passDL   []uint32  // length in tokens
	norm     []float64 // k1 * (1 - b + b*dl/avgdl)

	// The dictionary: term i (its id) is terms[termOff[i]:termOff[i+1]],
	// in ascending byte order.
	terms   string
	termOff []uint32

	// Postings of term i: post[postOff[i]:postOff[i+1]], df[i] pairs of
	// uvarints (passage id minus the previous one's, or the id itself for
	// the first; term frequency), in ascending passage order.
	df      []uint32
	post    []byte
	postOff []uint32

	scratch sync.Pool // of *scratch
}

// Passage is a byte range of a page.
type Passage struct{ Off, Len int64 }

// Hit is one page a search found.
type Hit struct {
	Page    uint32
	Name    string  // the page's name
	Score   float64 // the page's score: its best passage's BM25 score
	Passage Passage // that best passage
}

// scratch is one search's working memory, sized to the index.
type scratch struct {
	acc     []float64 // by passage: its score so far; 0 when untouched
	touched []uint32  // the passages whose acc is not 0
	best    []float64 // by page: its best passage's score; 0 when untouched
	bestP   []uint32  // by page: that passage
	pages   []uint32  // the pages whose best is not 0
	heap    []cand
}

type cand struct {
	page, pass uint32
	score      float64
}

// finish computes what an index derives from its passages' lengths.
func (ix *Index) finish() {
	var sum float64
	for _, dl := range ix.passDL {
		sum += float64(dl)
	}
	avg := 0.0
	if len(ix.passDL) > 0 {
		avg = sum / float64(len(ix.passDL))
	}
	ix.norm = make([]float64, len(ix.passDL))
	for i, dl := range ix.passDL {
		r := 0.0
		if avg > 0 {
			r = float64(dl) / avg
		}
		ix.norm[i] = k1 * (1 - bNorm + bNorm*r)
	}
}

// Pages returns the number of pages.
func (ix *Index) Pages() int { return len(ix.nameOff) - 1 }

// name returns the name of page i.
func (ix *Index) name(i uint32) string { return ix.names[ix.nameOff[i]:ix.nameOff[i+1]] }

// Passages returns the number of passages.
func (ix *Index) Passages() int { return len(ix.passPage) }

// Terms returns the number of distinct terms.
func (ix *Index) Terms() int { return len(ix.df) }

// MemoryBytes estimates the heap the index holds: its arrays and names. It
// leaves out the working memory of searches (pooled, some 12 bytes a
// passage and 16 a page for each search running at once).
func (ix *Index) MemoryBytes() int64 {
	m := int64(unsafe.Sizeof(*ix))
	m += int64(len(ix.names)) + int64(cap(ix.nameOff))*4
	m += int64(cap(ix.passPage))*4 + int64(cap(ix.passOff))*8 + int64(cap(ix.passLen))*8 +
		int64(cap(ix.passDL))*4 + int64(cap(ix.norm))*8
	m += int64(len(ix.terms)) + int64(cap(ix.termOff))*4
	m += int64(cap(ix.df))*4 + int64(cap(ix.post)) + int64(cap(ix.postOff))*4
	return m
}

// term returns the text of term i.
func (ix *Index) term(i int) string { return ix.terms[ix.termOff[i]:ix.termOff[i+1]] }

// lookup returns the id of a term.
func (ix *Index) lookup(t string) (uint32, bool) {
	n := len(ix.df)
	i := sort.Search(n, func(i int) bool { return ix.term(i) >= t })
	if i < n && ix.term(i) == t {
		return uint32(i), true
	}
	return 0, false
}

// Search ranks the pages by their best passage's BM25 score and returns at
// most k of them, best first; equal scores rank by page name, then number.
// Only pages that score above 0 (that hold a query term) are hits. Of a
// page's passages that score the same, the first in the page wins. An empty
// or all-stop-word query, or k < 1, returns nil.
func (ix *Index) Search(query string, k int) []Hit {
	if k < 1 || len(ix.passPage) == 0 {
		return nil
	}
	var ids []uint32
	for _, t := range Tokenize(query) {
		if id, ok := ix.lookup(t); ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)

	s := ix.getScratch()
	defer ix.scratch.Put(s)

	// Term at a time, in dictionary order, into the passages' accumulators.
	n := float64(len(ix.passPage))
	for _, t := range ids {
		df := float64(ix.df[t])
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		post := ix.post[ix.postOff[t]:ix.postOff[t+1]]
		pass := uint32(0)
		for len(post) > 0 {
			var d, tf uint64
			d, post = uvarint(post)
			tf, post = uvarint(post)
			pass += uint32(d)
			f := float64(tf)
			sc := idf * f * (k1 + 1) / (f + ix.norm[pass])
			if s.acc[pass] == 0 {
				s.touched = append(s.touched, pass)
			}
			s.acc[pass] += sc
		}
	}

	// Each page's best passage.
	for _, p := range s.touched {
		sc := s.acc[p]
		s.acc[p] = 0
		pg := ix.passPage[p]
		switch cur := s.best[pg]; {
		case cur == 0:
			s.pages = append(s.pages, pg)
		case sc < cur:
			continue
		case sc == cur:
			q := s.bestP[pg]
			if ix.passOff[q] < ix.passOff[p] || ix.passOff[q] == ix.passOff[p] && q < p {
				continue
			}
		}
		s.best[pg] = sc
		s.bestP[pg] = p
	}

	// The top k pages: a heap whose root is the worst kept.
	h := s.heap[:0]
	for _, pg := range s.pages {
		c := cand{page: pg, pass: s.bestP[pg], score: s.best[pg]}
		s.best[pg] = 0
		switch {
		case len(h) < k:
			h = append(h, c)
			ix.up(h, len(h)-1)
		case ix.better(c, h[0]):
			h[0] = c
			ix.down(h, 0)
		}
	}
	slices.SortFunc(h, func(x, y cand) int {
		if ix.better(x, y) {
			return -1
		}
		return 1
	})
	hits := make([]Hit, len(h))
	for i, c := range h {
		hits[i] = Hit{
			Page:    c.page,
			Name:    ix.name(c.page),
			Score:   c.score,
			Passage: Passage{Off: ix.passOff[c.pass], Len: ix.passLen[c.pass]},
		}
	}
	s.heap = h[:0]
	s.touched = s.touched[:0]
	s.pages = s.pages[:0]
	return hits
}

// better reports whether x ranks before y. Two candidates are never of
// the same page, so it is a strict total order.
func (ix *Index) better(x, y cand) bool {
	if x.score != y.score {
		return x.score > y.score
	}
	if c := strings.Compare(ix.name(x.page), ix.name(y.page)); c != 0 {
		return c < 0
	}
	return x.page < y.page
}

// up and down keep h a heap with the worst candidate at its root.
func (ix *Index) up(h []cand, i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !ix.better(h[parent], h[i]) {
			return
		}
		h[parent], h[i] = h[i], h[parent]
		i = parent
	}
}

func (ix *Index) down(h []cand, i int) {
	for {
		worst := i
		for _, c := range [2]int{2*i + 1, 2*i + 2} {
			if c < len(h) && ix.better(h[worst], h[c]) {
				worst = c
			}
		}
		if worst == i {
			return
		}
		h[i], h[worst] = h[worst], h[i]
		i = worst
	}
}

func (ix *Index) getScratch() *scratch {
	if s, ok := ix.scratch.Get().(*scratch); ok {
		return s
	}
	return &scratch{
		acc:   make([]float64, len(ix.passPage)),
		best:  make([]float64, ix.Pages()),
		bestP: make([]uint32, ix.Pages()),
	}
}

// uvarint decodes one uvarint of postings that Build wrote or Unmarshal
// checked, and returns the rest.
func uvarint(p []byte) (uint64, []byte) {
	if p[0] < 0x80 {
		return uint64(p[0]), p[1:]
	}
	var x uint64
	var s uint
	for i, c := range p {
		if c < 0x80 {
			return x | uint64(c)<<s, p[i+1:]
		}
		x |= uint64(c&0x7f) << s
		s += 7
	}
	panic("lexical: postings corrupt") // unreachable for a checked index
}
