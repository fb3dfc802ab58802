package content

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/internal/idle"
)

// The tiers of the chain, nearest first, and the background writer that
// fills the tiers below memory with what the source answered.

// buildTiers builds the chain's tiers for cfg: memory, then the host tier and
// the remote tier when configured.
func (e *Engine) buildTiers() []tier {
	ts := []tier{memoryTier{e}}
	if e.cfg.Host != nil {
		ts = append(ts, hostTier{e.cfg.Host, e.cfg.Observe})
	}
	if e.cfg.Remote != nil {
		ts = append(ts, remoteTier{e.cfg.Remote, e.cfg.Observe})
	}
	return ts
}

// memoryTier is the engine's LRU: chunks under their own keys, or a page
// without chunk lengths as one value.
type memoryTier struct{ e *Engine }

func (memoryTier) name() Tier { return TierMemory }

// get looks the chunks up without touching recency or the stats: the
// reader's own lookup, before its flight, counted the miss.
func (m memoryTier) get(_ context.Context, q *query) ([][]byte, bool) {
	if q.fl.Chunks == nil {
		v, ok := m.e.cache.Peek(m.e.key(q.fl, wholePage))
		return [][]byte{v}, ok
	}
	out := make([][]byte, q.s.hi-q.s.lo)
	for i := range out {
		v, ok := m.e.cache.Peek(m.e.key(q.fl, q.s.lo+i))
		if !ok {
			return nil, false
		}
		out[i] = v
	}
	return out, true
}

func (m memoryTier) put(q *query, chunks [][]byte) {
	if q.fl.Chunks == nil {
		q.fl.SetSize(int64(len(chunks[0])))
		m.e.cache.Add(m.e.key(q.fl, wholePage), chunks[0])
		return
	}
	for i, c := range chunks {
		m.e.cache.Add(m.e.key(q.fl, q.s.lo+i), c)
	}
}

// hostTier is the host's disk (hostcache): entries hold a span's bytes
// joined.
type hostTier struct {
	c       HostTier
	observe func(string, time.Duration)
}

func (hostTier) name() Tier { return TierHost }

func (h hostTier) get(_ context.Context, q *query) ([][]byte, bool) {
	if !q.below {
		return nil, false
	}
	start := time.Now()
	data, ok := h.c.Get(q.key, q.size)
	h.observe("host", time.Since(start))
	return [][]byte{data}, ok
}

func (h hostTier) put(q *query, chunks [][]byte) {
	if q.below {
		h.c.Put(q.key, joined(chunks))
	}
}

// joined is a page's chunks as one slice: the one chunk itself (read
// only) when it has one, else a copy of them all.
func joined(chunks [][]byte) []byte {
	if len(chunks) == 1 {
		return chunks[0]
	}
	return bytes.Join(chunks, nil)
}

// remoteTier is the fleet's Redis (redistier), entries as the host tier's.
type remoteTier struct {
	c       RemoteTier
	observe func(string, time.Duration)
}

func (remoteTier) name() Tier { return TierRemote }

func (r remoteTier) get(ctx context.Context, q *query) ([][]byte, bool) {
	if !q.below {
		return nil, false
	}
	start := time.Now()
	data, ok := r.c.Get(ctx, q.key, q.size)
	r.observe("remote", time.Since(start))
	return [][]byte{data}, ok
}

func (r remoteTier) put(q *query, chunks [][]byte) {
	if q.below {
		r.c.Put(q.key, joined(chunks))
	}
}

// tierWrite is what the source answered for a query, to store in the tiers
// below memory, and the host-wide lock to release once it is stored.
type tierWrite struct {
	q      *query
	chunks [][]byte
	unlock cache.Unlock
}

// maxQueuedBytes bounds the page bytes waiting for the background writer,
// maxQueuedWrites the pages (a walk's lookahead is some 700): past either,
// a page is written at once.
const (
	maxQueuedBytes  = 64 << 20
	maxQueuedWrites = 1024
)

// writeQueue holds the pages waiting for the background writer. It
// holds what is queued and no more: an engine's queue is empty most of
// its life, and a host of many collections holds hundreds of engines (a
// channel of maxQueuedWrites held 40 KiB each).
type writeQueue struct {
	ready chan struct{} // one token: writes were queued since the last take

	mu     sync.Mutex
	writes []tierWrite
	bytes  int64 // the page bytes of writes and of those taken, not written yet
}

// push queues w, of n page bytes; false when the queue is full.
func (q *writeQueue) push(w tierWrite, n int64) bool {
	q.mu.Lock()
	ok := len(q.writes) < maxQueuedWrites && q.bytes+n <= maxQueuedBytes
	if ok {
		q.writes = append(q.writes, w)
		q.bytes += n
	}
	q.mu.Unlock()
	if ok {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
	return ok
}

// take empties the queue and returns what it held; their bytes count
// against the bound until written (q.written).
func (q *writeQueue) take() []tierWrite {
	q.mu.Lock()
	defer q.mu.Unlock()
	ws := q.writes
	q.writes = nil
	return ws
}

// written is told that n page bytes taken are written.
func (q *writeQueue) written(n int64) {
	q.mu.Lock()
	q.bytes -= n
	q.mu.Unlock()
}

// queueTierWrite hands w to the background writer (if the engine has tiers
// below memory: else it only releases w's lock), or writes it at once
// when the queue is full or the engine is closing: compressing and writing
// pages is kept off the read path (the writer waits for a quiet moment,
// such as an agent's think time), but never dropped while it holds a lock.
func (e *Engine) queueTierWrite(w tierWrite) {
	if e.tierWrites == nil || !w.q.below {
		e.writeTiers(w)
		return
	}
	if e.ctx.Err() == nil && e.tierWrites.push(w, chunkBytes(w.chunks)) {
		return
	}
	e.writeTiers(w)
}

func chunkBytes(chunks [][]byte) int64 {
	var n int64
	for _, c := range chunks {
		n += int64(len(c))
	}
	return n
}

// writeTiers stores w in every tier below memory, then releases its lock.
func (e *Engine) writeTiers(w tierWrite) {
	if w.q.below {
		for _, t := range e.tiers[1:] {
			t.put(w.q, w.chunks)
		}
	}
	if w.unlock != nil {
		w.unlock()
	}
}

// quiet is how long no read must have arrived before the writer writes,
// and quietMax the longest it waits for that.
const (
	quiet    = 20 * time.Millisecond
	quietMax = 250 * time.Millisecond
)

// tierWriter writes queued pages until Close, then what is left. When
// pages arrive it waits for the mount to be quiet (at most quietMax), then
// writes everything queued without waiting again: the locks the pages hold
// (other processes may wait for them) are never held longer than that.
func (e *Engine) tierWriter() {
	defer e.wg.Done()
	for {
		select {
		case <-e.tierWrites.ready:
			e.waitQuiet()
			e.drainTierWrites()
		case <-e.ctx.Done():
			e.drainTierWrites()
			return
		}
	}
}

// waitQuiet returns once no read arrived for a while, after quietMax, or
// at Close.
func (e *Engine) waitQuiet() {
	deadline := time.Now().Add(quietMax).UnixNano()
	idle.Until(e.ctx.Done(), func(now int64) time.Duration {
		if now >= deadline {
			return 0
		}
		return min(quiet-time.Duration(now-e.lastRead.Load()), time.Duration(deadline-now))
	})
}

func (e *Engine) drainTierWrites() {
	if e.tierWrites == nil {
		return
	}
	for ws := e.tierWrites.take(); len(ws) > 0; ws = e.tierWrites.take() {
		for i, w := range ws {
			e.writeTiers(w)
			e.tierWrites.written(chunkBytes(w.chunks))
			ws[i] = tierWrite{} // its pages are the cache's (or garbage) now
		}
	}
}
