package search

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/lexical"
	"github.com/chromafs/chromafs/tree"
)

// pg is one page of a test corpus, written into a tree document.
type pg struct {
	slug, path, text string
	groups           []string // nil: public
	chunks           []int64  // byte lengths of its chunks; nil: unknown
	noSHA            bool     // no sha256 (its version is the tree's)
	uri              string   // a lazy page
	size             int64    // an explicit size (0: the text's, or unknown)
	unknownSize      bool     // no size in the entry
	records          []tree.Part
}

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// docOf writes pages as a tree document and decodes it.
func docOf(t testing.TB, pages []pg) *tree.Doc {
	t.Helper()
	m := map[string]map[string]any{}
	for _, p := range pages {
		e := map[string]any{"isPublic": p.groups == nil, "groups": p.groups}
		if p.groups == nil {
			e["groups"] = []string{}
		}
		if p.path != "" {
			e["path"] = p.path
		}
		switch {
		case p.size != 0:
			e["size"] = p.size
		case !p.unknownSize && p.records == nil:
			e["size"] = len(p.text)
		}
		if p.chunks != nil {
			e["chunks"] = p.chunks
		}
		if !p.noSHA {
			e["sha256"] = digestOf(p.text)
		}
		if p.uri != "" {
			e["uri"] = p.uri
		}
		if p.records != nil {
			e["records"] = p.records
			var ds []string
			for range p.records {
				ds = append(ds, digestOf("part"))
			}
			e["chunk_sha256"] = ds
		}
		m[p.slug] = e
	}
	raw, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	d, err := tree.Decode(raw, tree.DefaultLimits)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	return d
}

// treeOf builds the view of pages that groups see, checking that every
// visible page was placed.
func treeOf(t testing.TB, pages []pg, groups ...string) *tree.Tree {
	t.Helper()
	d := docOf(t, pages)
	tr := tree.BuildVisible(d, groups, tree.DefaultLimits)
	if len(d.Warnings.List) > 0 {
		t.Fatalf("tree warnings: %v", d.Warnings.List)
	}
	return tr
}

// fakeReader serves pages' bytes by slug, counting what it is asked.
type fakeReader struct {
	mu         sync.Mutex
	data       map[string][]byte
	fail       map[string]error // by slug: EnsureSize fails
	ensures    map[string]int   // EnsureSize calls by slug
	reads      map[string]int   // ReadAt calls by slug
	bytes      int64            // bytes ReadAt returned
	noSize     bool             // EnsureSize leaves a size unknown
	short      bool             // ReadAt returns 0 bytes and no error
	prefetched int              // Prefetch calls

	// gate, when set, holds every ReadAt until it is closed or the
	// read's ctx ends; blocked is sent to (without blocking) each time.
	gate    chan struct{}
	blocked chan struct{}
}

func newReader(pages ...[]pg) *fakeReader {
	r := &fakeReader{data: map[string][]byte{}, fail: map[string]error{}, ensures: map[string]int{}, reads: map[string]int{}}
	for _, ps := range pages {
		for _, p := range ps {
			r.data[p.slug] = []byte(p.text)
		}
	}
	return r
}

func (r *fakeReader) EnsureSize(ctx context.Context, n *tree.Node) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ensures[n.File.Slug]++
	if err := r.fail[n.File.Slug]; err != nil {
		return err
	}
	d, ok := r.data[n.File.Slug]
	if !ok {
		return fmt.Errorf("no page %q", n.File.Slug)
	}
	if _, known := n.File.Size(); !known && !r.noSize {
		n.File.SetSize(int64(len(d)))
	}
	return nil
}

func (r *fakeReader) ReadAt(ctx context.Context, fl *tree.File, dest []byte, off int64) (int, error) {
	r.mu.Lock()
	gate := r.gate
	r.mu.Unlock()
	if gate != nil {
		select {
		case r.blocked <- struct{}{}:
		default:
		}
		select {
		case <-gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reads[fl.Slug]++
	if r.short {
		return 0, nil
	}
	d, ok := r.data[fl.Slug]
	if !ok {
		return 0, fmt.Errorf("no page %q", fl.Slug)
	}
	if off >= int64(len(d)) {
		return 0, io.EOF
	}
	n := copy(dest, d[off:])
	r.bytes += int64(n)
	return n, nil
}

// hold makes every read wait for the returned release.
func (r *fakeReader) hold() (release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gate, r.blocked = make(chan struct{}), make(chan struct{}, 1)
	var once sync.Once
	gate := r.gate
	return func() { once.Do(func() { close(gate) }) }
}

func (r *fakeReader) counts() (ensures map[string]int, reads map[string]int, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps(r.ensures), maps(r.reads), r.bytes
}

func (r *fakeReader) setFail(slug string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil {
		delete(r.fail, slug)
	} else {
		r.fail[slug] = err
	}
}

func maps(m map[string]int) map[string]int {
	out := make(map[string]int, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sum(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// memHost is the host tier in memory; it returns an entry only at the
// size asked for, as hostcache does.
type memHost struct {
	mu      sync.Mutex
	entries map[string][]byte // by PageKey.Name
	refs    map[string]string
	gets    []string // the PageKey names asked for
	puts    []string
}

func newHost() *memHost { return &memHost{entries: map[string][]byte{}, refs: map[string]string{}} }

func (h *memHost) Get(k cache.PageKey, size int64) ([]byte, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gets = append(h.gets, k.Name())
	d, ok := h.entries[k.Name()]
	if !ok || int64(len(d)) != size {
		return nil, false
	}
	return slices.Clone(d), true
}

func (h *memHost) Put(k cache.PageKey, data []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.puts = append(h.puts, k.Name())
	h.entries[k.Name()] = slices.Clone(data)
}

func (h *memHost) Ref(name string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, ok := h.refs[name]
	return v, ok
}

func (h *memHost) SetRef(name, value string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.refs[name] = value
}

// only returns the one entry h holds.
func (h *memHost) only(t *testing.T) (name string, data []byte) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.entries) != 1 {
		t.Fatalf("host tier holds %d entries, want 1", len(h.entries))
	}
	for k, v := range h.entries {
		return k, v
	}
	panic("unreachable")
}

// nearCall is one Vectors.Near call.
type nearCall struct {
	vectors   [][]float32
	n         int
	in, notIn []string
}

// fakeVectors answers Near with near (or nothing) and PageVectors with
// vecs, recording the calls.
type fakeVectors struct {
	mu      sync.Mutex
	near    func(ctx context.Context, c nearCall) ([][]Neighbor, error)
	vecs    [][]float32
	pvErr   error // PageVectors fails
	nears   []nearCall
	pageRef []PageRef
}

func (v *fakeVectors) Near(ctx context.Context, vectors [][]float32, n int, in, notIn []string) ([][]Neighbor, error) {
	c := nearCall{vectors: vectors, n: n, in: slices.Clone(in), notIn: slices.Clone(notIn)}
	v.mu.Lock()
	v.nears = append(v.nears, c)
	near := v.near
	v.mu.Unlock()
	if near == nil {
		return make([][]Neighbor, len(vectors)), nil
	}
	return near(ctx, c)
}

func (v *fakeVectors) PageVectors(ctx context.Context, p PageRef) ([][]float32, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.pageRef = append(v.pageRef, p)
	return v.vecs, v.pvErr
}

func (v *fakeVectors) calls() []nearCall {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.nears)
}

// fakeEmbedder embeds a text as one number per byte, counting calls.
type fakeEmbedder struct {
	mu    sync.Mutex
	calls map[string]int
	err   error // Embed fails
}

func (e *fakeEmbedder) Embed(ctx context.Context, text string) ([]float32, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.calls == nil {
		e.calls = map[string]int{}
	}
	e.calls[text]++
	if e.err != nil {
		return nil, e.err
	}
	v := make([]float32, 0, len(text))
	for _, c := range []byte(text) {
		v = append(v, float32(c))
	}
	return v, nil
}

func (e *fakeEmbedder) Name() string { return "fake-embedder" }

func (e *fakeEmbedder) count(text string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.calls[text]
}

// newSearcher returns a Searcher closed at the end of the test.
func newSearcher(t *testing.T, cfg Config) *Searcher {
	t.Helper()
	if cfg.Identity == "" {
		cfg.Identity = "test-collection"
	}
	if cfg.FirstBuild == 0 {
		cfg.FirstBuild = -1 // the tests count reads: no build they did not ask for
	}
	s := New(cfg)
	t.Cleanup(s.Close)
	return s
}

// waitFor polls cond until it holds, failing the test after a while.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// expectLexical is what lexical.Index answers for the visible pages of a
// view, built here the way the Searcher should: a page's passages are its
// chunks when their lengths add up, else the whole (small) page; lazy
// pages and pages that are not UTF-8 are left out.
func expectLexical(t *testing.T, tr *tree.Tree, rd *fakeReader, query string, k int) []Hit {
	t.Helper()
	b := lexical.NewBuilder()
	texts := map[string][]byte{}
	tree.Walk(tr.Root, func(n *tree.Node) bool {
		if n.File == nil {
			return true
		}
		id := b.AddPage(n.Path())
		data := rd.data[n.File.Slug]
		texts[n.Path()] = data
		if size, ok := n.File.Size(); n.File.URI() != "" || !isText(data) || ok && size > maxIndexedPage {
			return true
		}
		if len(data) > passageBytes {
			t.Fatalf("%s: expectLexical handles pages of at most %d bytes", n.Path(), passageBytes)
		}
		var total int64
		for _, c := range n.File.Chunks {
			total += c
		}
		if len(n.File.Chunks) == 0 || total != int64(len(data)) {
			b.Add(id, 0, string(data))
			return true
		}
		off := int64(0)
		for _, c := range n.File.Chunks {
			if c > 0 {
				b.Add(id, off, string(data[off:off+c]))
			}
			off += c
		}
		return true
	})
	var out []Hit
	for _, h := range b.Build().Search(query, k) {
		d := texts[h.Name]
		out = append(out, Hit{Path: h.Name, Score: h.Score, Text: string(d[h.Passage.Off : h.Passage.Off+h.Passage.Len]),
			Line: 1 + strings.Count(string(d[:h.Passage.Off]), "\n")})
	}
	return out
}

func isText(b []byte) bool { return utf8.Valid(b) }

// mustSearch runs a search that must succeed.
func mustSearch(t *testing.T, s *Searcher, tr *tree.Tree, name string) *Results {
	t.Helper()
	r, err := s.Search(t.Context(), tr, name)
	if err != nil {
		t.Fatalf("Search(%q): %v", name, err)
	}
	return r
}

var errBoom = errors.New("boom")

// Prefetch counts the reads it is told of.
func (r *fakeReader) Prefetch(dir *tree.Node, reading *tree.File) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.prefetched++
}
