package content

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/tree"
)

// readaheadWindows is how many windows a sequential reader keeps in flight
// ahead of itself.
const readaheadWindows = 3

// wholePage is the cache chunk number of a page stored as one value
// (pages whose chunk lengths the tree does not give).
const wholePage = -1

// layout is where each chunk of a file starts, and how many chunks one
// read miss fetches.
type layout struct {
	offsets []int64 // len(chunks)+1; offsets[i] is where chunk i starts
	window  int
}

func newLayout(fl *tree.File, windowBytes int64) *layout {
	l := &layout{offsets: make([]int64, len(fl.Chunks)+1)}
	biggest := int64(1)
	for i, n := range fl.Chunks {
		l.offsets[i+1] = l.offsets[i] + n
		biggest = max(biggest, n)
	}
	l.window = max(1, int(windowBytes/biggest))
	return l
}

func (l *layout) size() int64 { return l.offsets[len(l.offsets)-1] }

func pageRef(fl *tree.File) Ref {
	return Ref{Slug: fl.Slug, SHA256: fl.SHA256, Chunks: fl.Chunks, Parts: fl.Records()}
}

// key names a chunk by content identity: the page's digest when the tree
// records one, so an unchanged page keeps its entries across tree versions.
func (e *Engine) key(fl *tree.File, chunk int) cache.Key {
	return cache.Key{Collection: e.cfg.Identity, Version: fl.Version, Page: fl.Slug, Chunk: chunk}
}

func windowKey(fl *tree.File, w int) string { return fmt.Sprintf("%s\x00w%d", fl.Slug, w) }
func wholeKey(fl *tree.File) string         { return fl.Slug + "\x00all" }

// ReadAt copies the bytes of fl at [off, off+len(dest)) into dest and
// returns how many it copied: fewer than len(dest) only at end of file.
// Any failure is an error, never a short or zero-filled read; a cancelled
// ctx is context.Canceled.
func (e *Engine) ReadAt(ctx context.Context, fl *tree.File, dest []byte, off int64) (int, error) {
	e.lastRead.Store(time.Now().UnixNano())
	return e.readAt(ctx, fl, e.layout(fl), dest, off)
}

// layout returns fl's read layout, built on its first read (not on every
// lookup of ls -l).
func (e *Engine) layout(fl *tree.File) *layout {
	if v, ok := e.layouts.Load(fl); ok {
		return v.(*layout)
	}
	v, _ := e.layouts.LoadOrStore(fl, newLayout(fl, e.cfg.WindowBytes))
	return v.(*layout)
}

func (e *Engine) readAt(ctx context.Context, fl *tree.File, l *layout, dest []byte, off int64) (int, error) {
	if size, ok := fl.Size(); ok && off >= size {
		return 0, nil // EOF, and empty files, cost no request
	}
	if fl.Chunks == nil {
		return e.readWhole(ctx, fl, dest, off)
	}
	size := l.size()
	if off >= size || len(dest) == 0 {
		return 0, nil
	}
	end := min(off+int64(len(dest)), size)
	first := sort.Search(len(fl.Chunks), func(k int) bool { return l.offsets[k+1] > off })
	copied := 0
	for k := first; k < len(fl.Chunks) && l.offsets[k] < end; k++ {
		data, err := e.chunk(ctx, fl, l, k)
		if err != nil {
			return 0, err
		}
		if int64(len(data)) != fl.Chunks[k] {
			return 0, fmt.Errorf("page %q chunk %d: %d bytes, want %d: %w", fl.Slug, k, len(data), fl.Chunks[k], ErrBadPage)
		}
		lo, hi := max(off, l.offsets[k])-l.offsets[k], min(end, l.offsets[k+1])-l.offsets[k]
		copied += copy(dest[copied:], data[lo:hi])
		if k%l.window == l.window/2 { // a sequential reader is halfway through
			for w := k/l.window + 1; w <= k/l.window+readaheadWindows; w++ {
				e.readahead(fl, l, w)
			}
		}
	}
	return copied, nil
}

// readahead starts loading window w of fl in the background, unless it is
// cached or being loaded, so a sequential reader does not wait for it.
func (e *Engine) readahead(fl *tree.File, l *layout, w int) {
	first := w * l.window
	if first >= len(fl.Chunks) || e.cache.Contains(e.key(fl, first)) {
		return
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		load := func(ctx context.Context) (any, error) { return e.loadWindow(ctx, fl, l, w) }
		_, _ = e.flights.Do(e.ctx, windowKey(fl, w), load)
	}()
}

// chunk returns chunk k of fl from the cache, or loads its window.
func (e *Engine) chunk(ctx context.Context, fl *tree.File, l *layout, k int) ([]byte, error) {
	tr := traceFrom(ctx)
	if v, ok := e.cache.Get(e.key(fl, k)); ok {
		tr.note(TierMemory)
		return v, nil
	}
	w := k / l.window
	load := func(ctx context.Context) (any, error) { return e.loadWindow(withTrace(ctx, tr), fl, l, w) }
	val, err := e.load(ctx, windowKey(fl, w), load)
	if err != nil {
		return nil, err
	}
	tr.note(TierShared) // a no-op when this read's own load noted a farther tier
	chunks := val.([][]byte)
	if i := k - w*l.window; i < len(chunks) {
		return chunks[i], nil
	}
	return nil, fmt.Errorf("page %q: window %d lacks chunk %d: %w", fl.Slug, w, k, ErrBadPage)
}

// load runs a de-duplicated load for key, unless the same load failed
// within Config.FailTTL: the kernel retries a failed readahead with a plain
// read at once, and that retry should get the error at once instead of
// paying the timeouts and retries again.
func (e *Engine) load(ctx context.Context, key string, fn func(context.Context) (any, error)) (any, error) {
	if v, ok := e.failed.Load(key); ok {
		if fl := v.(failure); time.Since(fl.at) < e.cfg.FailTTL {
			return nil, fl.err
		}
		e.failed.Delete(key)
	}
	val, err := e.flights.Do(ctx, key, fn)
	if errors.Is(err, cache.ErrNotLoaded) { // a prefetch batch skipped it
		val, err = e.flights.Do(ctx, key, fn)
	}
	if err != nil && e.cfg.FailTTL > 0 && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		e.failed.Store(key, failure{time.Now(), err})
	}
	return val, err
}

type failure struct {
	at  time.Time
	err error
}

// loadWindow fetches chunks [w*window, (w+1)*window) of fl in one request
// and caches them. ctx is the flight's: it ends when every reader left.
func (e *Engine) loadWindow(ctx context.Context, fl *tree.File, l *layout, w int) ([][]byte, error) {
	s := span{w * l.window, min((w+1)*l.window, len(fl.Chunks))}
	var idx []int // nil: the whole page
	if s != wholeSpan(fl) {
		for k := s.lo; k < s.hi; k++ {
			idx = append(idx, k)
		}
	}
	chunks, err := e.loadSpan(ctx, fl, s, idx)
	if err != nil {
		return nil, err
	}
	return e.storeChunks(fl, s.lo, chunks), nil
}

func (e *Engine) storeChunks(fl *tree.File, lo int, chunks [][]byte) [][]byte {
	for i, c := range chunks {
		e.cache.Add(e.key(fl, lo+i), c)
	}
	return chunks
}

// readWhole serves a page whose chunk lengths are unknown: the whole page
// is fetched and cached as one value.
func (e *Engine) readWhole(ctx context.Context, fl *tree.File, dest []byte, off int64) (int, error) {
	data, err := e.whole(ctx, fl)
	if err != nil {
		return 0, err
	}
	if off >= int64(len(data)) {
		return 0, nil
	}
	return copy(dest, data[off:]), nil
}

func (e *Engine) whole(ctx context.Context, fl *tree.File) ([]byte, error) {
	tr := traceFrom(ctx)
	if v, ok := e.cache.Get(e.key(fl, wholePage)); ok {
		tr.note(TierMemory)
		return v, nil
	}
	load := func(ctx context.Context) (any, error) { return e.loadWhole(withTrace(ctx, tr), fl) }
	val, err := e.load(ctx, wholeKey(fl), load)
	if err != nil {
		return nil, err
	}
	tr.note(TierShared)
	return val.([]byte), nil
}

func (e *Engine) loadWhole(ctx context.Context, fl *tree.File) ([]byte, error) {
	chunks, err := e.loadSpan(ctx, fl, wholeSpan(fl), nil)
	if err != nil {
		return nil, err
	}
	return e.storeWhole(fl, chunks), nil
}

func (e *Engine) storeWhole(fl *tree.File, chunks [][]byte) []byte {
	data := bytes.Join(chunks, nil)
	fl.SetSize(int64(len(data)))
	e.cache.Add(e.key(fl, wholePage), data)
	return data
}

// fetch runs one source call under the concurrency bound and a deadline
// per attempt, retrying retryable errors with capped, jittered backoff:
// Retries more times for failures, and for back-pressure (HTTP 429/503)
// as long as the whole read's budget, Timeout × (Retries+1), lasts,
// waiting at least what the source asked for (see RetryAfterer).
func (e *Engine) fetch(ctx context.Context, call func(context.Context) error) error {
	budget := time.Now().Add(e.cfg.Timeout * time.Duration(e.cfg.Retries+1))
	failures := 0
	for attempt := 0; ; attempt++ {
		err := e.withSlot(ctx, call)
		if err == nil {
			return nil
		}
		e.fetchErrors.Add(1)
		backoff := min(100*time.Millisecond<<min(attempt, 5), 2*time.Second)
		if errors.Is(err, ErrBusy) { // back-pressure: ask again soon, not later and later
			backoff = min(50*time.Millisecond<<min(attempt, 5), 500*time.Millisecond)
		} else {
			failures++
		}
		backoff += rand.N(backoff / 2)
		backoff = max(backoff, retryAfter(err))
		if left := time.Until(budget); errors.Is(err, ErrBusy) && backoff > left && left > 0 {
			backoff = left // the server asks for more than is left: one last try at the end
		}
		retryable := errors.Is(err, ErrTemporary) || errors.Is(err, ErrBusy)
		if failures > e.cfg.Retries || !retryable || ctx.Err() != nil || time.Now().Add(backoff).After(budget) {
			e.cfg.Log.Warn("fetch failed", "err", err, "attempts", attempt+1)
			return err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// RetryAfterer is implemented by source errors that carry the wait the
// server asked for (HTTP Retry-After); the engine never asks sooner.
type RetryAfterer interface{ RetryAfter() time.Duration }

func retryAfter(err error) time.Duration {
	var r RetryAfterer
	if errors.As(err, &r) {
		return r.RetryAfter()
	}
	return 0
}

// withSlot waits for a slot (or for ctx) and runs call in it. Once sent, a
// request runs to its end or its deadline even when ctx ends (every reader
// left): the server counts it until then, so freeing its slot earlier would
// let more requests run at the server than the bound allows. Its result is
// still cached. Only Close cancels it.
func (e *Engine) withSlot(ctx context.Context, call func(context.Context) error) error {
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-e.sem }()
	e.fetches.Add(1)
	rctx, cancel := context.WithTimeout(e.ctx, e.cfg.Timeout)
	defer cancel()
	start := time.Now()
	defer func() { e.cfg.Observe("source", time.Since(start)) }()
	return call(rctx)
}
