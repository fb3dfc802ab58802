package content

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/chromafs/chromafs/tree"
)

// Lazy pointers: a page whose bytes live at a URI (tree.File.URI) is read
// with one ranged request per load, the bytes of span s, and checked
// before anything is cached or served: piece by piece against the digests
// the tree records (ChunkSHA256, one per chunk length), or, for a page the
// tree gives no pieces, whole against its SHA-256. A resource that changed
// behind the pointer is ErrBadPage (EIO), never wrong bytes. Prefetch never
// takes a pointer: it is fetched when it is read.

// fetchLazy returns the verified chunks of s of the lazy page fl.
func (e *Engine) fetchLazy(ctx context.Context, fl *tree.File, s span) ([][]byte, error) {
	if e.cfg.URIs == nil {
		return nil, fmt.Errorf("page %q is a lazy pointer and this mount reads none: %w", fl.Slug, ErrBadPage)
	}
	off, lens := e.lazyRange(fl, s)
	var n int64
	for _, l := range lens {
		n += l
	}
	var chunks [][]byte
	err := e.fetch(ctx, func(ctx context.Context) error {
		data, err := e.cfg.URIs.FetchRange(ctx, fl.URI(), off, n)
		if err != nil {
			return err
		}
		chunks, err = verifyLazy(fl, s, lens, data)
		return err
	})
	if err != nil {
		return nil, err
	}
	e.fetchedBytes.Add(n)
	return chunks, nil
}

// lazyRange is where s starts in fl and the lengths of its chunks.
func (e *Engine) lazyRange(fl *tree.File, s span) (int64, []int64) {
	if fl.Chunks == nil {
		size, _ := fl.Size()
		return 0, []int64{size}
	}
	return e.layout(fl).offsets[s.lo], fl.Chunks[s.lo:s.hi]
}

// verifyLazy cuts data into the chunks of s and checks them.
func verifyLazy(fl *tree.File, s span, lens []int64, data []byte) ([][]byte, error) {
	chunks, ok := splitChunks(data, lens)
	if !ok {
		return nil, fmt.Errorf("lazy page %q: %d bytes from %s, want %d: %w", fl.Slug, len(data), fl.URI(), len(lens), ErrBadPage)
	}
	return chunks, verifyPieces(fl, s.lo, chunks)
}

// verifyPieces checks the chunks [lo, lo+len(chunks)) of a page whose
// pieces have recorded digests (tree.File.ChunkSHA256: lazy pointers and
// pages mapped onto other writers' records) — or, for a lazy pointer
// without pieces, the whole page against its SHA-256. What another party
// may change at any time (a published file, another tool's record) must be
// EIO when it changed, never other bytes. Pages of our own layout, which
// carry neither, pass.
func verifyPieces(fl *tree.File, lo int, chunks [][]byte) error {
	whole := fl.ChunkSHA256() == nil && fl.URI() != ""
	if fl.ChunkSHA256() == nil && !whole {
		return nil
	}
	for i, c := range chunks {
		want := fl.SHA256
		if !whole {
			if lo+i >= len(fl.ChunkSHA256()) {
				return fmt.Errorf("page %q: no digest for piece %d: %w", fl.Slug, lo+i, ErrBadPage)
			}
			want = fl.ChunkSHA256()[lo+i]
		}
		if sum := sha256.Sum256(c); hex.EncodeToString(sum[:]) != want {
			return fmt.Errorf("page %q: piece %d differs from the digest the tree records (%s changed? for another tool's collection, re-run chromafs-ingest index): %w",
				fl.Slug, lo+i, source(fl, lo+i), ErrBadPage)
		}
	}
	return nil
}

// source names where piece k of fl comes from, for messages.
func source(fl *tree.File, k int) string {
	if fl.URI() != "" {
		return fl.URI()
	}
	if k < len(fl.Records()) {
		return fmt.Sprintf("record %q", fl.Records()[k].ID)
	}
	return "the page"
}
