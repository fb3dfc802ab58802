package content

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/hostcache"
	"github.com/chromafs/chromafs/tree"
)

func openHost(t *testing.T, dir string) *hostcache.Cache {
	t.Helper()
	c, err := hostcache.Open(dir, 64<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// readAll reads every file of the fixture through f and compares it with
// the content it was built from.
func readAll(t *testing.T, f *Engine, pages map[string]string) {
	t.Helper()
	for slug, want := range pages {
		got, err := read(t, f, f.plan.Load().tree, "/"+slug+".md", 0, len(want)+1)
		if err != nil || string(got) != want {
			t.Fatalf("%s: %d bytes, err %v; want %d bytes", slug, len(got), err, len(want))
		}
	}
}

var hostPages = map[string]string{
	"a":   "alpha\n",
	"d/b": strings.Repeat("beta ", 300),
	"big": strings.Repeat("0123456789abcdef", 2048), // 32 KiB: read in windows
}

// TestHostTierServesTheNextMount: a second FS on the same host tier (the
// next conversation's mount) reads every page, whole or in windows, without
// a single request.
func TestHostTierServesTheNextMount(t *testing.T) {
	dir := t.TempDir()
	tr, src := fixture(t, 1000, hostPages)
	first := newFS(t, tr, src, Config{WindowBytes: 4000, Prefetch: PrefetchNone, Host: openHost(t, dir)})
	readAll(t, first, hostPages)
	first.Close() // the mount exits: what it fetched is written
	before := src.calls.Load()
	tr2, _ := fixture(t, 1000, hostPages)
	readAll(t, newFS(t, tr2, src, Config{WindowBytes: 4000, Prefetch: PrefetchNone, Host: openHost(t, dir)}), hostPages)
	if n := src.calls.Load() - before; n != 0 {
		t.Errorf("the next mount made %d requests, want 0", n)
	}
}

// TestHostTierDamageFallsThrough: damaged entries are misses; the read goes
// to the source and returns the right bytes.
func TestHostTierDamageFallsThrough(t *testing.T) {
	dir := t.TempDir()
	tr, src := fixture(t, 1000, hostPages)
	first := newFS(t, tr, src, Config{WindowBytes: 4000, Prefetch: PrefetchNone, Host: openHost(t, dir)})
	readAll(t, first, hostPages)
	first.Close() // the mount exits: what it fetched is written
	n := 0
	filepath.Walk(filepath.Join(dir, hostcache.FormatDir), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && len(filepath.Base(filepath.Dir(p))) == 2 {
			raw, _ := os.ReadFile(p)
			raw[len(raw)-1] ^= 0x20
			os.WriteFile(p, raw, 0o600)
			n++
		}
		return nil
	})
	if n < 4 {
		t.Fatalf("%d entries on disk, want whole pages and windows", n)
	}
	before := src.calls.Load()
	host := openHost(t, dir)
	tr2, _ := fixture(t, 1000, hostPages)
	f := newFS(t, tr2, src, Config{WindowBytes: 4000, Prefetch: PrefetchNone, Host: host})
	readAll(t, f, hostPages)
	f.Close() // waits for readahead, which reads entries too
	if src.calls.Load() == before || host.Stats().Corrupt != int64(n) {
		t.Errorf("damaged entries: %d requests, %d detected of %d", src.calls.Load()-before, host.Stats().Corrupt, n)
	}
}

// TestAutoPrefetch: auto warms a small collection whole after Start, and
// leaves a large one (over a quarter of the memory cache, which has room
// for a warm-up to begin) to dir prefetch.
func TestAutoPrefetch(t *testing.T) {
	pages := map[string]string{}
	for i := range 30 {
		pages[fmt.Sprintf("d%d/p%02d", i%3, i)] = strings.Repeat("z", 2000+i)
	}
	for _, tc := range []struct {
		cache int64
		warm  bool
	}{{4 << 20, true}, {128 << 10, false}} {
		tr, src := fixture(t, 1000, pages)
		f := newFS(t, tr, src, Config{CacheBytes: tc.cache, WindowBytes: 4000})
		f.Start()
		// Start decides at once; what it starts (nothing, or the warm-up) is
		// all the engine's background work here: wait for it to end
		f.wg.Wait()
		f.flights.Wait()
		want := int64(0)
		if tc.warm {
			want = 30
		}
		if got := f.Stats().PrefetchPages; got != want {
			t.Errorf("cache %d: %d pages prefetched after Start, want %d", tc.cache, got, want)
		}
	}
}

// TestOnLoadedReportsEveryPrefetchedPage: prefetch all reports each page
// once it is whole in memory — small ones from batches, ones larger than a
// window after their last window — with exactly its bytes, and Resident
// then returns the same bytes without a request.
func TestOnLoadedReportsEveryPrefetchedPage(t *testing.T) {
	pages := map[string]string{"big/huge": strings.Repeat("0123456789", 700)}
	for i := range 12 {
		pages[fmt.Sprintf("d%d/p%02d", i%3, i)] = strings.Repeat(string(rune('a'+i)), 900+i)
	}
	tr, src := fixture(t, 500, pages)
	f := newFS(t, tr, src, Config{CacheBytes: 4 << 20, WindowBytes: 2000, Prefetch: PrefetchAll})
	var mu sync.Mutex
	got := map[string]string{}
	f.OnLoaded(func(fl *tree.File) {
		chunks, ok := f.Resident(fl)
		mu.Lock()
		defer mu.Unlock()
		if _, dup := got[fl.Slug]; dup || !ok {
			t.Errorf("%s reported twice, or not resident when reported (%v)", fl.Slug, ok)
		}
		got[fl.Slug] = string(bytes.Join(chunks, nil))
	})
	f.Start()
	f.wg.Wait() // the warm-up: the engine's only background work here
	f.Close()
	calls := src.calls.Load()
	mu.Lock()
	defer mu.Unlock()
	for slug, want := range pages {
		if got[slug] != want {
			t.Errorf("%s: reported %d bytes, want its %d", slug, len(got[slug]), len(want))
		}
		chunks, ok := f.Resident(tr.Lookup(slug + ".md").File)
		if !ok || string(bytes.Join(chunks, nil)) != want {
			t.Errorf("%s: Resident = %v, want its bytes", slug, ok)
		}
	}
	if src.calls.Load() != calls {
		t.Errorf("Resident made requests")
	}
	if _, ok := f.Resident(&tree.File{Slug: "nope", Chunks: []int64{3}}); ok {
		t.Errorf("Resident of a page never loaded = true")
	}
}

// The writer's queue takes pages up to its bounds, counts what it handed
// out until written, and signals the writer once per batch.
func TestWriteQueueBounds(t *testing.T) {
	q := &writeQueue{ready: make(chan struct{}, 1)}
	page := tierWrite{chunks: [][]byte{make([]byte, 10)}}
	for i := range maxQueuedWrites {
		if !q.push(page, 10) {
			t.Fatalf("push %d refused below the bounds", i)
		}
	}
	if q.push(page, 10) {
		t.Errorf("push %d accepted past maxQueuedWrites", maxQueuedWrites+1)
	}
	if len(q.ready) != 1 {
		t.Errorf("%d signals queued, want one", len(q.ready))
	}
	ws := q.take()
	if len(ws) != maxQueuedWrites || len(q.take()) != 0 {
		t.Fatalf("took %d, want all %d, then none", len(ws), maxQueuedWrites)
	}
	// taken, not written: their bytes still count
	if q.push(tierWrite{}, maxQueuedBytes) {
		t.Error("a push past maxQueuedBytes (counting the pages taken, not written) accepted")
	}
	q.written(int64(len(ws)) * 10)
	if !q.push(tierWrite{}, maxQueuedBytes) {
		t.Error("a push of maxQueuedBytes into an empty queue refused")
	}
}

// TestAutoWarmsFromTheHost: with prefetch auto, a mount's engine (a
// memory cache of its own) whose host tier holds the pages of a
// collection too big to be small warms it whole from disk, with no
// request; not when the host tier lacks them, nor in an engine sharing a
// daemon's cache.
func TestAutoWarmsFromTheHost(t *testing.T) {
	pages := map[string]string{}
	var total int64
	costs := cache.New(1 << 30)
	for i := 0; i < 1000; i++ { // 10 groups: each within its share of the room
		body := strings.Repeat(fmt.Sprintf("page %04d ", i), 10)
		pages[fmt.Sprintf("d%02d/p%04d", i/10, i)] = body
		total += costs.Cost(int64(len(body)), 1)
	}
	cacheBytes := 3 * total // a quarter is too little to be small, a half holds them
	dir := t.TempDir()
	tr, src := fixture(t, 2000, pages)
	first := newFS(t, tr, src, Config{Prefetch: PrefetchNone, Host: openHost(t, dir)})
	readAll(t, first, pages)
	first.Close()
	before := src.calls.Load()

	cachedAll := func(e *Engine) int {
		n := 0
		tree.Walk(e.plan.Load().tree.Root, func(nd *tree.Node) bool {
			if nd.File != nil && e.cached(nd.File) {
				n++
			}
			return true
		})
		return n
	}
	warm := newFS(t, tr, src, Config{Prefetch: PrefetchAuto, CacheBytes: cacheBytes, WindowBytes: 4000, Host: openHost(t, dir)})
	if warm.small() {
		t.Fatal("the fixture is small: auto would warm it anyway")
	}
	warm.Start()
	for deadline := time.Now().Add(10 * time.Second); cachedAll(warm) < 1000 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if n := cachedAll(warm); n != 1000 {
		t.Fatalf("%d of 1,000 pages warmed from the host tier", n)
	}
	if n := src.calls.Load() - before; n != 0 {
		t.Errorf("warming from the host tier made %d requests", n)
	}

	cold := newFS(t, tr, src, Config{Prefetch: PrefetchAuto, CacheBytes: cacheBytes, WindowBytes: 4000, Host: openHost(t, t.TempDir())})
	shared := newFS(t, tr, src, Config{Prefetch: PrefetchAuto, CacheBytes: cacheBytes, WindowBytes: 4000, Cache: cache.New(cacheBytes), Host: openHost(t, dir)})
	big := newFS(t, tr, src, Config{Prefetch: PrefetchAuto, CacheBytes: total, WindowBytes: 4000, Host: openHost(t, dir)})
	if !warm.warmsFromHost() || cold.warmsFromHost() || shared.warmsFromHost() || big.warmsFromHost() {
		t.Errorf("warms from the host: %v, and with an empty host tier %v, a shared cache %v, more than half the cache %v; want only the first",
			warm.warmsFromHost(), cold.warmsFromHost(), shared.warmsFromHost(), big.warmsFromHost())
	}
}
