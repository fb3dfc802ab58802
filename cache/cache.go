// Package cache holds file content in memory: a byte-bounded LRU of chunks
// plus in-flight de-duplication, so that many readers of one uncached page
// cause one request.
//
// Keys never change meaning: they name content by what it is — the
// collection's identity, the page version (its SHA-256 when the tree records
// one, else the tree version), the page and the chunk — so an unchanged page
// keeps its entries across tree versions. The LRU only evicts; nothing is
// ever updated in place.
//
// # One budget, many caches
//
// A [Budget] is one byte bound shared by many caches: chromafsd's host
// holds one, and each collection's read engine a [Cache] of it
// ([Budget.New]); [New] makes a cache with a budget of its own (one
// mount). A cache also declares what it holds that is not its values
// and cannot be evicted here ([Cache.Pin]: its views' trees, search
// indexes), counted against the same bound.
//
// When the budget is passed, what has gone unused longest goes, with
// one rule of fairness: a cache in use holding no more than its fair
// share (what the bound leaves besides the overhead, below, divided
// among the caches in use that hold anything) loses nothing to another's
// growth. Its owner may declare a cache idle
// ([Cache.SetIdle]: chromafsd's collection with no attachment): an idle
// cache has no share. The victim is the oldest value (by last use,
// across caches) of an idle cache or of one above its share; were there
// none with values left (only pins pass the bound), the oldest value of
// any cache goes. So one big collection cannot push every small one
// out, and what sits idle goes first. Choosing the victim looks at every
// cache (they are few: one per open collection).
//
// What the budget's owner holds beyond every cache's values and pins,
// measured rather than declared ([Budget.SetOverhead]: chromafsd's heap
// beyond them), counts against the same bound: values make room for it
// as for pins.
//
// [Flights] de-duplicates loads. A single load ([Flights.Do]) and a batch
// load ([Flights.DoBatch], used by directory prefetch) share one key space,
// so a reader that wants a page a prefetch is already fetching waits for it
// instead of asking again. Callers wait with their own context (cancelled
// callers return at once) while the load itself runs under the loader's own
// deadline and finishes for the others.
package cache

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Key names one cached value.
type Key struct {
	Collection string
	Version    string // the page's SHA-256, or the tree version when unknown
	Page       string // slug
	Chunk      int    // chunk index; -1 for a whole page stored as one value
}

// Budget is one byte bound shared by the caches made from it. It is safe
// for concurrent use.
type Budget struct {
	max   int64
	entry int64 // what a value costs beside its bytes (entryBytes)

	start time.Time // uses are times since it (monotonic): the values' recency across caches

	mu       sync.Mutex // protects the following and every cache's lru, bytes, pinned, idle, closed
	caches   map[*Cache]struct{}
	bytes    int64 // values with their entries, all caches
	pinned   int64 // pins, all caches
	overhead int64 // SetOverhead's
	lastUse  int64 // the latest now
	// newestEvicted is the last use of the most recently used value
	// evicted since TakeEvicted (0: none)
	newestEvicted int64

	evictions atomic.Int64
}

// BudgetStats are a budget's figures.
type BudgetStats struct {
	MaxBytes  int64 // the bound
	Bytes     int64 // values held by every cache, with their entries
	Pinned    int64 // what the caches pinned (Cache.Pin)
	Overhead  int64 // what the owner holds besides (SetOverhead)
	Evictions int64 // values evicted, every cache (by the budget or their own bounds)
	Caches    int
}

// NewBudget returns a budget of maxBytes.
func NewBudget(maxBytes int64) *Budget {
	return &Budget{max: maxBytes, entry: entryBytes, caches: map[*Cache]struct{}{}, start: time.Now()}
}

// entryBytes is what a cached value costs the heap beside its own bytes,
// counted with them: its entry, the LRU's list element and map slot
// (keys share their strings with the tree). Measured by
// TestEntryBytes; a collection's cache holds tens of thousands of
// chunks of 1-4 KiB, so this adds a sixteenth to a quarter to them.
const entryBytes = 256

// now is the time of a use, later than every use before it (two uses
// within a tick of the clock keep their order). b.mu is held.
func (b *Budget) now() int64 {
	b.lastUse = max(b.lastUse+1, int64(time.Since(b.start)))
	return b.lastUse
}

// TakeEvicted returns when the most recently used of the values the
// budget evicted since the last call was last used (not those a cache's
// own bound evicted); ok is false when none was. An owner holding things
// the budget does not evict (idle views) lets those go that were last
// used before it: they are older than a value that went.
func (b *Budget) TakeEvicted() (lastUse time.Time, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.newestEvicted
	b.newestEvicted = 0
	if n == 0 {
		return time.Time{}, false
	}
	return b.start.Add(time.Duration(n)), true
}

// Stats returns a snapshot of the budget's figures.
func (b *Budget) Stats() BudgetStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return BudgetStats{MaxBytes: b.max, Bytes: b.bytes, Pinned: b.pinned, Overhead: b.overhead, Evictions: b.evictions.Load(), Caches: len(b.caches)}
}

// SetOverhead declares that the budget's owner holds n bytes besides
// every cache's values and pins (measured: what its heap holds that no
// cache counts), counted against the bound: values are evicted to make
// room for it. It replaces the last SetOverhead.
func (b *Budget) SetOverhead(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.overhead = max(n, 0)
	b.reclaimLocked()
}

// share is the fair share of each of holding caches in use: what the
// bound leaves besides the overhead, divided among them. b.mu is held.
func (b *Budget) share(holding int) int64 {
	return max(b.max-b.overhead, 0) / int64(max(holding, 1))
}

// Cache is a byte-bounded LRU, one of its budget's. It is safe for
// concurrent use.
type Cache struct {
	b   *Budget
	max int64 // its own bound within the budget's (0: none)

	// guarded by b.mu
	lru    *simplelru.LRU[Key, *entry]
	bytes  int64
	pinned int64
	idle   bool
	closed bool

	hits, misses, evictions atomic.Int64
}

type entry struct {
	v    []byte
	used int64 // when last added or got (Budget.now)
}

// size is what e counts against the bounds: its value and its entry.
func (b *Budget) size(e *entry) int64 { return int64(len(e.v)) + b.entry }

// Stats are the cache's counters.
type Stats struct {
	Hits, Misses, Evictions int64
	Bytes, MaxBytes         int64 // Bytes: values with their entries; MaxBytes: its own bound, else its budget's
	Pinned                  int64
	Entries                 int
}

// New returns a cache holding at most maxBytes of values (their entries
// counted), with a budget of its own.
func New(maxBytes int64) *Cache { return NewBudget(maxBytes).New(0) }

// New returns a cache of b, holding at most maxBytes of values (0: no
// bound but the budget's). Close gives back what it holds.
func (b *Budget) New(maxBytes int64) *Cache {
	c := &Cache{b: b, max: maxBytes}
	// The entry count is not the bound; bytes are. simplelru needs a size.
	c.lru, _ = simplelru.NewLRU[Key, *entry](1<<31-1, func(_ Key, e *entry) {
		c.bytes -= b.size(e)
		b.bytes -= b.size(e)
		if !c.closed {
			c.evictions.Add(1)
			b.evictions.Add(1)
		}
	})
	b.mu.Lock()
	b.caches[c] = struct{}{}
	b.mu.Unlock()
	return c
}

// Close empties c and takes it out of its budget (its pin too). Adds
// after it store nothing.
func (c *Cache) Close() {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.closed {
		return
	}
	c.closed = true
	c.lru.Purge()
	b.pinned -= c.pinned
	c.pinned = 0
	delete(b.caches, c)
}

// Get returns the value for k and marks it recently used.
func (c *Cache) Get(k Key) ([]byte, bool) {
	b := c.b
	b.mu.Lock()
	e, ok := c.lru.Get(k)
	if ok {
		e.used = b.now()
	}
	b.mu.Unlock()
	if ok {
		c.hits.Add(1)
		return e.v, true
	}
	c.misses.Add(1)
	return nil, false
}

// Contains reports whether k is cached without touching recency or stats.
func (c *Cache) Contains(k Key) bool {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	return c.lru.Contains(k)
}

// Peek returns the value for k without touching recency or stats.
func (c *Cache) Peek(k Key) ([]byte, bool) {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	if e, ok := c.lru.Peek(k); ok {
		return e.v, true
	}
	return nil, false
}

// Add stores v under k, evicting the least recently used values until the
// cache fits its bound and the budget fits its (see the package's doc). A
// value larger than either bound, or than what the pins and the overhead
// leave of the budget's, is not stored (it would evict every other and
// then itself).
func (c *Cache) Add(k Key, v []byte) {
	b := c.b
	e := &entry{v: v}
	n := b.size(e)
	if n > b.max || (c.max > 0 && n > c.max) {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.closed || n > b.max-b.pinned-b.overhead {
		return
	}
	if old, ok := c.lru.Peek(k); ok {
		c.bytes -= b.size(old)
		b.bytes -= b.size(old)
	}
	e.used = b.now()
	c.lru.Add(k, e)
	c.bytes += n
	b.bytes += n
	for c.max > 0 && c.bytes > c.max {
		if _, _, ok := c.lru.RemoveOldest(); !ok {
			break
		}
	}
	b.reclaimLocked()
}

// Cost is what a number of values holding bytes bytes in all count
// against c's bounds: their bytes and their entries.
func (c *Cache) Cost(bytes int64, values int) int64 { return bytes + int64(values)*c.b.entry }

// Pin declares that c's owner holds n bytes besides c's values (its
// trees, indexes), counted against the budget: values are evicted to
// make room for them. It replaces the last Pin.
func (c *Cache) Pin(n int64) {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.closed {
		return
	}
	b.pinned += n - c.pinned
	c.pinned = n
	b.reclaimLocked()
}

// Room is how many more bytes c may take without evicting values of a
// cache in use within its fair share, nor its own: what the budget has
// free, or, when c is in use and holds less than its share, what is left
// of it as far as idle and over-share caches can give it back (and
// within its own bound).
func (c *Cache) Room() int64 {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	free := b.max - b.overhead - b.bytes - b.pinned
	room := free
	if !c.idle {
		holding := b.holding()
		if c.bytes+c.pinned == 0 {
			holding++
		}
		share := b.share(holding)
		if rest := share - c.bytes - c.pinned; rest > room {
			give := free
			for o := range b.caches {
				if o != c {
					give += o.reclaimable(share)
				}
			}
			room = max(room, min(rest, give))
		}
	}
	if c.max > 0 {
		room = min(room, c.max-c.bytes)
	}
	return max(room, 0)
}

// reclaimable is how many bytes of c's values the budget may evict for
// another cache, when the fair share is share: all of an idle cache's,
// else what passes its share. b.mu is held.
func (c *Cache) reclaimable(share int64) int64 {
	if c.idle {
		return c.bytes
	}
	return max(min(c.bytes, c.bytes+c.pinned-share), 0)
}

// SetIdle declares c idle (nobody is reading through it now) or in use:
// an idle cache has no fair share, its values go first (see the
// package's doc).
func (c *Cache) SetIdle(idle bool) {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	c.idle = idle
}

// Stats returns a snapshot of the counters.
func (c *Cache) Stats() Stats {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	maxBytes := c.max
	if maxBytes == 0 {
		maxBytes = b.max
	}
	return Stats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(),
		Bytes: c.bytes, MaxBytes: maxBytes, Pinned: c.pinned, Entries: c.lru.Len(),
	}
}

// holding counts the caches in use that hold anything. b.mu is held.
func (b *Budget) holding() int {
	n := 0
	for c := range b.caches {
		if !c.idle && c.bytes+c.pinned > 0 {
			n++
		}
	}
	return n
}

// reclaimLocked evicts values until the budget fits its bound, or no
// value is left. b.mu is held.
func (b *Budget) reclaimLocked() {
	for b.bytes+b.pinned+b.overhead > b.max {
		v, used := b.victim()
		if v == nil {
			return
		}
		b.newestEvicted = max(b.newestEvicted, used)
		v.lru.RemoveOldest()
	}
}

// victim is the cache whose oldest value goes next, and that value's
// last use: the one with the oldest value among the idle ones and those
// above their fair share, else among all. b.mu is held.
func (b *Budget) victim() (*Cache, int64) {
	share := b.share(b.holding())
	var over, oldest *Cache
	var overUsed, oldestUsed int64
	for c := range b.caches {
		_, e, ok := c.lru.GetOldest()
		if !ok {
			continue
		}
		if oldest == nil || e.used < oldestUsed {
			oldest, oldestUsed = c, e.used
		}
		if (c.idle || c.bytes+c.pinned > share) && (over == nil || e.used < overUsed) {
			over, overUsed = c, e.used
		}
	}
	if over != nil {
		return over, overUsed
	}
	return oldest, oldestUsed
}
