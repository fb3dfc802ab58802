package cache

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// bare is NewBudget counting the values' bytes alone (no entryBytes), so
// that the figures of these tests are the values'.
func bare(maxBytes int64) *Budget {
	b := NewBudget(maxBytes)
	b.entry = 0
	return b
}

func keyOf(col string, i int) Key {
	return Key{Collection: col, Version: "v", Page: fmt.Sprint("p", i)}
}

// A big cache filling the budget takes its own oldest values once the small
// ones hold no more than their share; the small ones keep theirs.
func TestBudgetFairShare(t *testing.T) {
	b := bare(1000)
	small1, small2, big := b.New(0), b.New(0), b.New(0)
	for i := 0; i < 2; i++ {
		small1.Add(keyOf("s1", i), make([]byte, 100))
		small2.Add(keyOf("s2", i), make([]byte, 100))
	}
	for i := 0; i < 50; i++ {
		big.Add(keyOf("big", i), make([]byte, 100))
	}
	for _, c := range []struct {
		name string
		c    *Cache
		col  string
	}{{"small1", small1, "s1"}, {"small2", small2, "s2"}} {
		for i := 0; i < 2; i++ {
			if !c.c.Contains(keyOf(c.col, i)) {
				t.Errorf("%s lost value %d to the big cache's growth (within its share of 333 bytes)", c.name, i)
			}
		}
	}
	st := b.Stats()
	if st.Bytes > 1000 || st.Bytes < 900 {
		t.Errorf("budget holds %d bytes, want 900-1000", st.Bytes)
	}
	if got := big.Stats(); got.Bytes != 600 || got.Evictions != 44 {
		t.Errorf("big cache: %+v, want 600 bytes after 44 evictions", got)
	}
	if !big.Contains(keyOf("big", 49)) || big.Contains(keyOf("big", 0)) {
		t.Error("the big cache did not evict its own oldest")
	}
}

// Past its share, a cache's values go before a busier one's, oldest use
// first across caches.
func TestBudgetOldestAcrossCaches(t *testing.T) {
	b := bare(600)
	idle, busy := b.New(0), b.New(0)
	for i := 0; i < 4; i++ {
		idle.Add(keyOf("idle", i), make([]byte, 100))
	}
	busy.Add(keyOf("busy", 0), make([]byte, 100))
	busy.Add(keyOf("busy", 1), make([]byte, 100))
	// the budget is full: idle holds 400 (over its share of 300)
	busy.Get(keyOf("busy", 0))
	busy.Add(keyOf("busy", 2), make([]byte, 100))
	if idle.Contains(keyOf("idle", 0)) {
		t.Error("idle's oldest value (over its share) kept")
	}
	if !busy.Contains(keyOf("busy", 0)) || !busy.Contains(keyOf("busy", 1)) {
		t.Error("busy lost a value while idle was over its share")
	}
	// now both hold 300, their share: the oldest use goes, whoever's
	idle.Get(keyOf("idle", 1))
	idle.Get(keyOf("idle", 2))
	idle.Get(keyOf("idle", 3))
	busy.Add(keyOf("busy", 3), make([]byte, 100))
	if busy.Contains(keyOf("busy", 1)) {
		t.Error("busy's least recently used value (over its share) kept")
	}
	if st := b.Stats(); st.Bytes != 600 || st.Evictions != 2 {
		t.Errorf("budget: %+v", st)
	}
}

// Pins count against the budget: values go to make room for them, and
// Close gives back both.
func TestBudgetPins(t *testing.T) {
	b := bare(1000)
	a, o := b.New(0), b.New(0)
	for i := 0; i < 5; i++ {
		a.Add(keyOf("a", i), make([]byte, 100))
		o.Add(keyOf("o", i), make([]byte, 100))
	}
	a.Pin(300) // a holds 800 now, over its share of 500: its values go
	if st := a.Stats(); st.Bytes != 200 || st.Pinned != 300 {
		t.Errorf("a after its pin: %+v", st)
	}
	if st := o.Stats(); st.Bytes != 500 {
		t.Errorf("o lost values to a's pin: %+v", st)
	}
	if r := o.Room(); r != 0 {
		t.Errorf("room of o at its share with the budget full = %d", r)
	}
	a.Close()
	if st := b.Stats(); st.Bytes != 500 || st.Pinned != 0 || st.Caches != 1 {
		t.Errorf("budget after Close: %+v", st)
	}
	a.Add(keyOf("a", 9), []byte("x"))
	if a.Contains(keyOf("a", 9)) {
		t.Error("a closed cache stored a value")
	}
	if r := o.Room(); r != 500 {
		t.Errorf("room = %d, want the budget's free 500", r)
	}
	// a cache not holding anything yet may take its share
	n := b.New(0)
	if r := n.Room(); r != 500 {
		t.Errorf("room of a new cache = %d, want 500 (free)", r)
	}
	o.Add(keyOf("o", 5), make([]byte, 500))
	if r := n.Room(); r != 500 {
		t.Errorf("room of a new cache in a full budget = %d, want its share 500", r)
	}
}

// The owner's overhead counts against the bound as pins do: values go to
// make room for it, the fair shares are what it leaves, and Room gives
// nothing it takes.
func TestBudgetOverhead(t *testing.T) {
	b := bare(1000)
	a, o := b.New(0), b.New(0)
	for i := 0; i < 5; i++ {
		a.Add(keyOf("a", i), make([]byte, 100))
		o.Add(keyOf("o", i), make([]byte, 100))
	}
	b.SetOverhead(400) // 600 left: a share of 300 each, the oldest of both go
	if st := b.Stats(); st.Bytes != 600 || st.Overhead != 400 {
		t.Errorf("budget after an overhead of 400: %+v, want 600 bytes of values", st)
	}
	if sa, so := a.Stats(), o.Stats(); sa.Bytes != 300 || so.Bytes != 300 {
		t.Errorf("a holds %d, o %d: want their shares of what the overhead leaves, 300 each", sa.Bytes, so.Bytes)
	}
	if a.Contains(keyOf("a", 0)) || !a.Contains(keyOf("a", 4)) {
		t.Error("a did not lose its oldest values")
	}
	if r := o.Room(); r != 0 {
		t.Errorf("room of o at its share with the budget full = %d", r)
	}
	a.Add(keyOf("a", 9), make([]byte, 700)) // more than the overhead leaves
	if a.Contains(keyOf("a", 9)) || !o.Contains(keyOf("o", 4)) {
		t.Error("a value larger than what the overhead leaves was stored (or evicted others)")
	}
	b.SetOverhead(2000) // more than the bound: no value stays
	if st := b.Stats(); st.Bytes != 0 {
		t.Errorf("an overhead over the bound left %d bytes of values", st.Bytes)
	}
	b.SetOverhead(-5) // measured below nothing: none
	if r := o.Room(); r != 1000 {
		t.Errorf("room with no overhead and nothing held = %d, want 1000", r)
	}
}

// A cache's own bound holds within the budget's.
func TestCacheOwnBound(t *testing.T) {
	b := bare(1000)
	c := b.New(250)
	for i := 0; i < 5; i++ {
		c.Add(keyOf("c", i), make([]byte, 100))
	}
	if st := c.Stats(); st.Bytes != 200 || st.MaxBytes != 250 {
		t.Errorf("stats: %+v", st)
	}
	c.Add(keyOf("c", 9), make([]byte, 300))
	if c.Contains(keyOf("c", 9)) {
		t.Error("value over the cache's own bound stored")
	}
	if r := c.Room(); r != 50 {
		t.Errorf("room = %d, want 50 (own bound)", r)
	}
}

// TakeEvicted tells the last use of the most recently used value evicted
// since the last call (not those a Close let go of).
func TestBudgetTakeEvicted(t *testing.T) {
	b := bare(200)
	c := b.New(0)
	if _, ok := b.TakeEvicted(); ok {
		t.Fatal("an eviction reported before any")
	}
	c.Add(keyOf("c", 0), make([]byte, 100))
	c.Add(keyOf("c", 1), make([]byte, 100))
	between := time.Now()
	time.Sleep(time.Millisecond)
	c.Get(keyOf("c", 1))
	c.Add(keyOf("c", 2), make([]byte, 100)) // evicts 0, used before between
	used, ok := b.TakeEvicted()
	if !ok || !used.Before(between) {
		t.Errorf("TakeEvicted = %v, %v; want a use before %v", used, ok, between)
	}
	if _, ok := b.TakeEvicted(); ok {
		t.Error("the same eviction reported twice")
	}
	c.Add(keyOf("c", 3), make([]byte, 100)) // evicts 1, used after between
	if used, ok := b.TakeEvicted(); !ok || !used.After(between) {
		t.Errorf("TakeEvicted = %v, %v; want a use after %v", used, ok, between)
	}
	c.Close()
	if _, ok := b.TakeEvicted(); ok {
		t.Error("Close's values reported as evicted")
	}
}

// A cache's own bound evicts within it: the budget has no pressure to
// report.
func TestOwnBoundNotBudgetPressure(t *testing.T) {
	b := bare(1000)
	c := b.New(100)
	c.Add(keyOf("c", 0), make([]byte, 100))
	c.Add(keyOf("c", 1), make([]byte, 100))
	if _, ok := b.TakeEvicted(); ok {
		t.Error("an eviction by the cache's own bound reported as the budget's")
	}
}

// An idle cache has no share: its values go first, oldest first, and the
// caches in use share the whole budget.
func TestBudgetIdleGoesFirst(t *testing.T) {
	b := bare(600)
	idle, a, c := b.New(0), b.New(0), b.New(0)
	idle.Add(keyOf("idle", 0), make([]byte, 100))
	a.Add(keyOf("a", 0), make([]byte, 100))
	idle.SetIdle(true)
	for i := range 5 {
		c.Add(keyOf("c", i), make([]byte, 100)) // c passes 600/3 but idle goes first
	}
	if idle.Contains(keyOf("idle", 0)) || !a.Contains(keyOf("a", 0)) {
		t.Error("the idle cache's value kept, or the in-use cache within its share lost one")
	}
	if st := c.Stats(); st.Bytes != 500 || st.Evictions != 0 {
		t.Errorf("c: %+v, want its 500 bytes (a and c share the budget)", st)
	}
}

// Room counts only what can be given back: a cache's pins are not (a
// cache adding within its Room never evicts its own values).
func TestRoomOnlyWhatCanBeGivenBack(t *testing.T) {
	b := bare(100)
	a, c := b.New(0), b.New(0)
	a.Pin(70)
	if r := c.Room(); r != 30 {
		t.Fatalf("room = %d, want the 30 bytes free (a's pins cannot be evicted)", r)
	}
	for i := 0; c.Room() > 0; i++ {
		c.Add(keyOf("c", i), []byte{1})
	}
	if st := c.Stats(); st.Bytes != 30 || st.Evictions != 0 {
		t.Errorf("c after filling its room: %+v, want 30 bytes and none evicted", st)
	}
}

// TestEntryBytes: entryBytes is within 0.7-1.3x of what a cached value
// costs the heap beside its bytes, measured with keys shaped as the read
// engine's (strings shared with the tree) and values of a chunk's size.
func TestEntryBytes(t *testing.T) {
	const n, size = 20000, 2048
	slugs := make([]string, n)
	for i := range slugs {
		slugs[i] = fmt.Sprintf("docs/guide/section-%d/page-%d.md", i%50, i)
	}
	values := make([][]byte, n)
	for i := range values {
		values[i] = make([]byte, size)
	}
	var c *Cache
	heap := liveHeap(func() {
		c = NewBudget(1 << 40).New(0)
		for i := range n {
			c.Add(Key{Collection: "tenant/db/0000", Version: "sha", Page: slugs[i], Chunk: i % 3}, values[i])
		}
	})
	per := float64(heap) / n
	if ratio := entryBytes / per; ratio < 0.7 || ratio > 1.3 {
		t.Errorf("a value costs %.0f bytes beside its own; entryBytes %d is %.2fx that, want 0.7-1.3x", per, entryBytes, ratio)
	}
	if st := c.Stats(); st.Bytes != n*(size+entryBytes) || st.Entries != n {
		t.Errorf("stats %+v, want %d values counting %d bytes each", st, n, size+entryBytes)
	}
	t.Logf("a cached value costs %.0f bytes beside its own (entryBytes %d)", per, entryBytes)
}

// liveHeap is how much more the heap holds after alloc.
func liveHeap(alloc func()) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	alloc()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}

// TestEntriesCount: a budget counts each value's entry with its bytes, so
// it holds fewer small values than their bytes alone would fit.
func TestEntriesCount(t *testing.T) {
	b := NewBudget(10 * (100 + entryBytes))
	c := b.New(0)
	for i := range 20 {
		c.Add(keyOf("c", i), make([]byte, 100))
	}
	if st := c.Stats(); st.Entries != 10 || st.Bytes != 10*(100+entryBytes) || st.Evictions != 10 {
		t.Errorf("stats %+v, want 10 values of 100 bytes each counting %d", st, 100+entryBytes)
	}
}
