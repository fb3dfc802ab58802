package hostcache

import (
	"context"
	"errors"
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

func (c *Cache) tryLock(k cache.PageKey) (cache.Unlock, error) {
	f, err := os.OpenFile(filepath.Join(c.dir, "locks", k.Name()), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		c.fail("lock", err)
		return nil, err
	}
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) != nil {
		f.Close()
		return nil, errBusy
	}
	return func() { f.Close() }, nil // closing the file drops the lock
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
