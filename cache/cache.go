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

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// Key names one cached value.
type Key struct {
	Collection string
	Version    string // the page's SHA-256, or the tree version when unknown
	Page       string // slug
	Chunk      int    // chunk index; -1 for a whole page stored as one value
}

// Cache is a byte-bounded LRU. It is safe for concurrent use.
type Cache struct {
	max int64

	mu    sync.Mutex // protects the following
	lru   *simplelru.LRU[Key, []byte]
	bytes int64

	hits, misses, evictions atomic.Int64
}

// Stats are the cache's counters.
type Stats struct {
	Hits, Misses, Evictions int64
	Bytes, MaxBytes         int64
	Entries                 int
}

// New returns a cache holding at most maxBytes of values.
func New(maxBytes int64) *Cache {
	c := &Cache{max: maxBytes}
	// The entry count is not the bound; bytes are. simplelru needs a size.
	c.lru, _ = simplelru.NewLRU[Key, []byte](1<<31-1, func(_ Key, v []byte) {
		c.bytes -= int64(len(v))
		c.evictions.Add(1)
	})
	return c
}

// Get returns the value for k and marks it recently used.
func (c *Cache) Get(k Key) ([]byte, bool) {
	c.mu.Lock()
	v, ok := c.lru.Get(k)
	c.mu.Unlock()
	if ok {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	return v, ok
}

// Contains reports whether k is cached without touching recency or stats.
func (c *Cache) Contains(k Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Contains(k)
}

// Peek returns the value for k without touching recency or stats.
func (c *Cache) Peek(k Key) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Peek(k)
}

// Add stores v under k, evicting the least recently used values until the
// cache fits. A value larger than the whole cache is not stored.
func (c *Cache) Add(k Key, v []byte) {
	if int64(len(v)) > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.lru.Peek(k); ok {
		c.bytes -= int64(len(old))
	}
	c.lru.Add(k, v)
	c.bytes += int64(len(v))
	for c.bytes > c.max {
		if _, _, ok := c.lru.RemoveOldest(); !ok {
			break
		}
	}
}

// Room is how many more bytes fit without evicting.
func (c *Cache) Room() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.max - c.bytes
}

// Stats returns a snapshot of the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Stats{
		Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(),
		Bytes: c.bytes, MaxBytes: c.max, Entries: c.lru.Len(),
	}
}
