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
//   - A read has a short deadline (Config.Timeout, tens of milliseconds):
//     a reader waits on it. A failure — Redis down, slow, or answering
//     garbage — is counted and skipped, and reads then rest for a second,
//     so a dead Redis costs one timeout a second, not one per read. A
//     reader that leaves (its context ends) is no failure of Redis.
//   - Writes are queued (up to Config.QueueBytes and queueLen entries;
//     dropped when the queue is full) and sent by one goroutine, so a
//     slow Redis never delays a read. No reader waits on a write, so its
//     deadline is longer (Config.WriteTimeout), and a failed write rests
//     the writer, which then waits out the rest and goes on with the
//     queue: a read that timed out on a busy host, or a blip, does not
//     lose what was queued. Close sends what is queued within
//     Config.DrainTimeout (waiting out a rest that ends sooner), then
//     drops the rest (counted as skipped).
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
	Timeout  time.Duration // of a read; default 50ms
	TTL      time.Duration // of an entry; default 24h
	Log      *slog.Logger

	WriteTimeout time.Duration // of a queued write; default 1s
	QueueBytes   int64         // bytes of entries queued for writing, at most; default 64 MiB
	DrainTimeout time.Duration // Close's bound for sending what is queued; default 5s
}

// rest is how long reads, or the writer, skip Redis after a failure.
const rest = time.Second

// queueLen bounds the entries queued for writing (deletes and small
// entries, which QueueBytes would let pile up).
const queueLen = 4096

// Tier is the Redis tier of one process.
type Tier struct {
	cfg    Config
	client *redis.Client
	puts   chan put
	queued atomic.Int64 // bytes in puts
	wg     sync.WaitGroup

	// closing is closed when Close starts; drainBy (unix nanoseconds) is
	// then when the writer stops sending.
	closing   chan struct{}
	drainBy   atomic.Int64
	closeOnce sync.Once

	readsDownUntil, writesDownUntil atomic.Int64 // unix nanoseconds; skipped until then
	// now is the clock reads' rests are judged by (time.Now; a test's
	// own, to prove a rest skips Redis without racing the wall clock)
	now func() time.Time

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
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = max(time.Second, cfg.Timeout)
	}
	if cfg.QueueBytes <= 0 {
		cfg.QueueBytes = 64 << 20
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 5 * time.Second
	}
	if cfg.TTL <= 0 {
		cfg.TTL = 24 * time.Hour
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	opt.Password = cfg.Password
	// the client's own timeouts are the writes' (the longer); a read's
	// context bounds it to cfg.Timeout (go-redis takes the earlier)
	opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = cfg.WriteTimeout, cfg.WriteTimeout, cfg.WriteTimeout
	opt.MaxRetries = -1 // a failure is skipped, not retried: the next tier is there
	opt.ContextTimeoutEnabled = true
	t := &Tier{cfg: cfg, client: redis.NewClient(opt), puts: make(chan put, queueLen), closing: make(chan struct{}), now: time.Now}
	t.wg.Add(1)
	go t.writer()
	return t, nil
}

func key(k cache.PageKey) string { return "chromafs:" + hostcache.FormatDir + ":" + k.Name() }

// Get returns page (or part) k of the given size from Redis, verified.
func (t *Tier) Get(parent context.Context, k cache.PageKey, size int64) ([]byte, bool) {
	if t.resting() {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(parent, t.cfg.Timeout)
	defer cancel()
	raw, err := t.client.Get(ctx, key(k)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		t.misses.Add(1)
		return nil, false
	case err != nil && callerLeft(parent): // no fault of Redis
		return nil, false
	case err != nil:
		t.failed(&t.readsDownUntil, t.now(), "get", err)
		return nil, false
	}
	data, err := hostcache.Decode(raw, k, size)
	if err != nil {
		t.corrupt.Add(1)
		t.misses.Add(1)
		t.cfg.Log.Warn("redis cache entry dropped", "err", err)
		t.queue(put{key: key(k)}) // an empty entry deletes
		return nil, false
	}
	t.hits.Add(1)
	return data, true
}

// callerLeft reports whether parent, not Redis, ended a read: the caller
// gave up, or its own deadline has come (the network's deadline may fire
// a moment before the context marks itself done).
func callerLeft(parent context.Context) bool {
	if parent.Err() != nil {
		return true
	}
	dl, ok := parent.Deadline()
	return ok && !time.Now().Before(dl)
}

// Put queues page (or part) k for Redis; it never blocks. It is dropped
// (counted as skipped) when the queue is full — before it is compressed,
// so that a dead or slow Redis costs the reader nothing once the queue
// has filled.
func (t *Tier) Put(k cache.PageKey, data []byte) {
	if t.queued.Load() >= t.cfg.QueueBytes || len(t.puts) == cap(t.puts) {
		t.skipped.Add(1)
		return
	}
	entry, ok := hostcache.Encode(k, data)
	if !ok {
		return
	}
	t.queue(put{key: key(k), entry: entry})
}

func (t *Tier) queue(p put) {
	select {
	case <-t.closing:
		t.skipped.Add(1)
		return
	default:
	}
	n := int64(len(p.entry))
	if t.queued.Add(n) > t.cfg.QueueBytes {
		t.queued.Add(-n)
		t.skipped.Add(1)
		return
	}
	select {
	case t.puts <- p:
	default: // Redis is slower than our fetches: skip this one
		t.queued.Add(-n)
		t.skipped.Add(1)
	}
}

// writer sends what is queued until Close, then what is left in the
// queue (puts is never closed, so a Put racing with Close cannot panic).
func (t *Tier) writer() {
	defer t.wg.Done()
	for {
		select {
		case p := <-t.puts:
			t.write(p)
		case <-t.closing:
			for {
				select {
				case p := <-t.puts:
					t.write(p)
				default:
					return
				}
			}
		}
	}
}

func (t *Tier) write(p put) {
	t.queued.Add(-int64(len(p.entry)))
	deadline, ok := t.waitWrites()
	if !ok {
		t.skipped.Add(1)
		return
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	var err error
	if p.entry == nil {
		err = t.client.Del(ctx, p.key).Err()
	} else {
		err = t.client.Set(ctx, p.key, p.entry, t.cfg.TTL).Err()
	}
	cancel()
	switch {
	case err != nil && t.drainBy.Load() != 0 && !time.Now().Before(deadline): // Close's time is up
		t.skipped.Add(1)
	case err != nil:
		t.failed(&t.writesDownUntil, time.Now(), "set", err)
	case p.entry != nil:
		t.writes.Add(1)
	}
}

// waitWrites waits until the writer's rest is over and returns the next
// write's deadline; false when closing and the rest, or the drain, leaves
// no time.
func (t *Tier) waitWrites() (time.Time, bool) {
	for {
		until := t.writesDownUntil.Load()
		wait := time.Until(time.Unix(0, until))
		if wait <= 0 {
			break
		}
		if by := t.drainBy.Load(); by != 0 { // closing
			if until >= by {
				return time.Time{}, false // the rest outlasts the drain
			}
			time.Sleep(wait)
			continue
		}
		timer := time.NewTimer(wait)
		select {
		case <-timer.C:
		case <-t.closing: // the drain's bound may come first: look again
			timer.Stop()
		}
	}
	deadline := time.Now().Add(t.cfg.WriteTimeout)
	if by := t.drainBy.Load(); by != 0 {
		if !time.Now().Before(time.Unix(0, by)) {
			return time.Time{}, false
		}
		deadline = time.Unix(0, min(by, deadline.UnixNano()))
	}
	return deadline, true
}

// resting reports whether reads skip Redis now.
func (t *Tier) resting() bool {
	if t.now().UnixNano() < t.readsDownUntil.Load() {
		t.skipped.Add(1)
		return true
	}
	return false
}

// failed counts a failure and rests reads or the writer (downUntil) from
// now on; the first failure of a streak is logged.
func (t *Tier) failed(downUntil *atomic.Int64, now time.Time, op string, err error) {
	t.errs.Add(1)
	if downUntil.Swap(now.Add(rest).UnixNano()) < now.Add(-rest).UnixNano() {
		t.cfg.Log.Warn("redis cache "+op+" failed; skipping it for a second", "err", err)
	}
}

// Stats returns a snapshot of the counters.
func (t *Tier) Stats() Stats {
	return Stats{Hits: t.hits.Load(), Misses: t.misses.Load(), Corrupt: t.corrupt.Load(),
		Errors: t.errs.Load(), Writes: t.writes.Load(), Skipped: t.skipped.Load()}
}

// Close sends what is queued, within Config.DrainTimeout (plus what is
// left of a write under way, at most Config.WriteTimeout), and
// disconnects. A Put after it starts is skipped; a second Close does
// nothing.
func (t *Tier) Close() {
	t.closeOnce.Do(func() {
		t.drainBy.Store(time.Now().Add(t.cfg.DrainTimeout).UnixNano()) // before closing is closed
		close(t.closing)
		t.wg.Wait()
		_ = t.client.Close()
	})
}
