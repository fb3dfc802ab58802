package content

import (
	"context"
	"errors"
	"fmt"
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

// windowing is where each chunk of a file starts, and how many chunks one
// read miss loads (a window).
type windowing struct {
	offsets []int64 // len(chunks)+1; offsets[i] is where chunk i starts
	window  int
}

func newWindowing(fl *tree.File, windowBytes int64) *windowing {
	wd := &windowing{offsets: make([]int64, len(fl.Chunks)+1)}
	biggest := int64(1)
	for i, n := range fl.Chunks {
		wd.offsets[i+1] = wd.offsets[i] + n
		biggest = max(biggest, n)
	}
	wd.window = max(1, int(windowBytes/biggest))
	return wd
}

func (wd *windowing) size() int64 { return wd.offsets[len(wd.offsets)-1] }

// span is window w of fl.
func (wd *windowing) span(fl *tree.File, w int) span {
	return span{w * wd.window, min((w+1)*wd.window, len(fl.Chunks))}
}

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
	return e.readAt(ctx, fl, e.windowing(fl), dest, off)
}

// windowing returns fl's windowing, built on its first read (not on every
// lookup of ls -l).
func (e *Engine) windowing(fl *tree.File) *windowing {
	if v, ok := e.windowings.Load(fl); ok {
		return v.(*windowing)
	}
	v, _ := e.windowings.LoadOrStore(fl, newWindowing(fl, e.cfg.WindowBytes))
	return v.(*windowing)
}

func (e *Engine) readAt(ctx context.Context, fl *tree.File, wd *windowing, dest []byte, off int64) (int, error) {
	if size, ok := fl.Size(); ok && off >= size {
		return 0, nil // EOF, and empty files, cost no request
	}
	if fl.Chunks == nil {
		return e.readWhole(ctx, fl, dest, off)
	}
	size := wd.size()
	if off >= size || len(dest) == 0 {
		return 0, nil
	}
	end := min(off+int64(len(dest)), size)
	first := sort.Search(len(fl.Chunks), func(k int) bool { return wd.offsets[k+1] > off })
	copied := 0
	for k := first; k < len(fl.Chunks) && wd.offsets[k] < end; k++ {
		data, err := e.chunk(ctx, fl, wd, k)
		if err != nil {
			return 0, err
		}
		lo, hi := max(off, wd.offsets[k])-wd.offsets[k], min(end, wd.offsets[k+1])-wd.offsets[k]
		copied += copy(dest[copied:], data[lo:hi])
		if k%wd.window == wd.window/2 { // a sequential reader is halfway through
			for w := k/wd.window + 1; w <= k/wd.window+readaheadWindows; w++ {
				e.readahead(fl, wd, w)
			}
		}
	}
	return copied, nil
}

// readahead starts loading window w of fl in the background, unless it is
// cached or being loaded, so a sequential reader does not wait for it.
func (e *Engine) readahead(fl *tree.File, wd *windowing, w int) {
	first := w * wd.window
	if first >= len(fl.Chunks) || e.cache.Contains(e.key(fl, first)) {
		return
	}
	e.spawn(func() { _, _ = e.flights.Do(e.ctx, windowKey(fl, w), e.loadWindow(fl, wd, w)) })
}

// loadWindow is the load of window w of fl: a walk down the chain.
func (e *Engine) loadWindow(fl *tree.File, wd *windowing, w int) func(context.Context) (any, error) {
	return func(ctx context.Context) (any, error) { return e.walk(ctx, e.query(fl, wd.span(fl, w))) }
}

// chunk returns chunk k of fl from memory (the hot path: one lookup, no
// allocation), or else from its window's flight.
func (e *Engine) chunk(ctx context.Context, fl *tree.File, wd *windowing, k int) ([]byte, error) {
	tr := traceFrom(ctx)
	if v, ok := e.cache.Get(e.key(fl, k)); ok {
		tr.note(TierMemory)
		return v, nil
	}
	w := k / wd.window
	load := func(ctx context.Context) (any, error) { return e.walk(withTrace(ctx, tr), e.query(fl, wd.span(fl, w))) }
	val, err := e.load(ctx, windowKey(fl, w), load)
	if err != nil {
		return nil, err
	}
	tr.note(TierShared) // a no-op when this read's own load noted a farther tier
	chunks := val.([][]byte)
	if i := k - w*wd.window; i < len(chunks) {
		return chunks[i], nil
	}
	return nil, fmt.Errorf("page %q: window %d lacks chunk %d: %w", fl.Slug, w, k, ErrBadPage)
}

// readWhole serves a page whose chunk lengths are unknown: the whole page
// is loaded and cached as one value.
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
	load := func(ctx context.Context) (any, error) { return e.walk(withTrace(ctx, tr), e.query(fl, wholeSpan(fl))) }
	val, err := e.load(ctx, wholeKey(fl), load)
	if err != nil {
		return nil, err
	}
	tr.note(TierShared)
	return val.([][]byte)[0], nil
}

// load runs the de-duplicated load of key, unless this is the re-read of
// a read whose load of key just failed (see failures): the kernel re-reads
// at once what a failed readahead left, and that re-read gets the error at
// once instead of paying the timeouts and retries again.
func (e *Engine) load(ctx context.Context, key string, fn func(context.Context) (any, error)) (any, error) {
	if e.cfg.FailTTL > 0 {
		if err := e.failed.answer(key, e.cfg.FailTTL); err != nil {
			return nil, err
		}
	}
	val, err := e.flights.Do(ctx, key, fn)
	if errors.Is(err, cache.ErrNotLoaded) { // a prefetch batch skipped it
		val, err = e.flights.Do(ctx, key, fn)
	}
	if err != nil && e.cfg.FailTTL > 0 && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		e.failed.failed(key, err)
	}
	return val, err
}
