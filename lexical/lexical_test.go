package lexical

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
)

// page is a page of a test corpus: its passages, laid end to end from
// offset 0 with one byte between them.
type page struct {
	name     string
	passages []string
}

func build(pages ...page) *Index {
	bd := NewBuilder()
	for _, p := range pages {
		n := bd.AddPage(p.name)
		off := int64(0)
		for _, text := range p.passages {
			bd.Add(n, off, text)
			off += int64(len(text)) + 1
		}
	}
	return bd.Build()
}

// tiny: N = 3 passages of 3, 2 and 1 tokens, avgdl = 2.
//
//	passage 0 (page a, off 0): cat cat dog
//	passage 1 (page b, off 0): dog fish
//	passage 2 (page b, off 9): fish
func tiny() *Index {
	return build(
		page{"a", []string{"cat cat dog"}},
		page{"b", []string{"dog fish", "fish"}},
	)
}

func TestSearchHandComputed(t *testing.T) {
	// idf(cat) = ln(1 + (3-1+0.5)/(1+0.5)) = ln(8/3); idf(dog) = idf(fish) =
	// ln(1 + (3-2+0.5)/(2+0.5)) = ln(1.6).
	// Length norms K = 1.2*(0.25 + 0.75*dl/2): dl 3 → 1.65, 2 → 1.2, 1 → 0.75.
	// A term's part is idf * tf*2.2 / (tf + K).
	idfCat, idfDog := math.Log(8.0/3), math.Log(1.6)
	cat0 := idfCat * 2 * 2.2 / (2 + 1.65) // 1.1824
	dog0 := idfDog * 2.2 / (1 + 1.65)     // 0.3901
	dog1 := idfDog * 2.2 / (1 + 1.2)      // 0.4700
	fish1 := dog1
	fish2 := idfDog * 2.2 / (1 + 0.75) // 0.5908
	type hit struct {
		name  string
		score float64
		off   int64
	}
	tests := []struct {
		query string
		want  []hit
	}{
		{"cat", []hit{{"a", cat0, 0}}},
		{"dog", []hit{{"b", dog1, 0}, {"a", dog0, 0}}},
		{"fish", []hit{{"b", fish2, 9}}}, // b's best passage is its second
		{"dog fish", []hit{{"b", dog1 + fish1, 0}, {"a", dog0, 0}}},
		{"cat dog cat", []hit{{"a", cat0 + dog0, 0}, {"b", dog1, 0}}}, // cat counts once
		{"CATS, the Dogs!", []hit{{"a", cat0 + dog0, 0}, {"b", dog1, 0}}},
		{"bird", nil},
	}
	ix := tiny()
	for _, tt := range tests {
		got := ix.Search(tt.query, 10)
		if len(got) != len(tt.want) {
			t.Errorf("Search(%q) = %+v, want %d hits", tt.query, got, len(tt.want))
			continue
		}
		for i, w := range tt.want {
			g := got[i]
			if g.Name != w.name || math.Abs(g.Score-w.score) > 1e-12 || g.Passage.Off != w.off {
				t.Errorf("Search(%q)[%d] = %+v, want %s %.6f at %d", tt.query, i, g, w.name, w.score, w.off)
			}
		}
	}
	if ix.Pages() != 2 || ix.Passages() != 3 || ix.Terms() != 3 {
		t.Errorf("Pages, Passages, Terms = %d, %d, %d, want 2, 3, 3", ix.Pages(), ix.Passages(), ix.Terms())
	}
}

func TestSearchBestPassage(t *testing.T) {
	ix := build(
		page{"p", []string{
			"rotate the key once among many other unrelated words here", // weaker: long
			"nothing at all",
			"rotate key", // best: short, both terms
			"key",
		}},
	)
	got := ix.Search("rotate key", 5)
	if len(got) != 1 {
		t.Fatalf("Search = %+v, want one hit", got)
	}
	want := Passage{Off: int64(len("rotate the key once among many other unrelated words here") + 1 + len("nothing at all") + 1), Len: int64(len("rotate key"))}
	if got[0].Passage != want {
		t.Errorf("best passage %+v, want %+v", got[0].Passage, want)
	}
	// The page's score is its best passage's, not a sum over its passages.
	pages := []page{{"p", []string{"rotate the key once among many other unrelated words here", "nothing at all", "rotate key", "key"}}}
	if ref := reference(pages, "rotate key", 5); !hitsClose(got, ref) {
		t.Errorf("Search = %+v, the reference says %+v", got, ref)
	}
}

func TestSearchEqualPassagesFirstWins(t *testing.T) {
	bd := NewBuilder()
	p := bd.AddPage("p")
	bd.Add(p, 500, "mount")
	bd.Add(p, 100, "mount")
	bd.Add(p, 300, "mount")
	got := bd.Build().Search("mount", 1)
	if len(got) != 1 || got[0].Passage != (Passage{Off: 100, Len: 5}) {
		t.Errorf("Search = %+v, want the passage at 100", got)
	}
}

func TestSearchTiesByName(t *testing.T) {
	ix := build(
		page{"c", []string{"same words"}},
		page{"a", []string{"same words"}},
		page{"b", []string{"same words"}},
		page{"d", []string{"other"}},
	)
	got := ix.Search("words", 10)
	var names []string
	for _, h := range got {
		names = append(names, h.Name)
	}
	if !slices.Equal(names, []string{"a", "b", "c"}) {
		t.Errorf("order %q, want a b c", names)
	}
	if got[0].Score != got[1].Score || got[1].Score != got[2].Score {
		t.Errorf("scores %v %v %v differ", got[0].Score, got[1].Score, got[2].Score)
	}
	if got[0].Page != 1 || got[1].Page != 2 || got[2].Page != 0 {
		t.Errorf("page numbers %d %d %d, want 1 2 0", got[0].Page, got[1].Page, got[2].Page)
	}
	// k cuts the tie by name too.
	if top := ix.Search("words", 2); len(top) != 2 || top[0].Name != "a" || top[1].Name != "b" {
		t.Errorf("top 2 = %+v, want a b", top)
	}
}

func TestSearchStemmingAndStopWords(t *testing.T) {
	ix := build(
		page{"rot", []string{"How to rotate the keys"}},
		page{"the", []string{"the the the of and"}},
	)
	for _, q := range []string{"rotating", "ROTATES", "rotated keys", "the rotation of"} {
		got := ix.Search(q, 10)
		if len(got) != 1 || got[0].Name != "rot" {
			t.Errorf("Search(%q) = %+v, want page rot", q, got)
		}
	}
	for _, q := range []string{"the", "of and the", "", "  ", "?!", "zebra"} {
		if got := ix.Search(q, 10); got != nil {
			t.Errorf("Search(%q) = %+v, want nil", q, got)
		}
	}
	if ix.Terms() != 2 { // "rotat", "key": stop words are not terms
		t.Errorf("Terms = %d, want 2", ix.Terms())
	}
}

func TestSearchK(t *testing.T) {
	var pages []page
	for i := range 20 {
		pages = append(pages, page{fmt.Sprintf("p%02d", i), []string{strings.Repeat("word ", i+1) + strings.Repeat("filler ", 20)}})
	}
	ix := build(pages...)
	for _, tt := range []struct{ k, want int }{{-1, 0}, {0, 0}, {1, 1}, {7, 7}, {20, 20}, {21, 20}, {math.MaxInt, 20}} {
		got := ix.Search("word", tt.k)
		if len(got) != tt.want {
			t.Errorf("k=%d: %d hits, want %d", tt.k, len(got), tt.want)
		}
		if tt.want == 0 && got != nil {
			t.Errorf("k=%d: %+v, want nil", tt.k, got)
		}
		// More occurrences score higher: p19 first, then down.
		for i, h := range got {
			if want := fmt.Sprintf("p%02d", 19-i); h.Name != want {
				t.Errorf("k=%d: hit %d is %s, want %s", tt.k, i, h.Name, want)
				break
			}
		}
	}
}

func TestEmptyIndex(t *testing.T) {
	for _, ix := range []*Index{NewBuilder().Build(), build(page{"a", nil}), build(page{"a", []string{"", "the"}})} {
		if got := ix.Search("anything", 5); got != nil {
			t.Errorf("Search on an empty index = %+v", got)
		}
		data, err := ix.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		back, err := Unmarshal(data)
		if err != nil {
			t.Fatalf("Unmarshal of an empty index: %v", err)
		}
		if back.Pages() != ix.Pages() || back.Passages() != ix.Passages() || back.Terms() != 0 {
			t.Errorf("round trip: %d %d %d, want %d %d 0", back.Pages(), back.Passages(), back.Terms(), ix.Pages(), ix.Passages())
		}
	}
}

func TestBuilderMisuse(t *testing.T) {
	mustPanic := func(name string, f func()) {
		t.Helper()
		defer func() {
			if recover() == nil {
				t.Errorf("%s did not panic", name)
			}
		}()
		f()
	}
	bd := NewBuilder()
	p := bd.AddPage("p")
	mustPanic("Add to an unknown page", func() { bd.Add(p+1, 0, "x") })
	mustPanic("Add at a negative offset", func() { bd.Add(p, -1, "x") })
	mustPanic("Add at an overflowing offset", func() { bd.Add(p, math.MaxInt64, "x") })
	bd.Build()
	mustPanic("AddPage after Build", func() { bd.AddPage("q") })
	mustPanic("Add after Build", func() { bd.Add(p, 0, "x") })
	mustPanic("Build after Build", func() { bd.Build() })
}

// randomCorpus makes pages of passages over a small vocabulary, with stop
// words and inflections, so that terms repeat and scores tie.
func randomCorpus(r *rand.Rand, nPages int) []page {
	vocab := []string{"rotate", "rotating", "key", "keys", "mount", "mounted", "cache", "the", "of",
		"chroma", "page", "pages", "search", "index", "fuse", "read", "only", "view", "Views", "Ärger"}
	pages := make([]page, nPages)
	for i := range pages {
		pages[i].name = fmt.Sprintf("dir%d/page%03d.md", r.IntN(3), r.IntN(1000))
		for range r.IntN(4) {
			var words []string
			for range r.IntN(12) {
				words = append(words, vocab[r.IntN(len(vocab))])
			}
			pages[i].passages = append(pages[i].passages, strings.Join(words, " "))
		}
	}
	return pages
}

// reference is BM25 by the book, from the texts: the oracle for Search.
func reference(pages []page, query string, k int) []Hit {
	type pass struct {
		page uint32
		off  int64
		n    int64
		tf   map[string]int
		dl   int
	}
	var all []pass
	df := map[string]int{}
	for i, p := range pages {
		off := int64(0)
		for _, text := range p.passages {
			toks := Tokenize(text)
			tf := map[string]int{}
			for _, t := range toks {
				tf[t]++
			}
			for t := range tf {
				df[t]++
			}
			all = append(all, pass{uint32(i), off, int64(len(text)), tf, len(toks)})
			off += int64(len(text)) + 1
		}
	}
	terms := slices.Compact(slices.Sorted(slices.Values(Tokenize(query))))
	if len(terms) == 0 || k < 1 || len(all) == 0 {
		return nil
	}
	total := 0
	for _, p := range all {
		total += p.dl
	}
	n, avg := float64(len(all)), float64(total)/float64(len(all))
	best := map[uint32]Hit{}
	for _, p := range all {
		var score float64
		for _, t := range terms {
			if p.tf[t] == 0 {
				continue
			}
			d := float64(df[t])
			idf := math.Log(1 + (n-d+0.5)/(d+0.5))
			f := float64(p.tf[t])
			score += idf * f * (k1 + 1) / (f + k1*(1-bNorm+bNorm*float64(p.dl)/avg))
		}
		if score == 0 {
			continue
		}
		h, ok := best[p.page]
		if !ok || score > h.Score || score == h.Score && p.off < h.Passage.Off {
			best[p.page] = Hit{Page: p.page, Name: pages[p.page].name, Score: score, Passage: Passage{p.off, p.n}}
		}
	}
	hits := slices.Collect(func(yield func(Hit) bool) {
		for _, h := range best {
			if !yield(h) {
				return
			}
		}
	})
	slices.SortFunc(hits, func(x, y Hit) int {
		switch {
		case x.Score > y.Score:
			return -1
		case x.Score < y.Score:
			return 1
		case x.Name != y.Name:
			return strings.Compare(x.Name, y.Name)
		}
		return int(x.Page) - int(y.Page)
	})
	if len(hits) > k {
		hits = hits[:k]
	}
	if len(hits) == 0 {
		return nil
	}
	return hits
}

var referenceQueries = []string{"rotate", "keys", "rotating key", "the", "mount cache", "chroma page search",
	"index fuse read", "view views", "ärger", "only only only", "missing", "rotate keys mounted cache of pages"}

func TestSearchMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		pages := randomCorpus(r, 1+r.IntN(40))
		ix := build(pages...)
		for _, q := range referenceQueries {
			for _, k := range []int{1, 3, 100} {
				got, want := ix.Search(q, k), reference(pages, q, k)
				if !hitsClose(got, want) {
					t.Fatalf("round %d, Search(%q, %d):\n got %+v\nwant %+v", round, q, k, got, want)
				}
			}
		}
	}
}

// hitsClose compares hits, allowing scores a few ulps apart (the reference
// divides by avgdl where the index multiplies by a precomputed norm).
func hitsClose(got, want []Hit) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Page != w.Page || g.Name != w.Name || g.Passage != w.Passage || math.Abs(g.Score-w.Score) > 1e-9*w.Score {
			return false
		}
	}
	return true
}

func TestSearchConcurrent(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	pages := randomCorpus(r, 200)
	ix := build(pages...)
	want := map[string][]Hit{}
	for _, q := range referenceQueries {
		want[q] = ix.Search(q, 10)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				q := referenceQueries[(g+i)%len(referenceQueries)]
				if got := ix.Search(q, 10); !reflect.DeepEqual(got, want[q]) {
					select {
					case errs <- fmt.Sprintf("goroutine %d: Search(%q) = %+v, want %+v", g, q, got, want[q]):
					default:
					}
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestMemoryBytes(t *testing.T) {
	corpus := syntheticCorpus(1000, 5000, 1000, 20000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	ix := buildSynthetic(corpus)
	runtime.GC()
	runtime.ReadMemStats(&after)
	held := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	est := ix.MemoryBytes()
	t.Logf("MemoryBytes %d, heap grew by %d (%d passages, %d terms)", est, held, ix.Passages(), ix.Terms())
	if ratio := float64(est) / float64(held); ratio < 0.8 || ratio > 1.2 {
		t.Errorf("MemoryBytes %d is %.2f of the heap it holds (%d)", est, ratio, held)
	}
	runtime.KeepAlive(ix)
	runtime.KeepAlive(corpus)
}
