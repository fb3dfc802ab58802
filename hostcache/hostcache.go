// Package hostcache is the host tier of chromafs's content cache: whole
// pages on local disk, shared by every mount process of the host, so that
// the next conversation's mount of a collection reads what the previous one
// fetched instead of asking Chroma again.
//
// Design:
//
//   - Content identity. An entry is named by what it holds: the collection's
//     identity (tenant, database, collection id) and the page's SHA-256, never
//     a mount, a tree version or a path. Every tree version and every mount
//     of the collection that references the same page shares its entry.
//   - Verified before served. Each entry starts with a header naming its
//     collection, page digest, part, size and the SHA-256 of its content,
//     followed by the content compressed with zstd. [Cache.Get]
//     decompresses at most the expected size and checks length and digest.
//     A whole page's digest must be the SHA-256 the caller's tree records;
//     a part of a page (the tree records no digest per chunk) is checked
//     against the digest written with it and its length against the tree's
//     chunk lengths, which catches every corruption of the disk. Anything
//     else (truncated, bit-flipped, misplaced, unreadable) is a miss: the
//     entry is removed and counted, never served and never an error.
//   - Atomic writes. An entry is written to a temporary file in the same
//     directory and renamed into place, so a process killed mid-write leaves
//     no partial entry under a real name (only a temporary file, which the
//     eviction scan removes once it is old).
//   - Bounded. Hits refresh an entry's mtime (at most once a minute); after
//     a process has written an eighth of the bound, it scans the directory
//     under an exclusive lock and removes the oldest entries until the total
//     is under 90% of the bound. Every process of the host shares the bound.
//   - Cross-process de-duplication. [Cache.Lock] and [Cache.TryLock] take a
//     lock on the entry's byte of one lock file (an open file description's
//     fcntl lock: no file created per page), so when N mounts want the same
//     page at once, one fetches it and the others find it on disk. Locks are an
//     optimisation only: correctness never depends on them, and the kernel
//     drops them when a process dies.
//   - Private. Entries live in <dir>/pages-v1, a directory of mode 0700
//     (Open refuses one that group or others may use), in files of mode
//     0600 owned by the mounting user: the tier holds private pages,
//     readable only by that user (and root). A mount serves only the pages of its own access-pruned tree, so
//     sharing the tier between mounts of different groups widens nothing.
//   - Refs. Small named hints the mounts of a host remember between runs
//     (the id a collection name stood for) live in <dir>/pages-v1/refs,
//     outside the bound; they are never bytes served to a reader (ref.go).
//   - Never fatal. A full disk, a read-only or vanished directory, a corrupt
//     entry: a warning (rate-limited) and a fall-through to the next tier.
package hostcache

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromafs/chromafs/cache"
)

// FormatDir names the entry format and is the subdirectory of the cache
// directory it lives in; another format would use another, so versions
// never read each other. Entries are named by [cache.PageKey.Name].
const FormatDir = "pages-v1"

// Cache is the host tier in one directory. It is safe for concurrent use
// by goroutines and by processes.
type Cache struct {
	dir string // <cache dir>/<FormatDir>
	max int64
	log *slog.Logger

	mu          sync.Mutex // protects the following
	sinceScan   int64      // bytes written since the last eviction scan
	lastWarning time.Time

	st stats
}

type stats struct {
	hits, misses, corrupt, errors, writes, evictions atomic.Int64
	bytesRead, bytesWritten                          atomic.Int64
}

// Stats are the tier's counters in this process.
type Stats struct {
	Hits, Misses, Corrupt, Errors, Writes, Evictions int64
	BytesRead, BytesWritten                          int64
}

// Open prepares the tier in dir/pages-v1 (created 0700 when missing), bounded to
// maxBytes of entries on disk. It fails when the directory cannot be used:
// callers warn and run without the tier.
func Open(dir string, maxBytes int64, log *slog.Logger) (*Cache, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if maxBytes <= 0 {
		return nil, errors.New("host cache size must be positive")
	}
	root := filepath.Join(dir, FormatDir)
	for _, d := range []string{dir, root, filepath.Join(root, "tmp"), filepath.Join(root, "locks")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("host cache: %w", err)
		}
	}
	if err := checkPrivate(root); err != nil {
		return nil, err
	}
	return &Cache{dir: root, max: maxBytes, log: log}, nil
}

// checkPrivate refuses a cache directory that others can read or write:
// it holds private pages.
func checkPrivate(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("host cache: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("host cache %s is not a directory", dir)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("host cache %s has mode %04o: it holds private pages, so only its owner may use it (chmod 700 %s)", dir, perm, dir)
	}
	return nil
}

// Dir is the directory entries live in.
func (c *Cache) Dir() string { return c.dir }

func (c *Cache) path(k cache.PageKey) string {
	n := k.Name()
	return filepath.Join(c.dir, n[:2], n[2:])
}

// Get returns the page k of the given size, verified, or false.
func (c *Cache) Get(k cache.PageKey, size int64) ([]byte, bool) {
	if size < 0 || size > MaxEntry || k.SHA256 == "" {
		return nil, false
	}
	p := c.path(k)
	buf := entryBufs.Get().(*[]byte)
	defer putEntryBuf(buf)
	raw, mod, err := readEntry(p, (*buf)[:0])
	*buf = raw
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			c.fail("read", err)
		}
		c.st.misses.Add(1)
		return nil, false
	}
	data, err := Decode(raw, k, size)
	if err != nil {
		c.st.corrupt.Add(1)
		c.st.misses.Add(1)
		c.warn("host cache entry dropped", "entry", p, "err", err)
		_ = os.Remove(p)
		return nil, false
	}
	c.st.hits.Add(1)
	c.st.bytesRead.Add(int64(len(data)))
	c.touch(p, mod)
	return data, true
}

// Has reports whether an entry for k is on disk, without reading or
// verifying it (Get does both).
func (c *Cache) Has(k cache.PageKey) bool {
	if k.SHA256 == "" {
		return false
	}
	_, err := os.Stat(c.path(k))
	return err == nil
}

// touch marks the entry at p, last modified at mod, recently used, at
// most once a minute.
func (c *Cache) touch(p string, mod time.Time) {
	if time.Since(mod) > time.Minute {
		now := time.Now()
		_ = os.Chtimes(p, now, now)
	}
}

// Put stores page k (or part k of a page). A whole page must match its digest: Put checks it once more, so
// a caller's mistake cannot poison the tier.
func (c *Cache) Put(k cache.PageKey, data []byte) {
	if k.SHA256 == "" || len(data) > MaxEntry {
		return
	}
	buf := entryBufs.Get().(*[]byte)
	defer putEntryBuf(buf)
	entry, ok := AppendEntry((*buf)[:0], k, data)
	if !ok {
		c.warn("host cache: refusing to store a page whose digest does not match", "sha256", k.SHA256)
		return
	}
	*buf = entry
	p := c.path(k) // an entry already there is replaced by the same bytes
	if err := c.write(p, entry); err != nil {
		c.fail("write", err)
		return
	}
	c.st.writes.Add(1)
	c.st.bytesWritten.Add(int64(len(data)))
	c.wrote(int64(len(entry)))
}

// entryBufs are the buffers Put builds entries in and Get reads them
// into: an entry is written to its file, or decoded into a page of its
// own (Decode), and not kept, so a host filling its tier or reading from
// it allocates no entry for each page (a buffer over maxPooledEntry is
// not kept).
var entryBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledEntry = 1 << 20

func putEntryBuf(buf *[]byte) {
	if cap(*buf) <= maxPooledEntry {
		*buf = (*buf)[:0]
		entryBufs.Put(buf)
	}
}

// readEntry reads the file at p whole into buf's room, grown as needed,
// and says when it was last modified.
func readEntry(p string, buf []byte) ([]byte, time.Time, error) {
	f, err := os.Open(p)
	if err != nil {
		return buf, time.Time{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return buf, time.Time{}, err
	}
	b := bytes.NewBuffer(slices.Grow(buf, int(st.Size())+bytes.MinRead))
	_, err = b.ReadFrom(f)
	return b.Bytes(), st.ModTime(), err
}

// write puts entry at p atomically: a temporary file, then a rename.
func (c *Cache) write(p string, entry []byte) error {
	f, err := os.CreateTemp(filepath.Join(c.dir, "tmp"), "put-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(entry)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	err = os.Rename(tmp, p)
	if errors.Is(err, fs.ErrNotExist) { // the first entry of its subdirectory
		if err = os.MkdirAll(filepath.Dir(p), 0o700); err == nil {
			err = os.Rename(tmp, p)
		}
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// wrote accounts for n bytes written and runs an eviction scan once an
// eighth of the bound was written since the last one.
func (c *Cache) wrote(n int64) {
	c.mu.Lock()
	c.sinceScan += n
	due := c.sinceScan > c.max/8
	if due {
		c.sinceScan = 0
	}
	c.mu.Unlock()
	if due {
		c.Evict()
	}
}

// fail counts and reports an I/O failure of the tier.
func (c *Cache) fail(op string, err error) {
	c.st.errors.Add(1)
	c.warn("host cache "+op+" failed; falling through to the next tier", "err", err)
}

// warn logs at most one warning a second.
func (c *Cache) warn(msg string, args ...any) {
	c.mu.Lock()
	quiet := time.Since(c.lastWarning) < time.Second
	if !quiet {
		c.lastWarning = time.Now()
	}
	c.mu.Unlock()
	if !quiet {
		c.log.Warn(msg, args...)
	}
}

// Stats returns a snapshot of this process's counters.
func (c *Cache) Stats() Stats {
	return Stats{
		Hits: c.st.hits.Load(), Misses: c.st.misses.Load(), Corrupt: c.st.corrupt.Load(),
		Errors: c.st.errors.Load(), Writes: c.st.writes.Load(), Evictions: c.st.evictions.Load(),
		BytesRead: c.st.bytesRead.Load(), BytesWritten: c.st.bytesWritten.Load(),
	}
}

// Close releases what the cache holds (today nothing: entries are files
// and the codecs are shared); call it when done.
func (c *Cache) Close() {}
