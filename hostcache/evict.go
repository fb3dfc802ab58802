package hostcache

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// staleTemp is how old a temporary file must be before a scan removes it:
// older than any write in progress.
const staleTemp = 10 * time.Minute

type entryInfo struct {
	path  string
	size  int64
	mtime time.Time
}

// Evict removes the least recently used entries until the tier holds at
// most 90% of its bound, and old temporary and lock files. One process
// scans at a time (an exclusive flock); the others skip.
func (c *Cache) Evict() {
	lock, err := os.OpenFile(filepath.Join(c.dir, "evict.lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		c.fail("evict", err)
		return
	}
	defer lock.Close()
	if unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		return // another process is scanning
	}
	entries, total := c.scan()
	sort.Slice(entries, func(i, j int) bool { return entries[i].mtime.Before(entries[j].mtime) })
	for _, e := range entries {
		if total <= c.max*9/10 {
			break
		}
		if os.Remove(e.path) == nil {
			total -= e.size
			c.st.evictions.Add(1)
		}
	}
}

// scan lists the entries and their total size, removing temporary files
// and unlocked lock files that are old (per-page ones older versions
// made, in locks/; the one lock file of this one is not there).
func (c *Cache) scan() ([]entryInfo, int64) {
	var out []entryInfo
	var total int64
	_ = filepath.WalkDir(c.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		switch rel, _ := filepath.Rel(c.dir, p); {
		case strings.HasPrefix(rel, "tmp"+string(filepath.Separator)):
			if time.Since(info.ModTime()) > staleTemp {
				_ = os.Remove(p)
			}
		case strings.HasPrefix(rel, "locks"+string(filepath.Separator)):
			removeIdleLock(p, info)
		case len(filepath.Base(filepath.Dir(p))) == 2:
			out = append(out, entryInfo{p, info.Size(), info.ModTime()})
			total += info.Size()
		}
		return nil
	})
	return out, total
}

// removeIdleLock removes a lock file nobody holds and nobody used lately.
// A process that opened it just before still works: the worst case is one
// duplicate fetch, never a wrong byte.
func removeIdleLock(p string, info fs.FileInfo) {
	if time.Since(info.ModTime()) < staleTemp {
		return
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
		_ = os.Remove(p)
	}
}
