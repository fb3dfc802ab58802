package content

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/tree"
)

// The tiers below memory: the host tier, then the remote tier, sit between the memory cache and
// the source. Whole pages whose SHA-256 and size the tree records, and the
// windows of pages too large to be read whole, are looked up there before
// a request and stored there after one (a remote hit is stored in the host
// tier too); an entry is verified before it is served, so a damaged one is
// a miss, never a wrong byte.

// span is the chunks [lo, hi) of a file; lo == 0 && hi == len(chunks) (or
// a file without chunk lengths) is the whole page.
type span struct{ lo, hi int }

func wholeSpan(fl *tree.File) span { return span{0, len(fl.Chunks)} }

// hostKey is the host tier's key and size for s of fl; ok is false when
// there is no tier or the tree does not record what the entry would be
// checked against.
func (e *Engine) hostKey(fl *tree.File, s span) (cache.PageKey, int64, bool) {
	size, known := fl.Size()
	if (e.cfg.Host == nil && e.cfg.Remote == nil) || fl.SHA256 == "" || !known {
		return cache.PageKey{}, 0, false
	}
	k := cache.PageKey{Collection: e.cfg.Identity, SHA256: fl.SHA256}
	if fl.Chunks != nil && (s.lo > 0 || s.hi < len(fl.Chunks)) {
		k.Part = fmt.Sprintf("%d-%d", s.lo, s.hi)
		size = 0
		for _, n := range fl.Chunks[s.lo:s.hi] {
			size += n
		}
	}
	return k, size, true
}

// fromTiers returns the chunks of s from the host tier, or else from the
// remote tier (storing them in the host tier).
func (e *Engine) fromTiers(ctx context.Context, fl *tree.File, s span) ([][]byte, bool) {
	k, size, ok := e.hostKey(fl, s)
	if !ok {
		return nil, false
	}
	data, ok := e.tierGet(ctx, k, size)
	if !ok {
		return nil, false
	}
	if fl.Chunks == nil {
		return [][]byte{data}, true
	}
	return splitChunks(data, fl.Chunks[s.lo:s.hi])
}

// tierGet looks k up in the host tier, then in the remote tier.
func (e *Engine) tierGet(ctx context.Context, k cache.PageKey, size int64) ([]byte, bool) {
	if e.cfg.Host != nil {
		start := time.Now()
		data, ok := e.cfg.Host.Get(k, size)
		e.cfg.Observe("host", time.Since(start))
		if ok {
			traceFrom(ctx).note(TierHost)
			return data, true
		}
	}
	if e.cfg.Remote == nil {
		return nil, false
	}
	start := time.Now()
	data, ok := e.cfg.Remote.Get(ctx, k, size)
	e.cfg.Observe("remote", time.Since(start))
	if ok {
		traceFrom(ctx).note(TierRemote)
	}
	if ok && e.cfg.Host != nil {
		e.cfg.Host.Put(k, data)
	}
	return data, ok
}

// toTiers stores the chunks of s in the host and remote tiers.
func (e *Engine) toTiers(fl *tree.File, s span, chunks [][]byte) {
	k, size, ok := e.hostKey(fl, s)
	if !ok {
		return
	}
	data := bytes.Join(chunks, nil)
	if int64(len(data)) != size {
		return
	}
	if e.cfg.Host != nil {
		e.cfg.Host.Put(k, data)
	}
	if e.cfg.Remote != nil {
		e.cfg.Remote.Put(k, data)
	}
}

// splitChunks cuts data into chunks of the given lengths; ok is false when
// the lengths do not add up.
func splitChunks(data []byte, lens []int64) ([][]byte, bool) {
	out := make([][]byte, len(lens))
	var off int64
	for i, n := range lens {
		if off+n > int64(len(data)) {
			return nil, false
		}
		out[i] = data[off : off+n : off+n]
		off += n
	}
	return out, off == int64(len(data))
}

// loadSpan returns the chunks of s: from the tiers below memory when they
// have them, else from the source (idx nil: the whole page). The fetch
// holds the entry's host-wide lock until the page is written to the host
// tier, so a mount process that wants it at the same moment waits and then
// reads it from disk instead of asking Chroma again.
func (e *Engine) loadSpan(ctx context.Context, fl *tree.File, s span, idx []int) ([][]byte, error) {
	if chunks, ok := e.fromTiers(ctx, fl, s); ok {
		return chunks, nil
	}
	var unlock cache.Unlock
	if k, _, ok := e.hostKey(fl, s); ok && e.cfg.Host != nil {
		if u, locked := e.cfg.Host.Lock(ctx, k, e.cfg.Timeout); locked {
			if chunks, ok := e.fromTiers(ctx, fl, s); ok {
				u()
				return chunks, nil
			}
			unlock = u
		}
	}
	chunks, err := e.fetchSpan(ctx, fl, s, idx)
	if err != nil {
		if unlock != nil {
			unlock()
		}
		return nil, err
	}
	e.queueTierWrite(tierWrite{fl: fl, s: s, chunks: chunks, unlock: unlock})
	return chunks, nil
}

// fetchSpan asks the source for the chunks of s (idx nil: the whole page),
// or the URI of a lazy pointer.
func (e *Engine) fetchSpan(ctx context.Context, fl *tree.File, s span, idx []int) ([][]byte, error) {
	if fl.URI() != "" {
		chunks, err := e.fetchLazy(ctx, fl, s)
		if err == nil {
			traceFrom(ctx).note(TierURI)
		}
		return chunks, err
	}
	var texts []string
	err := e.fetch(ctx, func(ctx context.Context) (err error) {
		texts, err = e.src.FetchPage(ctx, pageRef(fl), idx)
		return err
	})
	if err != nil {
		return nil, err
	}
	chunks := e.fetched(texts)
	if err := verifyPieces(fl, s.lo, chunks); err != nil {
		return nil, err
	}
	traceFrom(ctx).note(TierSource)
	return chunks, nil
}

// fetched converts what the source returned, counting its bytes.
func (e *Engine) fetched(texts []string) [][]byte {
	out := make([][]byte, len(texts))
	for i, t := range texts {
		out[i] = []byte(t)
		e.fetchedBytes.Add(int64(len(t)))
	}
	return out
}

// tierWrite is a page to store in the tiers below memory, and the host-wide
// lock to release once it is stored.
type tierWrite struct {
	fl     *tree.File
	s      span
	chunks [][]byte
	unlock cache.Unlock
}

// maxQueuedBytes bounds the page bytes waiting for the background writer.
const maxQueuedBytes = 64 << 20

// queueTierWrite hands w to the background writer (if the engine has tiers
// below memory: else it only releases w's lock), or writes it at once
// when the queue is full or the engine is closing: compressing and writing
// pages is kept off the read path (the writer waits for a quiet moment,
// such as an agent's think time), but never dropped while it holds a lock.
func (e *Engine) queueTierWrite(w tierWrite) {
	if e.tierWrites == nil {
		e.writeTiers(w)
		return
	}
	n := chunkBytes(w.chunks)
	if e.ctx.Err() == nil && e.queuedBytes.Add(n) <= maxQueuedBytes {
		select {
		case e.tierWrites <- w:
			return
		default:
		}
	}
	e.queuedBytes.Add(-n)
	e.writeTiers(w)
}

func chunkBytes(chunks [][]byte) int64 {
	var n int64
	for _, c := range chunks {
		n += int64(len(c))
	}
	return n
}

func (e *Engine) writeTiers(w tierWrite) {
	e.toTiers(w.fl, w.s, w.chunks)
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
		case w := <-e.tierWrites:
			e.waitQuiet()
			e.queuedBytes.Add(-chunkBytes(w.chunks))
			e.writeTiers(w)
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
	deadline := time.Now().Add(quietMax)
	for time.Now().Before(deadline) {
		idle := time.Since(time.Unix(0, e.lastRead.Load()))
		if idle >= quiet {
			return
		}
		select {
		case <-time.After(quiet - idle):
		case <-e.ctx.Done():
			return
		}
	}
}

func (e *Engine) drainTierWrites() {
	for {
		select {
		case w := <-e.tierWrites:
			e.queuedBytes.Add(-chunkBytes(w.chunks))
			e.writeTiers(w)
		default:
			return
		}
	}
}
