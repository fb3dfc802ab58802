package search

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromafs/chromafs/lexical"
	"github.com/chromafs/chromafs/tree"
)

// corpus is a view's pages; secretPage is readable by "admin" only and
// holds the words of the test queries verbatim, many times.
var corpus = []pg{
	{slug: "guides/keys", path: "guides/keys.md", chunks: []int64{31, 49},
		text: "Rotate API keys every 90 days.\nTo rotate a key, open the console and revoke it.\n"},
	{slug: "guides/tokens", path: "guides/tokens.md",
		text: "Tokens expire after an hour. Refresh tokens rotate on use; API clients refresh them.\n"},
	{slug: "ref/api", path: "ref/api.md", chunks: []int64{24, 0, 41},
		text: "The API reference lists every endpoint, its keys and its errors.\n"},
	{slug: "ref/limits", path: "ref/limits.md", noSHA: true,
		text: "Rate limits: 100 requests a minute per key.\n"},
	{slug: "notes/latin1", path: "notes/latin1.txt", text: "rotate keys \xff\xfe not UTF-8\n"},
	{slug: "lazy/big", path: "lazy/big.md", uri: "https://docs.example/big.md", text: "rotate api keys lazily\n"},
	{slug: "huge", path: "huge.md", size: maxIndexedPage + 1, text: "rotate api keys, but too large to index\n"},
}

var secretPage = pg{slug: "internal/rotation", path: "internal/rotation.md", groups: []string{"admin"},
	text: "Rotate API keys: the secret rotation plan. rotate rotate keys keys api api tokens limits endpoint.\n"}

var withSecret = append(slices.Clone(corpus), secretPage)

var queries = []string{"rotate api keys", "tokens", "key limits", "endpoint errors", "rotation plan secret", "nothing matches zzz"}

func lexicalName(q string, k int) string {
	return q + "?mode=lexical&k=" + strconv.Itoa(k)
}

func TestLexicalEqualsIndex(t *testing.T) {
	tr := treeOf(t, corpus)
	rd := newReader(corpus)
	s := newSearcher(t, Config{Reader: rd})
	for _, q := range queries {
		for _, k := range []int{1, 3, 100} {
			got := mustSearch(t, s, tr, lexicalName(q, k))
			want := expectLexical(t, tr, rd, q, k)
			if !reflect.DeepEqual(got.Hits, want) && !(len(got.Hits) == 0 && len(want) == 0) {
				t.Errorf("%q k=%d:\n got %v\nwant %v", q, k, got.Hits, want)
			}
			if got.Query != (Query{q, k, Lexical, false}) {
				t.Errorf("%q k=%d: Query %+v", q, k, got.Query)
			}
		}
	}
	got := mustSearch(t, s, tr, "rotate api keys?mode=lexical")
	if len(got.Hits) == 0 || got.Hits[0].Path != "guides/keys.md" || got.Hits[0].Text != corpus[0].text[:31] {
		t.Errorf("rotate api keys: %v; want guides/keys.md first, with its first chunk", got.Hits)
	}
	for _, h := range got.Hits {
		switch h.Path {
		case "notes/latin1.txt", "lazy/big.md", "huge.md":
			t.Errorf("%s is a hit: pages not UTF-8, lazy or too large are not indexed", h.Path)
		}
	}
}

// The index is built in the background once a search needs it, reading
// every page once; a second Searcher on the same host reads it from there.
func TestIndexLifecycle(t *testing.T) {
	tr := treeOf(t, corpus)
	rd := newReader(corpus)
	host := newHost()
	s := newSearcher(t, Config{Reader: rd, Host: host})

	s.Prepare(tr)
	s.Prepare(tr)
	if e, r, _ := rd.counts(); sum(e)+sum(r) != 0 {
		t.Fatalf("Prepare read pages: ensures %v reads %v", e, r)
	}
	s.mu.Lock()
	started := s.cur != nil && s.cur.started
	s.mu.Unlock()
	if started || s.Stats().Index.Ready {
		t.Fatal("Prepare started the index")
	}

	first := mustSearch(t, s, tr, "rotate api keys?mode=lexical")
	ens, _, _ := rd.counts()
	for _, p := range corpus {
		want := 1
		if p.uri != "" {
			want = 0 // lazy: never read
		}
		if ens[p.slug] != want {
			t.Errorf("the build read %s %d times, want %d", p.slug, ens[p.slug], want)
		}
	}
	if _, reads, _ := rd.counts(); reads["huge"] != 0 {
		t.Errorf("a page over maxIndexedPage was read")
	}
	st := s.Stats()
	if ix := st.Index; !ix.Ready || ix.Source != "built" || ix.Pages != len(corpus) || ix.PagesRead != int64(len(corpus)) || ix.HostBytes <= 0 || ix.Passages == 0 || ix.Terms == 0 {
		t.Errorf("Stats().Index after a build = %+v", ix)
	}
	if st.Searches != 1 || st.Failures != 0 {
		t.Errorf("Stats = %+v", st)
	}
	name, data := host.only(t)
	if _, err := lexical.Unmarshal(data); err != nil {
		t.Fatalf("the host tier holds no index: %v", err)
	}

	// Searching again does not build again.
	mustSearch(t, s, tr, "tokens?mode=lexical")
	if e, _, _ := rd.counts(); !reflect.DeepEqual(e, ens) {
		t.Errorf("a second search read pages again: %v, was %v", e, ens)
	}

	// Another Searcher (another process) over the same host and pages.
	rd2 := newReader(corpus)
	tr2 := treeOf(t, corpus)
	s2 := newSearcher(t, Config{Reader: rd2, Host: host})
	second := mustSearch(t, s2, tr2, "rotate api keys?mode=lexical")
	if !reflect.DeepEqual(first.Hits, second.Hits) {
		t.Errorf("from the host tier:\n got %v\nwant %v", second.Hits, first.Hits)
	}
	e2, r2, bytes2 := rd2.counts()
	if sum(e2) != 0 {
		t.Errorf("the index from the host tier read pages: %v", e2)
	}
	var hitBytes int64
	for _, h := range second.Hits {
		hitBytes += int64(len(h.Text))
	}
	if bytes2 != hitBytes || sum(r2) != len(second.Hits) {
		t.Errorf("read %d bytes in %d reads; the hits' passages are %d bytes in %d", bytes2, sum(r2), hitBytes, len(second.Hits))
	}
	if ix := s2.Stats().Index; !ix.Ready || ix.Source != "host" || ix.PagesRead != 0 || ix.HostBytes != int64(len(data)) {
		t.Errorf("Stats().Index from the host = %+v", ix)
	}
	if n, _ := host.only(t); n != name {
		t.Error("the second Searcher wrote another entry")
	}
}

// A new version of a tree whose index was in use is built at once.
func TestPrepareNewVersionBuilds(t *testing.T) {
	rd := newReader(corpus, []pg{{slug: "new", text: "a new page about keys"}})
	s := newSearcher(t, Config{Reader: rd})
	tr := treeOf(t, corpus)
	mustSearch(t, s, tr, "keys?mode=lexical")
	tr2 := treeOf(t, append(slices.Clone(corpus), pg{slug: "new", text: "a new page about keys"}))
	s.Prepare(tr2)
	waitFor(t, "the new version's index", func() bool { return s.Stats().Index.Ready })
	if e, _, _ := rd.counts(); e["new"] != 1 {
		t.Errorf("the new version's build read the new page %d times", e["new"])
	}
	got := mustSearch(t, s, tr2, "new page?mode=lexical")
	if len(got.Hits) != 1 || got.Hits[0].Path != "new.mdx" {
		t.Errorf("search of the new version = %v", got.Hits)
	}
}

// Views with other pages get other host keys: the public view never
// reads the index of the admin's, which holds the hidden page.
func TestHostKeyPerView(t *testing.T) {
	host := newHost()
	admin := treeOf(t, withSecret, "admin")
	public := treeOf(t, withSecret)
	sa := newSearcher(t, Config{Reader: newReader(withSecret), Host: host})
	mustSearch(t, sa, admin, "rotate?mode=lexical")
	adminKey, _ := host.only(t)

	rd := newReader(withSecret)
	sp := newSearcher(t, Config{Reader: rd, Host: host})
	r := mustSearch(t, sp, public, "rotate?mode=lexical")
	if ix := sp.Stats().Index; ix.Source != "built" {
		t.Errorf("the public view's index: source %q, want built", ix.Source)
	}
	if e, _, _ := rd.counts(); sum(e) == 0 {
		t.Error("the public view read no page")
	}
	host.mu.Lock()
	if slices.Contains(host.gets, adminKey) {
		t.Error("the public view asked for the admin view's entry")
	}
	if len(host.entries) != 2 {
		t.Errorf("host tier holds %d entries, want one per view", len(host.entries))
	}
	host.mu.Unlock()
	for _, h := range r.Hits {
		if h.Path == secretPage.path {
			t.Errorf("the public view found %s", h.Path)
		}
	}
	// Its key is of its own pages: a different Identity is another key.
	if a, b := sp.hostKey(newState(public)), sa.hostKey(newState(admin)); a == b {
		t.Errorf("two views share the host key %v", a)
	}
	other := New(Config{Identity: "another-collection"})
	defer other.Close()
	if a, b := other.hostKey(newState(public)), sp.hostKey(newState(public)); a == b {
		t.Error("two collections share a host key")
	}
}

// An entry of the host tier that is not a valid index is rebuilt, never
// served.
func TestCorruptHostEntryRebuilt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		corrupt func(h *memHost, name string)
	}{
		{"a flipped byte", func(h *memHost, name string) { h.entries[name][len(h.entries[name])/2] ^= 0x40 }},
		{"truncated", func(h *memHost, name string) {
			d := h.entries[name][:len(h.entries[name])-7]
			h.entries[name] = d
			for k := range h.refs {
				h.refs[k] = strconv.Itoa(len(d))
			}
		}},
		{"garbage", func(h *memHost, name string) {
			for i := range h.entries[name] {
				h.entries[name][i] = byte(i)
			}
		}},
		{"a bad size ref", func(h *memHost, name string) {
			for k := range h.refs {
				h.refs[k] = "12x"
			}
		}},
		{"a wrong size ref", func(h *memHost, name string) {
			for k := range h.refs {
				h.refs[k] = "3"
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			host := newHost()
			tr := treeOf(t, corpus)
			s1 := newSearcher(t, Config{Reader: newReader(corpus), Host: host})
			want := mustSearch(t, s1, tr, "rotate api keys?mode=lexical")
			name, _ := host.only(t)
			host.mu.Lock()
			tc.corrupt(host, name)
			host.mu.Unlock()

			rd := newReader(corpus)
			s2 := newSearcher(t, Config{Reader: rd, Host: host})
			got := mustSearch(t, s2, treeOf(t, corpus), "rotate api keys?mode=lexical")
			if !reflect.DeepEqual(got.Hits, want.Hits) {
				t.Errorf("after a corrupt entry:\n got %v\nwant %v", got.Hits, want.Hits)
			}
			if ix := s2.Stats().Index; ix.Source != "built" {
				t.Errorf("source %q, want built", ix.Source)
			}
			if e, _, _ := rd.counts(); e["guides/keys"] != 1 {
				t.Errorf("the rebuild read guides/keys %d times", e["guides/keys"])
			}
			_, data := host.only(t)
			if _, err := lexical.Unmarshal(data); err != nil {
				t.Errorf("the rebuilt index was not kept: %v", err)
			}
		})
	}
}

// A page the build cannot read fails the search (counted); the failure
// is kept for retryAfter, then a search builds again.
func TestReaderFailureAndRetry(t *testing.T) {
	tr := treeOf(t, corpus)
	rd := newReader(corpus)
	rd.setFail("ref/api", errBoom)
	s := newSearcher(t, Config{Reader: rd})

	_, err := s.Search(t.Context(), tr, "rotate?mode=lexical")
	if !errors.Is(err, errBoom) || !strings.Contains(err.Error(), "ref/api.md") {
		t.Fatalf("Search with a failing page: %v; want boom, naming the page", err)
	}
	if st := s.Stats(); st.Failures != 1 || st.Index.Ready {
		t.Errorf("Stats after a failed build = %+v", st)
	}
	ens, _, _ := rd.counts()

	// Within retryAfter the failure stands: no new build.
	rd.setFail("ref/api", nil)
	if _, err := s.Search(t.Context(), tr, "rotate?mode=lexical"); !errors.Is(err, errBoom) {
		t.Fatalf("second search within retryAfter: %v, want the kept failure", err)
	}
	if e, _, _ := rd.counts(); !reflect.DeepEqual(e, ens) {
		t.Errorf("a search within retryAfter built again: %v, was %v", e, ens)
	}
	if st := s.Stats(); st.Failures != 2 {
		t.Errorf("Failures = %d, want 2", st.Failures)
	}

	// retryAfter is a constant (5 s): age the failure instead of waiting.
	s.mu.Lock()
	s.cur.failedAt = time.Now().Add(-retryAfter - time.Second)
	s.mu.Unlock()
	r, err := s.Search(t.Context(), tr, "rotate?mode=lexical")
	if err != nil {
		t.Fatalf("search after retryAfter: %v", err)
	}
	if want := expectLexical(t, tr, rd, "rotate", DefaultK); !reflect.DeepEqual(r.Hits, want) {
		t.Errorf("after the retry:\n got %v\nwant %v", r.Hits, want)
	}
	if ix := s.Stats().Index; !ix.Ready || ix.Source != "built" {
		t.Errorf("Stats().Index after the retry = %+v", ix)
	}
}

// A lexical search that cannot get the index within the timeout fails,
// saying so; the build goes on and serves the next search. The build is
// held until after the search: only the Searcher's timeout can end it (the
// caller's context has no deadline), so a deadline is the timeout's.
func TestLexicalTimeout(t *testing.T) {
	tr := treeOf(t, corpus)
	rd := newReader(corpus)
	release := rd.hold()
	defer release()
	const timeout = 100 * time.Millisecond
	s := newSearcher(t, Config{Reader: rd, Timeout: timeout})

	if _, ok := t.Context().Deadline(); ok {
		t.Fatal("the test's context has a deadline: a deadline would prove nothing")
	}
	_, err := s.Search(t.Context(), tr, "rotate?mode=lexical")
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Search with a blocked build: %v, want a deadline", err)
	}
	if msg := err.Error(); !strings.Contains(msg, timeout.String()) && !strings.Contains(msg, "still building") {
		t.Errorf("error %q says neither the timeout nor that the index is building", msg)
	}
	if st := s.Stats(); st.Failures != 1 {
		t.Errorf("Failures = %d, want 1", st.Failures)
	}

	release()
	waitFor(t, "the index", func() bool { return s.Stats().Index.Ready })
	if r := mustSearch(t, s, tr, "rotate?mode=lexical"); len(r.Hits) == 0 {
		t.Error("no hits once the index is built")
	}
}

// Close stops a build blocked in a read (through its context) and
// returns; a search waiting on the build ends.
func TestCloseStopsBuild(t *testing.T) {
	tr := treeOf(t, corpus)
	rd := newReader(corpus)
	release := rd.hold()
	defer release()
	s := New(Config{Reader: rd, Timeout: time.Minute})

	errc := make(chan error, 1)
	go func() {
		_, err := s.Search(context.Background(), tr, "rotate?mode=lexical")
		errc <- err
	}()
	select {
	case <-rd.blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("the build never read")
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return while a read was blocked")
	}
	select {
	case err := <-errc:
		if err == nil {
			t.Error("a search over a build Close stopped succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the search waiting on the build did not end")
	}
	if _, err := s.Search(t.Context(), tr, "keys?mode=lexical"); err == nil {
		t.Error("a search after Close succeeded")
	}

	// A Searcher closed before its first search builds nothing.
	rd2 := newReader(corpus)
	s2 := New(Config{Reader: rd2})
	s2.Close()
	if _, err := s2.Search(t.Context(), tr, "keys?mode=lexical"); err == nil {
		t.Errorf("search on a closed Searcher: %v", err)
	}
	if e, _, _ := rd2.counts(); sum(e) != 0 {
		t.Errorf("a closed Searcher read pages: %v", e)
	}
}

// Close must not leave a search's work running: a Chroma query in flight
// is told to stop (its context), and Close waits for it as it waits for
// a build ("no goroutines outliving Close").
func TestCloseWaitsForSearchInFlight(t *testing.T) {
	tr := treeOf(t, corpus)
	entered := make(chan struct{})
	returned := make(chan struct{})
	vec := &fakeVectors{near: func(ctx context.Context, c nearCall) ([][]Neighbor, error) {
		close(entered)
		<-ctx.Done()
		defer close(returned)
		// A backend takes a moment to give up after it is cancelled.
		slow := time.NewTimer(500 * time.Millisecond)
		defer slow.Stop()
		<-slow.C
		return nil, ctx.Err()
	}}
	s := New(Config{Reader: newReader(corpus), Vectors: vec, Embedder: &fakeEmbedder{}, Timeout: time.Minute})
	go func() { _, _ = s.Search(context.Background(), tr, "keys?mode=semantic") }()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("Near was never called")
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
	select {
	case <-returned:
	default:
		t.Error("Close returned while a search's Chroma query was still running (the flight goroutine outlives Close)")
	}
	<-returned
}

// Hidden pages never appear, and never shift a score, a rank or a count:
// the public view of a collection with a hidden page answers exactly what
// a collection without it answers.
func TestHiddenPagesDoNotLeakLexical(t *testing.T) {
	publicWith := treeOf(t, withSecret)
	publicWithout := treeOf(t, corpus)
	admin := treeOf(t, withSecret, "admin")
	if publicWith.Lookup(secretPage.path) != nil || admin.Lookup(secretPage.path) == nil {
		t.Fatal("the views are not what the test needs")
	}
	rd := newReader(withSecret)
	sWith := newSearcher(t, Config{Reader: rd})
	sWithout := newSearcher(t, Config{Reader: rd})
	sAdmin := newSearcher(t, Config{Reader: rd})
	shifted := false
	for _, q := range queries {
		for _, k := range []int{1, 2, 100} {
			name := lexicalName(q, k)
			a := mustSearch(t, sWith, publicWith, name)
			b := mustSearch(t, sWithout, publicWithout, name)
			if !reflect.DeepEqual(a.Hits, b.Hits) {
				t.Errorf("%q k=%d: with a hidden page\n %v\nwithout it\n %v", q, k, a.Hits, b.Hits)
			}
			if !slices.Equal(a.Report(), b.Report()) {
				t.Errorf("%q k=%d: the reports differ", q, k)
			}
			for _, h := range a.Hits {
				if h.Path == secretPage.path || strings.Contains(h.Text, "secret") {
					t.Errorf("%q: the public view shows %s %q", q, h.Path, h.Text)
				}
			}
			// The test can fail: where the page is shown, it does shift
			// the others' scores.
			c := mustSearch(t, sAdmin, admin, name)
			for _, h := range c.Hits {
				if i := slices.IndexFunc(b.Hits, func(x Hit) bool { return x.Path == h.Path }); i >= 0 && b.Hits[i].Score != h.Score {
					shifted = true
				}
			}
		}
	}
	if !shifted {
		t.Error("the hidden page shifts no score even in the admin's view: the test proves nothing")
	}
	if a, b := sWith.Stats().Index, sWithout.Stats().Index; a.Pages != b.Pages || a.Passages != b.Passages || a.Terms != b.Terms {
		t.Errorf("index with a hidden page %+v, without %+v", a, b)
	}
}

func TestSemantic(t *testing.T) {
	tr := treeOf(t, withSecret)
	vec := &fakeVectors{near: func(ctx context.Context, c nearCall) ([][]Neighbor, error) {
		return [][]Neighbor{{
			// Chroma ignoring the filter: the hidden page is dropped anyway.
			{ID: "s#0", Page: secretPage.slug, PageSHA: digestOf(secretPage.text), Distance: 0.01, Text: "secret"},
			{ID: "k#1", Page: "guides/keys", PageSHA: digestOf(corpus[0].text), Distance: 0.1, Text: "rotate"},
			{ID: "t#0", Page: "guides/tokens", Distance: 0.3, Text: "tokens"},
			{ID: "k#0", Page: "guides/keys", Distance: 0.2, Text: "worse chunk"},
		}}, nil
	}}
	emb := &fakeEmbedder{}
	s := newSearcher(t, Config{Reader: newReader(withSecret), Vectors: vec, Embedder: emb})
	r := mustSearch(t, s, tr, "rotate keys?mode=semantic&k=5")
	want := []Hit{{"guides/keys.md", 0.9, "rotate", 0}, {"guides/tokens.md", 0.7, "tokens", 0}}
	if !hitsNear(r.Hits, want) {
		t.Errorf("semantic hits %v, want %v", r.Hits, want)
	}
	calls := vec.calls()
	if len(calls) != 1 {
		t.Fatalf("%d Near calls, want 1", len(calls))
	}
	c := calls[0]
	wantVec, _ := (&fakeEmbedder{}).Embed(t.Context(), "rotate keys")
	if len(c.vectors) != 1 || !slices.Equal(c.vectors[0], wantVec) {
		t.Errorf("Near got vectors %v, want the query's one", c.vectors)
	}
	if c.n != MaxResults {
		t.Errorf("Near asked for %d, want MaxResults", c.n)
	}
	if !slices.Equal(c.notIn, []string{secretPage.slug}) || c.in != nil {
		t.Errorf("Near filter: in %v, notIn %v; want not in the hidden page", c.in, c.notIn)
	}
	if st := s.Stats(); st.ChromaQueries != 1 || st.Searches != 1 {
		t.Errorf("Stats = %+v", st)
	}
	if s.Stats().Index.Ready {
		t.Error("a semantic search built the lexical index")
	}
}

func TestSemanticUnsupported(t *testing.T) {
	tr := treeOf(t, corpus)
	for _, cfg := range []Config{
		{Reader: newReader(corpus)},
		{Reader: newReader(corpus), Vectors: &fakeVectors{}, NoSemantic: "the collection has no embedding function"},
		{Reader: newReader(corpus), Embedder: &fakeEmbedder{}}, // no Vectors
	} {
		s := newSearcher(t, cfg)
		_, err := s.Search(t.Context(), tr, "keys?mode=semantic")
		if !errors.Is(err, ErrUnsupported) || !errors.Is(err, syscall.EOPNOTSUPP) {
			t.Errorf("semantic without an embedder: %v, want ErrUnsupported", err)
		}
		if cfg.NoSemantic != "" && (err == nil || !strings.Contains(err.Error(), cfg.NoSemantic)) {
			t.Errorf("error %v does not say why", err)
		}
		if st := s.Stats(); st.Failures != 0 {
			t.Errorf("ErrUnsupported counted as a failure: %+v", st)
		}
	}
}

func TestHybridWithoutEmbedderIsLexical(t *testing.T) {
	tr := treeOf(t, corpus)
	rd := newReader(corpus)
	s := newSearcher(t, Config{Reader: rd, Vectors: &fakeVectors{}})
	for _, q := range queries {
		h := mustSearch(t, s, tr, q+"?k=4")
		l := mustSearch(t, s, tr, q+"?k=4&mode=lexical")
		if !reflect.DeepEqual(h.Hits, l.Hits) && !(len(h.Hits) == 0 && len(l.Hits) == 0) {
			t.Errorf("%q: hybrid %v, lexical %v", q, h.Hits, l.Hits)
		}
		if h.Query.Mode != Hybrid || !strings.Contains(h.Note, "lexical") || !strings.Contains(string(h.Report()), "# "+h.Note) {
			t.Errorf("%q: hybrid without an embedder: mode %s, note %q", q, h.Query.Mode, h.Note)
		}
		if l.Note != "" {
			t.Errorf("lexical carries a note %q", l.Note)
		}
	}
}

func TestHybrid(t *testing.T) {
	tr := treeOf(t, corpus)
	rd := newReader(corpus)
	vec := &fakeVectors{near: func(ctx context.Context, c nearCall) ([][]Neighbor, error) {
		return [][]Neighbor{{
			{ID: "l#0", Page: "ref/limits", Distance: 0.1, Text: "semantic limits"},
			{ID: "k#0", Page: "guides/keys", Distance: 0.2, Text: "semantic keys"},
		}}, nil
	}}
	s := newSearcher(t, Config{Reader: rd, Vectors: vec, Embedder: &fakeEmbedder{}})
	r := mustSearch(t, s, tr, "rotate api keys?k=3")
	lex := expectLexical(t, tr, rd, "rotate api keys", 3)
	sem := []Hit{{"ref/limits.md", 0.9, "semantic limits", 0}, {"guides/keys.md", 0.8, "semantic keys", 0}}
	if want := fuse(3, lex, sem); !reflect.DeepEqual(r.Hits, want) {
		t.Errorf("hybrid %v, want %v", r.Hits, want)
	}
	if r.Note != "" || r.Query.Mode != Hybrid {
		t.Errorf("hybrid: %+v", r)
	}
	if c := vec.calls(); len(c) != 1 || c[0].n != MaxResults {
		t.Errorf("Near calls %+v", c)
	}

	// A failure of either side fails the search.
	failing := &fakeVectors{near: func(context.Context, nearCall) ([][]Neighbor, error) { return nil, errBoom }}
	s2 := newSearcher(t, Config{Reader: rd, Vectors: failing, Embedder: &fakeEmbedder{}})
	if _, err := s2.Search(t.Context(), tr, "rotate"); !errors.Is(err, errBoom) {
		t.Errorf("hybrid with a failing Chroma: %v", err)
	}
	if st := s2.Stats(); st.Failures != 1 {
		t.Errorf("Failures = %d", st.Failures)
	}
}

// The query's embedding is kept per text; results are kept per tree
// version and query.
func TestSemanticCaches(t *testing.T) {
	vec := &fakeVectors{near: func(ctx context.Context, c nearCall) ([][]Neighbor, error) {
		return [][]Neighbor{{{ID: "k#0", Page: "guides/keys", Distance: 0.2, Text: "keys"}}}, nil
	}}
	emb := &fakeEmbedder{}
	s := newSearcher(t, Config{Reader: newReader(corpus, []pg{{slug: "new", text: "new"}}), Vectors: vec, Embedder: emb})
	tr := treeOf(t, corpus)

	a := mustSearch(t, s, tr, "rotate keys?mode=semantic")
	mustSearch(t, s, tr, "rotate keys") // hybrid: embeds the same text
	if n := emb.count("rotate keys"); n != 1 {
		t.Errorf("Embed called %d times for one text", n)
	}
	if n := len(vec.calls()); n != 2 {
		t.Errorf("%d Near calls for two modes, want 2", n)
	}
	b := mustSearch(t, s, tr, "rotate keys?mode=semantic")
	if n := len(vec.calls()); n != 2 {
		t.Errorf("an identical search queried Chroma again (%d calls)", n)
	}
	if a != b {
		t.Error("an identical search did not answer the kept results")
	}
	if st := s.Stats(); st.Searches != 2 || st.ChromaQueries != 2 {
		t.Errorf("Stats = %+v", st)
	}
	// "rotate keys" with other options is another query, same embedding.
	mustSearch(t, s, tr, "rotate keys?mode=semantic&k=3")
	if n := len(vec.calls()); n != 3 || emb.count("rotate keys") != 1 {
		t.Errorf("k=3: %d Near calls, %d embeds", n, emb.count("rotate keys"))
	}

	tr2 := treeOf(t, append(slices.Clone(corpus), pg{slug: "new", text: "new"}))
	if tr2.Version == tr.Version {
		t.Fatal("same version")
	}
	s.Prepare(tr2)
	mustSearch(t, s, tr2, "rotate keys?mode=semantic")
	if n := len(vec.calls()); n != 4 {
		t.Errorf("a new tree version answered from the old one's results (%d Near calls)", n)
	}

	// A failure is not kept.
	fail := true
	vec.mu.Lock()
	vec.near = func(ctx context.Context, c nearCall) ([][]Neighbor, error) {
		if fail {
			return nil, errBoom
		}
		return nil, nil
	}
	vec.mu.Unlock()
	if _, err := s.Search(t.Context(), tr2, "other?mode=semantic"); !errors.Is(err, errBoom) {
		t.Fatalf("failing Near: %v", err)
	}
	fail = false
	if _, err := s.Search(t.Context(), tr2, "other?mode=semantic"); err != nil {
		t.Errorf("the failure was kept: %v", err)
	}
}

// similarPages: a page of 20 chunks, two others, a hidden one.
var similarPages = []pg{
	{slug: "long", path: "long.md", text: strings.Repeat("x", 20), chunks: slices.Repeat([]int64{1}, 20)},
	{slug: "other", path: "other.md", text: "other"},
	{slug: "third", path: "third.md", text: "third"},
	{slug: "hidden", path: "hidden.md", text: "h", groups: []string{"admin"}},
}

// mappedPages add a page mapped onto another tool's records (r1 twice).
var mappedPages = append(slices.Clone(similarPages),
	pg{slug: "mapped", path: "mapped.md", text: "mappedtext", records: []tree.Part{{ID: "r1", From: 0, To: 6}, {ID: "r2", From: 0, To: 2}, {ID: "r1", From: 6, To: 8}}})

func TestSimilarTo(t *testing.T) {
	tr := treeOf(t, similarPages)
	self := tr.Lookup("long.md")
	for _, tc := range []struct {
		k, vecs, wantN int
	}{
		{10, 20, 300 / 16}, // 16 vectors at most
		{10, 16, 300 / 16},
		{10, 1, 300},
		{10, 3, 100},
		{100, 2, 150},
		{100, 3, 100},
		{100, 16, 18},
		{0, 7, 300 / 7}, // the default k
	} {
		vecs := make([][]float32, tc.vecs)
		for i := range vecs {
			vecs[i] = []float32{float32(i)}
		}
		vec := &fakeVectors{vecs: vecs, near: func(ctx context.Context, c nearCall) ([][]Neighbor, error) {
			out := make([][]Neighbor, len(c.vectors))
			out[0] = []Neighbor{
				{ID: "long#0", Page: "long", Distance: 0, Text: "itself"},
				{ID: "o#0", Page: "other", Distance: 0.4, Text: "o"},
				{ID: "h#0", Page: "hidden", Distance: 0.1, Text: "hidden"},
			}
			out[len(out)-1] = append(out[len(out)-1], Neighbor{ID: "t#0", Page: "third", Distance: 0.3, Text: "t"}, Neighbor{ID: "long#3", Page: "long", Distance: 0.01})
			return out, nil
		}}
		s := newSearcher(t, Config{Reader: newReader(similarPages), Vectors: vec, Similar: true})
		r, err := s.SimilarTo(t.Context(), tr, "long.md", tc.k)
		if err != nil {
			t.Fatalf("SimilarTo k=%d: %v", tc.k, err)
		}
		wantK := tc.k
		if wantK == 0 {
			wantK = DefaultK
		}
		if r.Query != (Query{Text: "long.md", K: wantK, Mode: Similar}) {
			t.Errorf("Query %+v", r.Query)
		}
		if want := []Hit{{"third.md", 0.7, "t", 0}, {"other.md", 0.6, "o", 0}}; !hitsNear(r.Hits, want) {
			t.Errorf("similar hits %v, want %v (the page itself and hidden pages left out)", r.Hits, want)
		}
		if want := (PageRef{Slug: "long", SHA256: self.File.SHA256, Chunks: 16, Limit: 16}); !reflect.DeepEqual(vec.pageRef, []PageRef{want}) {
			t.Errorf("PageVectors got %+v, want %+v", vec.pageRef, want)
		}
		c := vec.calls()
		if len(c) != 1 {
			t.Fatalf("%d Near calls", len(c))
		}
		n := len(c[0].vectors)
		if n != min(tc.vecs, maxSimilarVectors) || c[0].n*n > MaxResults || c[0].n != tc.wantN {
			t.Errorf("k=%d, %d vectors: Near got %d vectors, n=%d; want %d, n=%d (n*vectors <= %d)",
				tc.k, tc.vecs, n, c[0].n, min(tc.vecs, maxSimilarVectors), tc.wantN, MaxResults)
		}
		if !slices.Equal(c[0].notIn, []string{"hidden"}) {
			t.Errorf("Near filter notIn %v", c[0].notIn)
		}
	}
}

func TestSimilarToMappedPage(t *testing.T) {
	tr := treeOf(t, mappedPages)
	vec := &fakeVectors{vecs: [][]float32{{1}}}
	if len(tr.Hidden) > 0 { // records of other tools carry no page metadata: no filter can hide a page
		s := newSearcher(t, Config{Reader: newReader(mappedPages), Vectors: vec, Similar: true})
		if _, err := s.SimilarTo(t.Context(), tr, "mapped.md", 3); !errors.Is(err, ErrUnsupported) {
			t.Fatalf("mapped pages with some hidden: %v, want ErrUnsupported", err)
		}
	}
	tr.Hidden = nil // a view that sees every page
	s := newSearcher(t, Config{Reader: newReader(mappedPages), Vectors: vec, Similar: true})
	if _, err := s.SimilarTo(t.Context(), tr, "mapped.md", 3); err != nil {
		t.Fatal(err)
	}
	if want := []PageRef{{Slug: "mapped", SHA256: digestOf("mappedtext"), Records: []string{"r1", "r2"}, Limit: 16}}; !reflect.DeepEqual(vec.pageRef, want) {
		t.Errorf("PageVectors got %+v, want %+v", vec.pageRef, want)
	}
}

func TestSimilarToErrors(t *testing.T) {
	tr := treeOf(t, similarPages)
	rd := newReader(similarPages)
	for _, tc := range []struct {
		name string
		cfg  Config
		path string
		want error
	}{
		{"not Similar", Config{Reader: rd, Vectors: &fakeVectors{vecs: [][]float32{{1}}}}, "other.md", ErrUnsupported},
		{"no Vectors", Config{Reader: rd, Similar: true}, "other.md", ErrUnsupported},
		{"no stored vectors", Config{Reader: rd, Vectors: &fakeVectors{}, Similar: true}, "other.md", ErrUnsupported},
		{"a directory", Config{Reader: rd, Vectors: &fakeVectors{vecs: [][]float32{{1}}}, Similar: true}, "", ErrInvalid},
		{"no such page", Config{Reader: rd, Vectors: &fakeVectors{vecs: [][]float32{{1}}}, Similar: true}, "nope.md", ErrInvalid},
		{"a hidden page", Config{Reader: rd, Vectors: &fakeVectors{vecs: [][]float32{{1}}}, Similar: true}, "hidden.md", ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSearcher(t, tc.cfg)
			_, err := s.SimilarTo(t.Context(), tr, tc.path, 5)
			if !errors.Is(err, tc.want) {
				t.Errorf("SimilarTo(%q): %v, want %v", tc.path, err, tc.want)
			}
			if st := s.Stats(); st.Failures != 0 {
				t.Errorf("counted as a failure: %+v", st)
			}
		})
	}
}

func TestREADME(t *testing.T) {
	full := newSearcher(t, Config{Vectors: &fakeVectors{}, Embedder: &fakeEmbedder{}, Similar: true})
	if r := string(full.README(t.Context())); !strings.Contains(r, "fake-embedder") || strings.Contains(r, "not available") {
		t.Errorf("README with everything:\n%s", r)
	}
	bare := newSearcher(t, Config{NoSemantic: "no model for this collection"})
	r := string(bare.README(t.Context()))
	if !strings.Contains(r, "no model for this collection") || !strings.Contains(r, ".similar/: not available") || !strings.Contains(r, "hybrid: lexical only") {
		t.Errorf("README without semantic:\n%s", r)
	}
	if full.SemanticAvailable() == bare.SemanticAvailable() {
		t.Error("SemanticAvailable")
	}
	if strings.Contains(r, tree.ReportPath) || !strings.Contains(r, "snippets=0") {
		t.Errorf("README of a mount without inexact files names the report, or not snippets=0:\n%s", r)
	}
	// a view that shows files not reassembled exactly: .README names the
	// unlisted report (issue 33)
	d, err := tree.Decode([]byte(`{"a": {"isPublic": true, "path": "a.md", "reassembly": "gaps"}, "b": {"isPublic": true, "path": "b.md"}}`), tree.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	bare.Prepare(tree.BuildVisible(d, nil, tree.DefaultLimits))
	if r := string(bare.README(t.Context())); !strings.Contains(r, tree.ReportPath+", unlisted like .search/") || !strings.Contains(r, "It names 1 of this view's files") {
		t.Errorf("README of a mount with an inexact file:\n%s", r)
	}
}

// What a backend fails with is the search's error, counted and not kept.
func TestBackendFailures(t *testing.T) {
	tr := treeOf(t, corpus)
	simTree := treeOf(t, similarPages)
	unsizedPages := []pg{{slug: "u", text: "keys", unknownSize: true}}
	unsized := treeOf(t, unsizedPages)
	sizeless, short := newReader(unsizedPages), newReader(corpus)
	sizeless.noSize, short.short = true, true
	for _, tc := range []struct {
		name string
		cfg  Config
		run  func(s *Searcher) error
		want string
	}{
		{"the embedder", Config{Reader: newReader(corpus), Vectors: &fakeVectors{}, Embedder: &fakeEmbedder{err: errBoom}},
			func(s *Searcher) error { _, err := s.Search(t.Context(), tr, "keys?mode=semantic"); return err }, "boom"},
		{"PageVectors", Config{Reader: newReader(similarPages), Vectors: &fakeVectors{pvErr: errBoom}, Similar: true},
			func(s *Searcher) error { _, err := s.SimilarTo(t.Context(), simTree, "other.md", 3); return err }, "boom"},
		{"Near of .similar/", Config{Reader: newReader(similarPages), Similar: true, Vectors: &fakeVectors{vecs: [][]float32{{1}},
			near: func(context.Context, nearCall) ([][]Neighbor, error) { return nil, errBoom }}},
			func(s *Searcher) error { _, err := s.SimilarTo(t.Context(), simTree, "other.md", 3); return err }, "boom"},
		{"a size the reader cannot tell", Config{Reader: sizeless},
			func(s *Searcher) error { _, err := s.Search(t.Context(), unsized, "keys?mode=lexical"); return err }, "size unknown"},
		{"a short read", Config{Reader: short},
			func(s *Searcher) error { _, err := s.Search(t.Context(), tr, "keys?mode=lexical"); return err }, "short read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSearcher(t, tc.cfg)
			err := tc.run(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if st := s.Stats(); st.Failures != 1 {
				t.Errorf("Failures = %d, want 1", st.Failures)
			}
		})
	}
}

// A name that is not a query fails before anything runs, and is not a
// failure of the search.
func TestSearchInvalidName(t *testing.T) {
	s := newSearcher(t, Config{Reader: newReader(corpus)})
	for _, name := range []string{"", "q?k=0", "q?mode=fuzzy"} {
		if _, err := s.Search(t.Context(), treeOf(t, corpus), name); !errors.Is(err, ErrInvalid) {
			t.Errorf("Search(%q): %v, want ErrInvalid", name, err)
		}
	}
	if st := s.Stats(); st.Searches != 0 || st.Failures != 0 || st.Index.Ready {
		t.Errorf("Stats after invalid names = %+v", st)
	}
}
