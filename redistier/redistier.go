// Package redistier is the optional cross-host tier of chromafs's content
// cache: page entries in a Redis shared by the hosts of a fleet, so that a
// page fetched from Chroma by one host is read by the others from Redis.
//
// It is an optimisation and never a source of failure or of wrong bytes:
//
//   - Entries are hostcache's (header, digest, zstd content) under a key
//     naming their content identity; every entry read back is verified by
//     hostcache.Decode against what the caller's tree records, and a bad
//     one is a miss (and is deleted).
//   - Every operation has a short deadline (Config.Timeout, tens of
//     milliseconds). A failure — Redis down, slow, or answering garbage —
//     is counted and skipped, and the tier then rests for a second, so a
//     dead Redis costs one timeout a second, not one per read.
//   - Writes are queued and sent by one goroutine (dropped when the queue is
//     full), so a slow Redis never delays a read. Close waits for it.
//   - The password comes from the environment or a 0600 file, never from
//     the URL (a URL with a password is refused: it would sit in argv).
package redistier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/hostcache"
)

// Config says how to reach Redis.
type Config struct {
	URL      string        // redis://HOST:PORT/DB (or rediss:// for TLS), without a password
	Password string        // from env or a 0600 file
	Timeout  time.Duration // per operation; default 50ms
	TTL      time.Duration // of an entry; default 24h
	Log      *slog.Logger
}

// rest is how long the tier skips Redis after a failure.
const rest = time.Second

// Tier is the Redis tier of one process.
type Tier struct {
	cfg    Config
	client *redis.Client
	puts   chan put
	wg     sync.WaitGroup

	downUntil atomic.Int64 // unix nanoseconds; Redis is skipped until then

	hits, misses, corrupt, errs, writes, skipped atomic.Int64
}

type put struct {
	key   string
	entry []byte
}

// Stats are the tier's counters in this process.
type Stats struct {
	Hits, Misses, Corrupt, Errors, Writes, Skipped int64
}

// Open prepares the tier. It does not wait for Redis: one that is down now
// is skipped until it answers.
func Open(cfg Config) (*Tier, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("--cache-redis: %w", err)
	}
	if _, has := u.User.Password(); has {
		return nil, errors.New("--cache-redis: the URL holds a password; give it in CHROMAFS_REDIS_PASSWORD or a 0600 file (--cache-redis-password-file), never on the command line")
	}
	opt, err := redis.ParseURL(cfg.URL)
	if err != nil {
		return nil, fmt.Errorf("--cache-redis %q: %w", cfg.URL, err)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 50 * time.Millisecond
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 24 * time.Hour
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	opt.Password = cfg.Password
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = cfg.Timeout, cfg.Timeout, cfg.Timeout
	opt.MaxRetries = -1 // a failure is skipped, not retried: the next tier is there
	opt.ContextTimeoutEnabled = true
	t := &Tier{cfg: cfg, client: redis.NewClient(opt), puts: make(chan put, 1024)}
	t.wg.Add(1)
	go t.writer()
	return t, nil
}

func key(k cache.PageKey) string { return "chromafs:" + hostcache.FormatDir + ":" + k.Name() }

// Get returns page (or part) k of the given size from Redis, verified.
func (t *Tier) Get(ctx context.Context, k cache.PageKey, size int64) ([]byte, bool) {
	if t.resting() {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	raw, err := t.client.Get(ctx, key(k)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		t.misses.Add(1)
		return nil, false
	case err != nil:
		t.failed("get", err)
		return nil, false
	}
	data, err := hostcache.Decode(raw, k, size)
	if err != nil {
		t.corrupt.Add(1)
		t.misses.Add(1)
		t.cfg.Log.Warn("redis cache entry dropped", "err", err)
		select {
		case t.puts <- put{key: key(k)}: // an empty entry deletes
		default:
		}
		return nil, false
	}
	t.hits.Add(1)
	return data, true
}

// Put queues page (or part) k for Redis; it never blocks.
func (t *Tier) Put(k cache.PageKey, data []byte) {
	if t.resting() {
		return
	}
	entry, ok := hostcache.Encode(k, data)
	if !ok {
		return
	}
	select {
	case t.puts <- put{key: key(k), entry: entry}:
	default: // Redis is slower than our fetches: skip this one
	}
}

func (t *Tier) writer() {
	defer t.wg.Done()
	for p := range t.puts {
		if t.resting() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), t.cfg.Timeout)
		var err error
		if p.entry == nil {
			err = t.client.Del(ctx, p.key).Err()
		} else {
			err = t.client.Set(ctx, p.key, p.entry, t.cfg.TTL).Err()
		}
		cancel()
		if err != nil {
			t.failed("set", err)
			continue
		}
		if p.entry != nil {
			t.writes.Add(1)
		}
	}
}

func (t *Tier) resting() bool {
	if time.Now().UnixNano() < t.downUntil.Load() {
		t.skipped.Add(1)
		return true
	}
	return false
}

// failed counts a failure and rests the tier; the first failure of a
// streak is logged.
func (t *Tier) failed(op string, err error) {
	t.errs.Add(1)
	if t.downUntil.Swap(time.Now().Add(rest).UnixNano()) < time.Now().Add(-rest).UnixNano() {
		t.cfg.Log.Warn("redis cache "+op+" failed; skipping it for a second", "err", err)
	}
}

// Stats returns a snapshot of the counters.
func (t *Tier) Stats() Stats {
	return Stats{Hits: t.hits.Load(), Misses: t.misses.Load(), Corrupt: t.corrupt.Load(),
		Errors: t.errs.Load(), Writes: t.writes.Load(), Skipped: t.skipped.Load()}
}

// Close sends what is queued (each within the timeout) and disconnects.
func (t *Tier) Close() {
	close(t.puts)
	t.wg.Wait()
	_ = t.client.Close()
}
