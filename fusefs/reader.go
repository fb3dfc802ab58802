package fusefs

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"time"

	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/chroma"
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

func pageRef(fl *tree.File) chroma.PageRef {
	return chroma.PageRef{Slug: fl.Slug, SHA256: fl.SHA256, Chunks: fl.Chunks}
}

func (f *FS) key(fl *tree.File, chunk int) cache.Key {
	return cache.Key{Collection: f.cfg.Collection, Tree: f.tree.Version, Page: fl.Slug, Chunk: chunk}
}

func windowKey(fl *tree.File, w int) string { return fmt.Sprintf("%s\x00w%d", fl.Slug, w) }
func wholeKey(fl *tree.File) string         { return fl.Slug + "\x00all" }

// readAt copies the bytes of fl at [off, off+len(dest)) into dest and
// returns how many it copied: fewer than len(dest) only at end of file.
// Any failure is an error, never a short or zero-filled read.
func (f *FS) readAt(ctx context.Context, fl *tree.File, l *layout, dest []byte, off int64) (int, error) {
	if size, ok := fl.Size(); ok && off >= size {
		return 0, nil // EOF, and empty files, cost no request
	}
	if fl.Chunks == nil {
		return f.readWhole(ctx, fl, dest, off)
	}
	size := l.size()
	if off >= size || len(dest) == 0 {
		return 0, nil
	}
	end := min(off+int64(len(dest)), size)
	first := sort.Search(len(fl.Chunks), func(k int) bool { return l.offsets[k+1] > off })
	copied := 0
	for k := first; k < len(fl.Chunks) && l.offsets[k] < end; k++ {
		data, err := f.chunk(ctx, fl, l, k)
		if err != nil {
			return 0, err
		}
		if int64(len(data)) != fl.Chunks[k] {
			return 0, fmt.Errorf("page %q chunk %d: %d bytes, want %d: %w", fl.Slug, k, len(data), fl.Chunks[k], chroma.ErrBadPage)
		}
		lo, hi := max(off, l.offsets[k])-l.offsets[k], min(end, l.offsets[k+1])-l.offsets[k]
		copied += copy(dest[copied:], data[lo:hi])
		if k%l.window == l.window/2 { // a sequential reader is halfway through
			for w := k/l.window + 1; w <= k/l.window+readaheadWindows; w++ {
				f.readahead(fl, l, w)
			}
		}
	}
	return copied, nil
}

// readahead starts loading window w of fl in the background, unless it is
// cached or being loaded, so a sequential reader does not wait for it.
func (f *FS) readahead(fl *tree.File, l *layout, w int) {
	first := w * l.window
	if first >= len(fl.Chunks) || f.cache.Contains(f.key(fl, first)) {
		return
	}
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		load := func(ctx context.Context) (any, error) { return f.loadWindow(ctx, fl, l, w) }
		_, _ = f.flights.Do(f.ctx, windowKey(fl, w), load)
	}()
}

// chunk returns chunk k of fl from the cache, or loads its window.
func (f *FS) chunk(ctx context.Context, fl *tree.File, l *layout, k int) ([]byte, error) {
	if v, ok := f.cache.Get(f.key(fl, k)); ok {
		return v, nil
	}
	w := k / l.window
	load := func(ctx context.Context) (any, error) { return f.loadWindow(ctx, fl, l, w) }
	val, err := f.load(ctx, windowKey(fl, w), load)
	if err != nil {
		return nil, err
	}
	chunks := val.([][]byte)
	if i := k - w*l.window; i < len(chunks) {
		return chunks[i], nil
	}
	return nil, fmt.Errorf("page %q: window %d lacks chunk %d: %w", fl.Slug, w, k, chroma.ErrBadPage)
}

// load runs a de-duplicated load for key, unless the same load failed
// within Config.FailTTL: the kernel retries a failed readahead with a plain
// read at once, and that retry should get the error at once instead of
// paying the timeouts and retries again.
func (f *FS) load(ctx context.Context, key string, fn func(context.Context) (any, error)) (any, error) {
	if v, ok := f.failed.Load(key); ok {
		if fl := v.(failure); time.Since(fl.at) < f.cfg.FailTTL {
			return nil, fl.err
		}
		f.failed.Delete(key)
	}
	val, err := f.flights.Do(ctx, key, fn)
	if errors.Is(err, cache.ErrNotLoaded) { // a prefetch batch skipped it
		val, err = f.flights.Do(ctx, key, fn)
	}
	if err != nil && f.cfg.FailTTL > 0 && ctx.Err() == nil && !errors.Is(err, context.Canceled) {
		f.failed.Store(key, failure{time.Now(), err})
	}
	return val, err
}

type failure struct {
	at  time.Time
	err error
}

// loadWindow fetches chunks [w*window, (w+1)*window) of fl in one request
// and caches them. ctx is the flight's: it ends when every reader left.
func (f *FS) loadWindow(ctx context.Context, fl *tree.File, l *layout, w int) ([][]byte, error) {
	lo, hi := w*l.window, min((w+1)*l.window, len(fl.Chunks))
	var idx []int // nil: the whole page
	if lo > 0 || hi < len(fl.Chunks) {
		for k := lo; k < hi; k++ {
			idx = append(idx, k)
		}
	}
	var texts []string
	err := f.fetch(ctx, func(ctx context.Context) (err error) {
		texts, err = f.src.FetchPage(ctx, pageRef(fl), idx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return f.storeChunks(fl, lo, texts), nil
}

func (f *FS) storeChunks(fl *tree.File, lo int, texts []string) [][]byte {
	out := make([][]byte, len(texts))
	for i, t := range texts {
		out[i] = []byte(t)
		f.cache.Add(f.key(fl, lo+i), out[i])
	}
	return out
}

// readWhole serves a page whose chunk lengths are unknown: the whole page
// is fetched and cached as one value.
func (f *FS) readWhole(ctx context.Context, fl *tree.File, dest []byte, off int64) (int, error) {
	data, err := f.whole(ctx, fl)
	if err != nil {
		return 0, err
	}
	if off >= int64(len(data)) {
		return 0, nil
	}
	return copy(dest, data[off:]), nil
}

func (f *FS) whole(ctx context.Context, fl *tree.File) ([]byte, error) {
	if v, ok := f.cache.Get(f.key(fl, wholePage)); ok {
		return v, nil
	}
	load := func(ctx context.Context) (any, error) { return f.loadWhole(ctx, fl) }
	val, err := f.load(ctx, wholeKey(fl), load)
	if err != nil {
		return nil, err
	}
	return val.([]byte), nil
}

func (f *FS) loadWhole(ctx context.Context, fl *tree.File) ([]byte, error) {
	var texts []string
	err := f.fetch(ctx, func(ctx context.Context) (err error) {
		texts, err = f.src.FetchPage(ctx, pageRef(fl), nil)
		return err
	})
	if err != nil {
		return nil, err
	}
	return f.storeWhole(fl, texts), nil
}

func (f *FS) storeWhole(fl *tree.File, texts []string) []byte {
	data := []byte(strings.Join(texts, ""))
	fl.SetSize(int64(len(data)))
	f.cache.Add(f.key(fl, wholePage), data)
	return data
}

// fetch runs one source call under the concurrency bound and a deadline
// per attempt, retrying retryable errors with capped, jittered backoff.
func (f *FS) fetch(ctx context.Context, call func(context.Context) error) error {
	for attempt := 0; ; attempt++ {
		err := f.withSlot(ctx, call)
		if err == nil {
			return nil
		}
		f.fetchErrors.Add(1)
		if attempt >= f.cfg.Retries || !chroma.Retryable(err) || ctx.Err() != nil {
			f.cfg.Log.Warn("fetch failed", "err", err, "attempts", attempt+1)
			return err
		}
		backoff := min(100*time.Millisecond<<attempt, 2*time.Second)
		backoff += rand.N(backoff / 2)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// withSlot waits for a slot (or for ctx) and runs call in it. Once sent, a
// request runs to its end or its deadline even when ctx ends (every reader
// left): the server counts it until then, so freeing its slot earlier would
// let more requests run at the server than the bound allows. Its result is
// still cached. Only Close cancels it.
func (f *FS) withSlot(ctx context.Context, call func(context.Context) error) error {
	select {
	case f.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-f.sem }()
	f.fetches.Add(1)
	rctx, cancel := context.WithTimeout(f.ctx, f.cfg.Timeout)
	defer cancel()
	return call(rctx)
}
