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
		data, err := e.cfg.URIs.FetchRange(ctx, fl.URI, off, n)
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

// verifyLazy cuts data into the chunks of s and checks each against its
// recorded digest (the page's, for a page without pieces).
func verifyLazy(fl *tree.File, s span, lens []int64, data []byte) ([][]byte, error) {
	chunks, ok := splitChunks(data, lens)
	if !ok {
		return nil, fmt.Errorf("lazy page %q: %d bytes from %s, want %d: %w", fl.Slug, len(data), fl.URI, len(lens), ErrBadPage)
	}
	for i, c := range chunks {
		want := fl.SHA256
		if fl.Chunks != nil {
			if s.lo+i >= len(fl.ChunkSHA256) {
				return nil, fmt.Errorf("lazy page %q: no digest for piece %d: %w", fl.Slug, s.lo+i, ErrBadPage)
			}
			want = fl.ChunkSHA256[s.lo+i]
		}
		sum := sha256.Sum256(c)
		if hex.EncodeToString(sum[:]) != want {
			return nil, fmt.Errorf("lazy page %q: bytes from %s differ from the digest the tree records (the resource changed?): %w",
				fl.Slug, fl.URI, ErrBadPage)
		}
	}
	return chunks, nil
}

// verifyMapped checks the chunks [lo, lo+len(chunks)) of a page mapped onto
// other writers' records against the digests the index recorded: another
// writer may change its records at any time, and a changed one must be
// EIO, never other bytes. Pages of our own layout pass.
func verifyMapped(fl *tree.File, lo int, chunks [][]byte) error {
	if fl.Records == nil {
		return nil
	}
	for i, c := range chunks {
		k := lo + i
		sum := sha256.Sum256(c)
		if k >= len(fl.ChunkSHA256) || hex.EncodeToString(sum[:]) != fl.ChunkSHA256[k] {
			return fmt.Errorf("page %q: part %d (record %q) differs from what the index recorded (the record changed? re-run chromafs-ingest index): %w",
				fl.Slug, k, fl.Records[min(k, len(fl.Records)-1)].ID, ErrBadPage)
		}
	}
	return nil
}
