package content

import (
	"context"
	"fmt"
)

// Lazy pointers: a page whose bytes live at a URI (tree.File.URI) is read
// with one ranged request per load, the bytes of the query's span, which
// the chain verifies like any answer: piece by piece against the digests
// the tree records (ChunkSHA256, one per chunk length), or, for a page the
// tree gives no pieces, whole against its SHA-256. A resource that changed
// behind the pointer is ErrBadPage (EIO), never wrong bytes. Prefetch never
// takes a pointer: it is fetched when it is read.

// lazyOrigin reads lazy pointers through Config.URIs.
type lazyOrigin struct{ e *Engine }

func (lazyOrigin) name() Tier { return TierURI }

// fetch returns the bytes of q's span at the pointer's URI, as one value.
func (o lazyOrigin) fetch(ctx context.Context, q *query) ([][]byte, error) {
	e, fl := o.e, q.fl
	if e.cfg.URIs == nil {
		return nil, fmt.Errorf("page %q is a lazy pointer and this mount reads none: %w", fl.Slug, ErrBadPage)
	}
	off, n := e.lazyRange(q)
	var data []byte
	err := e.fetch(ctx, nil, func(ctx context.Context) (err error) {
		data, err = e.cfg.URIs.FetchRange(ctx, fl.URI(), off, n)
		return err
	})
	if err != nil {
		return nil, err
	}
	e.fetchedBytes.Add(int64(len(data)))
	return [][]byte{data}, nil
}

// lazyRange is where q's span starts in its page and how long it is.
func (e *Engine) lazyRange(q *query) (off, n int64) {
	fl := q.fl
	if fl.Chunks == nil {
		size, _ := fl.Size()
		return 0, size
	}
	for _, l := range fl.Chunks[q.s.lo:q.s.hi] {
		n += l
	}
	return e.windowing(fl).offsets[q.s.lo], n
}
