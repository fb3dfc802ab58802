package hostcache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

// Budget bounds the requests in flight to one collection from every
// process of the host: a slot is an flock(2) on one of n files in the cache
// directory, so the bound holds across mount processes, and the kernel
// frees the slots of a process that dies. A quota such as Chroma Cloud's
// 10 concurrent reads per collection is per collection, not per mount.
type Budget struct {
	dir string
	n   int
}

// OpenBudget prepares a budget of n slots named by key (the server and
// collection) under the cache directory dir.
func OpenBudget(dir, key string, n int) (*Budget, error) {
	if n <= 0 {
		return nil, fmt.Errorf("host request budget must be positive, got %d", n)
	}
	sum := sha256.Sum256([]byte(key))
	d := filepath.Join(dir, FormatDir, "budget", hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(d, 0o700); err != nil {
		return nil, fmt.Errorf("host request budget: %w", err)
	}
	if err := checkPrivate(filepath.Join(dir, FormatDir)); err != nil {
		return nil, err
	}
	return &Budget{dir: d, n: n}, nil
}

// Slots is the bound.
func (b *Budget) Slots() int { return b.n }

// Acquire waits for a free slot until ctx ends and returns its release.
// Each attempt opens the slot files anew: locks on distinct open files
// exclude each other inside one process too.
func (b *Budget) Acquire(ctx context.Context) (func(), error) {
	delay := 500 * time.Microsecond
	for {
		if release, ok := b.try(); ok {
			return release, nil
		}
		select {
		case <-time.After(delay + rand.N(delay)):
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for one of the host's %d request slots: %w", b.n, ctx.Err())
		}
		delay = min(2*delay, 20*time.Millisecond)
	}
}

func (b *Budget) try() (func(), bool) {
	start := rand.N(b.n)
	for i := range b.n {
		p := filepath.Join(b.dir, fmt.Sprintf("slot-%d", (start+i)%b.n))
		f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return func() {}, true // a budget that cannot be kept must not stop reads
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			return func() { f.Close() }, true
		}
		f.Close()
	}
	return nil, false
}
