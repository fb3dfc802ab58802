package content

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/tree"
)

// The chain: one load (a window of a page, or a whole page) walks down the
// tiers once and back up once. Each tier answers what it holds for a
// query or passes it on; the first answer that verifies is filled into
// every nearer tier on the way up, and the source answers when no tier
// does. Verification is here and nowhere else: a tier's answer that does
// not verify is skipped like a miss, the source's is ErrBadPage (EIO).

// span is the chunks [lo, hi) of a file; lo == 0 && hi == len(chunks) (or
// a file without chunk lengths) is the whole page.
type span struct{ lo, hi int }

func wholeSpan(fl *tree.File) span { return span{0, len(fl.Chunks)} }

// query is one load walking down the chain: span s of page fl, and its
// entry in the tiers below memory.
type query struct {
	fl *tree.File
	s  span
	// key and size name the entry below memory; below is false when the
	// tree does not record what such an entry would be checked against
	// (then only memory and the source take part).
	key   cache.PageKey
	size  int64
	below bool
}

func (e *Engine) query(fl *tree.File, s span) *query {
	q := &query{fl: fl, s: s}
	size, known := fl.Size()
	if fl.SHA256 == "" || !known {
		return q
	}
	q.key, q.size, q.below = cache.PageKey{Collection: e.cfg.Identity, SHA256: fl.SHA256}, size, true
	if fl.Chunks != nil && s != wholeSpan(fl) {
		q.key.Part = fmt.Sprintf("%d-%d", s.lo, s.hi)
		q.size = 0
		for _, n := range fl.Chunks[s.lo:s.hi] {
			q.size += n
		}
	}
	return q
}

// tier is one link of the chain above the source: memory, the host's
// disk, a shared Redis.
type tier interface {
	// get returns what the tier holds for q — its chunks, or their bytes
	// joined — unverified; ok is false on a miss.
	get(ctx context.Context, q *query) (got [][]byte, ok bool)
	// put stores the verified chunks of q (filling the tier on the way up).
	put(q *query, chunks [][]byte)
	// name is the tier for the access log.
	name() Tier
}

// origin is where the chain ends: a page's bytes from where they live
// (the collection's records, another writer's records for a mapped page,
// the URI of a lazy pointer), under the engine's failure policy (fetch).
type origin interface {
	// fetch returns the chunks of q, or their bytes joined, unverified.
	fetch(ctx context.Context, q *query) ([][]byte, error)
	name() Tier
}

// origin returns the source of fl's bytes.
func (e *Engine) origin(fl *tree.File) origin {
	if fl.URI() != "" {
		return lazyOrigin{e}
	}
	return collectionOrigin{e}
}

// walk loads q: down the tiers (memory is checked again here, inside the
// flight: a load that finished after the reader's miss has put it there),
// then, under the host-wide lock of q's entry, once more below memory
// (another process may have fetched it meanwhile), then the source. The
// lock is held until what the source answered is written below memory, so
// a process waiting for it finds it on disk.
func (e *Engine) walk(ctx context.Context, q *query) ([][]byte, error) {
	if chunks, ok := e.lookup(ctx, q, 0); ok {
		return chunks, nil
	}
	unlock := e.lockEntry(ctx, q)
	if unlock != nil {
		if chunks, ok := e.lookup(ctx, q, 1); ok {
			unlock()
			return chunks, nil
		}
	}
	chunks, err := e.fromOrigin(ctx, q)
	if err != nil {
		if unlock != nil {
			unlock()
		}
		return nil, err
	}
	e.fillFromOrigin(q, chunks, unlock)
	return chunks, nil
}

// lookup asks the tiers from e.tiers[from] on, nearest first, and returns
// the first answer that verifies, after filling it into the nearer tiers.
// A tier that misses, fails or answers what does not verify is skipped.
func (e *Engine) lookup(ctx context.Context, q *query, from int) ([][]byte, bool) {
	for i := from; i < len(e.tiers); i++ {
		got, ok := e.tiers[i].get(ctx, q)
		if !ok {
			continue
		}
		chunks, err := verify(q, got)
		if err != nil {
			continue
		}
		traceFrom(ctx).note(e.tiers[i].name())
		for j := i - 1; j >= 0; j-- {
			e.tiers[j].put(q, chunks)
		}
		return chunks, true
	}
	return nil, false
}

// fromOrigin fetches q from its source and verifies the answer.
func (e *Engine) fromOrigin(ctx context.Context, q *query) ([][]byte, error) {
	o := e.origin(q.fl)
	got, err := o.fetch(ctx, q)
	if err != nil {
		return nil, err
	}
	chunks, err := verify(q, got)
	if err != nil {
		return nil, err
	}
	traceFrom(ctx).note(o.name())
	return chunks, nil
}

// fillFromOrigin puts what the source answered into memory at once, and
// hands it to the background writer for the tiers below memory, with the
// host-wide lock to release once it is written (compressing and writing
// stay off the read path).
func (e *Engine) fillFromOrigin(q *query, chunks [][]byte, unlock cache.Unlock) {
	e.tiers[0].put(q, chunks)
	e.queueTierWrite(tierWrite{q: q, chunks: chunks, unlock: unlock})
}

// lockEntry takes the host-wide lock of q's entry, waiting while another
// process holds it (it is fetching the page), up to Timeout; nil when
// there is no host tier or no lock.
func (e *Engine) lockEntry(ctx context.Context, q *query) cache.Unlock {
	if e.cfg.Host == nil || !q.below {
		return nil
	}
	unlock, _ := e.cfg.Host.Lock(ctx, q.key, e.cfg.Timeout)
	return unlock
}

// verify checks an answer for q against what the tree records, and returns
// it as q's chunks: the chunks' lengths (an answer of joined bytes is cut
// at them), and the digests of the pieces of a lazy pointer or of a page
// mapped onto other writers' records (verifyPieces). A page whose chunk
// lengths the tree does not give comes back as one value. Whole pages from
// the tiers below memory are also checked against the page's SHA-256 by
// the tier's entry format (hostcache.Decode), before they get here.
func verify(q *query, got [][]byte) ([][]byte, error) {
	fl, s := q.fl, q.s
	if fl.Chunks == nil {
		if err := verifyPieces(fl, 0, got); err != nil {
			return nil, err
		}
		if len(got) != 1 {
			got = [][]byte{bytes.Join(got, nil)}
		}
		return got, nil
	}
	lens := fl.Chunks[s.lo:s.hi]
	if len(got) != len(lens) {
		chunks, ok := splitChunks(got, lens)
		if !ok {
			return nil, fmt.Errorf("page %q: chunks %d-%d from %s do not have the lengths the tree records: %w", fl.Slug, s.lo, s.hi, source(fl, s.lo), ErrBadPage)
		}
		got = chunks
	}
	for i, c := range got {
		if int64(len(c)) != lens[i] {
			return nil, fmt.Errorf("page %q chunk %d: %d bytes, want %d: %w", fl.Slug, s.lo+i, len(c), lens[i], ErrBadPage)
		}
	}
	return got, verifyPieces(fl, s.lo, got)
}

// splitChunks cuts an answer of one joined value into chunks of the given
// lengths; ok is false when it is not one value or the lengths do not add
// up.
func splitChunks(got [][]byte, lens []int64) ([][]byte, bool) {
	if len(got) != 1 {
		return nil, false
	}
	data := got[0]
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
