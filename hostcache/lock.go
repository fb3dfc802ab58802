package hostcache

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chromafs/chromafs/cache"
)

var errBusy = errors.New("held by another load")

// TryLock takes the host-wide lock of k if nobody holds it. ok is false
// when another process (or another load of this one) holds it, or when the
// lock file cannot be used; the caller then lets the holder fetch the page.
func (c *Cache) TryLock(k cache.PageKey) (unlock cache.Unlock, ok bool) {
	unlock, err := c.tryLock(k)
	return unlock, err == nil
}

// pageLocksFile is the file whose bytes are the host-wide locks of pages:
// the lock of a key is an open file description's write lock (fcntl
// F_OFD_SETLK, Linux 3.15) on the one byte at the offset its digest names
// (lockOffset), taken through a description of its own, so that two
// loads of one process exclude each other as two processes do; closing
// it drops the lock, as a crash does. A lock file per page, as before,
// created a file on a page's first lock: on a slow disk most of a cold
// batch's time (0.7 ms a create on this project's CI machine, 70 ms
// before a batch of 100 pages could be asked for). Opening the one file
// creates nothing once it exists. Lock files of older versions in locks/
// are removed by eviction; while an older version runs beside this one,
// they do not see each other's locks: at worst a page is fetched twice.
// The kernel keeps a file's locks in one list, so a lock costs a walk of
// the locks held on the host (a few thousand at most: batches of 100).
const pageLocksFile = "page-locks"

func (c *Cache) tryLock(k cache.PageKey) (cache.Unlock, error) {
	f, err := os.OpenFile(filepath.Join(c.dir, pageLocksFile), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		c.fail("lock", err)
		return nil, err
	}
	lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: io.SeekStart, Start: lockOffset(k), Len: 1}
	if err := unix.FcntlFlock(f.Fd(), unix.F_OFD_SETLK, &lk); err != nil {
		f.Close()
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
			return nil, errBusy
		}
		c.fail("lock", err)
		return nil, err
	}
	return func() { f.Close() }, nil // closing the description drops the lock
}

// lockOffset is the byte of pageLocksFile that is k's lock: 62 bits of
// the digest of its name (two keys share one with odds of 2^-62: they
// would then wait for each other, never mix).
func lockOffset(k cache.PageKey) int64 {
	sum := sha256.Sum256([]byte(k.Name()))
	return int64(binary.BigEndian.Uint64(sum[:8]) >> 2)
}

// Lock takes the host-wide lock of k, waiting while another load holds it,
// until ctx ends or wait has passed. It returns false (and no lock) then,
// or at once when locks cannot be used: the caller fetches anyway.
func (c *Cache) Lock(ctx context.Context, k cache.PageKey, wait time.Duration) (cache.Unlock, bool) {
	deadline := time.Now().Add(wait)
	delay := time.Millisecond
	for {
		unlock, err := c.tryLock(k)
		if err == nil {
			return unlock, true
		}
		if !errors.Is(err, errBusy) || time.Now().After(deadline) {
			return nil, false
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return nil, false
		}
		delay = min(2*delay, 50*time.Millisecond)
	}
}
