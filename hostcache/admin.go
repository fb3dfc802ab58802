package hostcache

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/chromafs/chromafs/cache"
)

// DefaultDir is where mounts keep the host tier unless told otherwise:
// /var/cache/chromafs for root, else $XDG_CACHE_HOME/chromafs
// (~/.cache/chromafs); "" when there is no home to put it in.
func DefaultDir() string {
	if os.Geteuid() == 0 {
		return "/var/cache/chromafs"
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "chromafs")
	}
	return ""
}

// Usage is what the tier holds on disk.
type Usage struct {
	Entries int
	Bytes   int64 // on disk, compressed
}

// Usage counts the entries and their size.
func (c *Cache) Usage() Usage {
	entries, total := c.scan()
	return Usage{Entries: len(entries), Bytes: total}
}

// Verify checks every entry as Get would, without knowing which tree
// wants it: the header parses, the content decompresses to the size the
// header gives, its digest matches, and a whole page's digest is the page's.
// Bad entries are removed (a read would drop them anyway). It returns how
// many were good and how many were removed.
func (c *Cache) Verify() (good, removed int) {
	entries, _ := c.scan()
	for _, e := range entries {
		raw, err := os.ReadFile(e.path)
		if err == nil {
			err = c.check(raw)
		}
		if err != nil {
			c.log.Warn("host cache entry removed", "entry", e.path, "err", err)
			if os.Remove(e.path) == nil {
				removed++
			}
			continue
		}
		good++
	}
	return good, removed
}

// check verifies one entry on its own.
func (c *Cache) check(raw []byte) error {
	k, size, err := parseHeader(raw)
	if err != nil {
		return err
	}
	_, err = Decode(raw, k, size)
	return err
}

// parseHeader reads the key and size an entry claims.
func parseHeader(raw []byte) (cache.PageKey, int64, error) {
	if !bytes.HasPrefix(raw, []byte(magic)) {
		return cache.PageKey{}, 0, errors.New("not a chromafs cache entry")
	}
	lines := bytes.SplitN(raw[len(magic):], []byte("\n"), 5)
	if len(lines) < 5 {
		return cache.PageKey{}, 0, errors.New("header truncated")
	}
	size, err := strconv.ParseInt(string(lines[3]), 10, 64)
	if err != nil || size < 0 || size > MaxEntry {
		return cache.PageKey{}, 0, errors.New("header has no valid size (damaged, or written by another format)")
	}
	return cache.PageKey{Collection: string(lines[0]), SHA256: string(lines[1]), Part: string(lines[2])}, size, nil
}

// Clear removes every entry (and, as every scan does, old temporary files
// and idle locks), and nothing else: only files of its own layout, below
// its own directory. Mounts running meanwhile refetch what they need.
func (c *Cache) Clear() (int, error) {
	entries, _ := c.scan()
	var errs []error
	n := 0
	for _, e := range entries {
		if err := os.Remove(e.path); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// Present reports whether dir holds a host cache (a mount has opened it),
// without creating anything: a mistyped directory is not an empty cache.
func Present(dir string) (bool, error) {
	st, err := os.Stat(filepath.Join(dir, FormatDir))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("host cache: %w", err)
	case !st.IsDir():
		return false, fmt.Errorf("host cache %s is not a directory", filepath.Join(dir, FormatDir))
	}
	return true, nil
}
