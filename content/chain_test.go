package content

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/chromafs/chromafs/cache"
)

// mapTier is a host or remote tier in memory that counts what it is asked
// and can be made to answer garbage, for tests of the chain's logic.
type mapTier struct {
	mu      sync.Mutex // protects the following
	entries map[cache.PageKey][]byte
	gets    int
	puts    int
	garbage bool // answer every Get with bytes of the wrong length
}

func newMapTier() *mapTier { return &mapTier{entries: map[cache.PageKey][]byte{}} }

func (m *mapTier) Get(_ context.Context, k cache.PageKey, size int64) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gets++
	if m.garbage {
		return make([]byte, size+1), true
	}
	v, ok := m.entries[k]
	return v, ok
}

func (m *mapTier) Put(k cache.PageKey, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.puts++
	m.entries[k] = append([]byte(nil), data...)
}

func (m *mapTier) counts() (gets, puts, entries int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gets, m.puts, len(m.entries)
}

// TestChainFillsNearerTiersOnTheWayUp: what the remote tier answers is
// served and put into memory and the host tier; the source is not asked;
// the next read of it is a memory hit.
func TestChainFillsNearerTiersOnTheWayUp(t *testing.T) {
	pages := map[string]string{"a": strings.Repeat("x", 3000)}
	tr, src := fixture(t, 1000, pages)
	remote := newMapTier()
	first := newFS(t, tr, src, Config{Prefetch: PrefetchNone, Remote: remote})
	readAll(t, first, pages)
	first.Close()
	if _, puts, _ := remote.counts(); puts != 1 {
		t.Fatalf("the first engine wrote %d remote entries, want 1", puts)
	}
	calls := src.calls.Load()
	asked, _, _ := remote.counts()
	host := openHost(t, t.TempDir())
	e := newFS(t, tr, src, Config{Prefetch: PrefetchNone, Remote: remote, Host: host})
	for _, want := range []string{"remote", "memory"} {
		n, from, err := e.ReadAtFrom(context.Background(), tr.Lookup("/a.md").File, make([]byte, 4000), 0)
		if err != nil || n != 3000 || from != want {
			t.Fatalf("read: %d bytes from %s, %v; want 3000 bytes from %s", n, from, err, want)
		}
	}
	if n := src.calls.Load() - calls; n != 0 {
		t.Errorf("the source was asked %d times, want 0 (the remote tier has the page)", n)
	}
	if gets, _, _ := remote.counts(); gets-asked != 1 {
		t.Errorf("the remote tier was asked %d times, want 1 (then memory has it)", gets-asked)
	}
	if st := host.Stats(); st.Writes != 1 {
		t.Errorf("the host tier got %d writes, want 1 (filled on the way up)", st.Writes)
	}
}

// TestChainSkipsATierThatAnswersGarbage: a tier whose answer does not
// verify is a miss: the read returns the source's bytes, never the tier's
// and never an error.
func TestChainSkipsATierThatAnswersGarbage(t *testing.T) {
	pages := map[string]string{"a": "hello, world", "big": strings.Repeat("0123456789", 500)}
	tr, src := fixture(t, 100, pages)
	remote := newMapTier()
	remote.garbage = true
	f := newFS(t, tr, src, Config{Prefetch: PrefetchNone, Remote: remote, WindowBytes: 1000})
	readAll(t, f, pages)
	if gets, _, _ := remote.counts(); gets == 0 {
		t.Error("the remote tier was never asked: the test proves nothing")
	}
	if src.calls.Load() == 0 {
		t.Error("the source was never asked: the garbage was served")
	}
}

// TestChainRechecksMemoryInsideTheFlight: a load whose chunks reached
// memory after the reader's miss (another load finished first) is
// answered from memory, without asking the source.
func TestChainRechecksMemoryInsideTheFlight(t *testing.T) {
	tr, src := fixture(t, 4, map[string]string{"p": "abcdefgh"})
	f := newFS(t, tr, src, Config{Prefetch: PrefetchNone})
	fl := tr.Lookup("/p.md").File
	f.tiers[0].put(f.query(fl, wholeSpan(fl)), [][]byte{[]byte("abcd"), []byte("efgh")})
	chunks, err := f.walk(context.Background(), f.query(fl, span{0, 2}))
	if err != nil || len(chunks) != 2 || string(chunks[1]) != "efgh" {
		t.Fatalf("walk: %q, %v", chunks, err)
	}
	if n := src.calls.Load(); n != 0 {
		t.Errorf("the source was asked %d times, want 0", n)
	}
}

// TestVerify: an answer is cut at the chunk lengths the tree records and
// checked against them, whatever the tier's shape.
func TestVerify(t *testing.T) {
	tr, _ := fixture(t, 4, map[string]string{"p": "abcdefghij", "foreign/q": "abc"})
	e := newFS(t, tr, &fakeSource{}, Config{})
	fl := tr.Lookup("/p.md").File // chunks 4, 4, 2
	foreign := tr.Lookup("/foreign/q.md").File
	b := func(ss ...string) [][]byte {
		out := make([][]byte, len(ss))
		for i, s := range ss {
			out[i] = []byte(s)
		}
		return out
	}
	tests := []struct {
		name string
		q    *query
		got  [][]byte
		want []string // nil: ErrBadPage
	}{
		{"chunks as recorded", e.query(fl, span{0, 3}), b("abcd", "efgh", "ij"), []string{"abcd", "efgh", "ij"}},
		{"joined bytes are cut", e.query(fl, span{0, 3}), b("abcdefghij"), []string{"abcd", "efgh", "ij"}},
		{"a window of joined bytes", e.query(fl, span{1, 3}), b("efghij"), []string{"efgh", "ij"}},
		{"one byte short", e.query(fl, span{0, 3}), b("abcdefghi"), nil},
		{"one byte over", e.query(fl, span{1, 3}), b("efghijk"), nil},
		{"a chunk of the wrong length", e.query(fl, span{0, 3}), b("abcd", "efg", "hij"), nil},
		{"a chunk missing", e.query(fl, span{0, 3}), b("abcd", "efgh"), nil},
		{"no chunk lengths: joined", e.query(foreign, wholeSpan(foreign)), b("ab", "c"), []string{"abc"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := verify(tt.q, tt.got)
			if tt.want == nil {
				if !errors.Is(err, ErrBadPage) {
					t.Errorf("verify = %q, %v; want ErrBadPage", got, err)
				}
				return
			}
			if err != nil || len(got) != len(tt.want) {
				t.Fatalf("verify = %q, %v; want %q", got, err, tt.want)
			}
			for i := range got {
				if string(got[i]) != tt.want[i] {
					t.Errorf("chunk %d = %q, want %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

// TestWarmReadAllocatesNothing: a read served from memory (the hot path,
// no access log) makes no allocation, whole pages and chunked ones alike.
func TestWarmReadAllocatesNothing(t *testing.T) {
	pages := map[string]string{"p": strings.Repeat("abcdefgh", 512), "foreign/q": "no chunk lengths"}
	tr, src := fixture(t, 1000, pages)
	f := newFS(t, tr, src, Config{Prefetch: PrefetchNone})
	readAll(t, f, pages)
	buf := make([]byte, 4096)
	ctx := context.Background()
	for _, path := range []string{"/p.md", "/foreign/q.md"} {
		fl := tr.Lookup(path).File
		allocs := testing.AllocsPerRun(100, func() {
			if _, err := f.ReadAt(ctx, fl, buf, 0); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("a warm read of %s made %.1f allocations, want 0", path, allocs)
		}
	}
}
