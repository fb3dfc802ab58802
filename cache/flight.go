package cache

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Flights de-duplicates concurrent loads by key. The zero value is ready;
// Base, when set before use, is the parent context of every load (cancel it
// to stop them all).
type Flights struct {
	Base context.Context

	mu sync.Mutex // protects the following
	m  map[string]*call

	wg     sync.WaitGroup
	loads  atomic.Int64 // loader invocations
	shared atomic.Int64 // callers served by another caller's load
}

type call struct {
	done    chan struct{}
	val     any
	err     error
	waiters int                // callers of Do waiting for it; guarded by Flights.mu
	ctx     context.Context    // the load's context (single loads)
	cancel  context.CancelFunc // nil for batches: they are not abandoned
}

// ErrPanic wraps a panic in a loader: the callers get an error, the
// process keeps serving.
var ErrPanic = fmt.Errorf("internal error")

// Do returns the result of fn for key, running fn at most once for all
// concurrent callers with that key. fn runs in its own goroutine with a
// context that ends when Base ends or when every caller has gone (their
// ctx ended: a reader was interrupted or killed). A caller whose ctx ends
// returns ctx.Err() at once.
func (f *Flights) Do(ctx context.Context, key string, fn func(context.Context) (any, error)) (any, error) {
	c, owner := f.join(key)
	if owner {
		f.loads.Add(1)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			defer c.cancel()
			val, err := safe(func() (any, error) { return fn(c.ctx) })
			f.finish(key, c, val, err)
		}()
	} else {
		f.shared.Add(1)
	}
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		f.leave(key, c)
		return nil, ctx.Err()
	}
}

// DoBatch claims the keys nobody is loading and starts fn with them in
// its own goroutine; it returns the claimed keys at once. Do calls for a
// claimed key, from now on, wait for fn. fn returns a value per key; keys
// it leaves out get its error (or ErrNotLoaded). Keys already in flight are
// skipped, and nothing runs when none is left. A batch runs until fn
// returns or Base ends, whoever waits for it.
func (f *Flights) DoBatch(keys []string, fn func(ctx context.Context, claimed []string) (map[string]any, error)) []string {
	claimed, calls := f.claim(keys)
	if len(claimed) == 0 {
		return nil
	}
	f.loads.Add(1)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		var vals map[string]any
		_, err := safe(func() (any, error) {
			var err error
			vals, err = fn(f.base(), claimed)
			return nil, err
		})
		for i, k := range claimed {
			v, ok := vals[k]
			e := err
			if !ok && e == nil {
				e = ErrNotLoaded
			}
			f.finish(k, calls[i], v, e)
		}
	}()
	return claimed
}

func (f *Flights) claim(keys []string) ([]string, []*call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]*call{}
	}
	claimed := make([]string, 0, len(keys))
	calls := make([]*call, 0, len(keys))
	for _, k := range keys {
		if _, busy := f.m[k]; busy {
			continue
		}
		c := &call{done: make(chan struct{})}
		f.m[k] = c
		claimed = append(claimed, k)
		calls = append(calls, c)
	}
	return claimed, calls
}

// safe runs fn, turning a panic into an error.
func safe(fn func() (any, error)) (val any, err error) {
	defer func() {
		if r := recover(); r != nil {
			val, err = nil, fmt.Errorf("%w: panic in a load: %v", ErrPanic, r)
		}
	}()
	return fn()
}

func (f *Flights) base() context.Context {
	if f.Base != nil {
		return f.Base
	}
	return context.Background()
}

// ErrNotLoaded is the result for a batch key its loader did not return.
var ErrNotLoaded = errNotLoaded{}

type errNotLoaded struct{}

func (errNotLoaded) Error() string { return "not loaded by the batch" }

func (f *Flights) join(key string) (*call, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]*call{}
	}
	if c, ok := f.m[key]; ok {
		c.waiters++
		return c, false
	}
	c := &call{done: make(chan struct{}), waiters: 1}
	c.ctx, c.cancel = context.WithCancel(f.base())
	f.m[key] = c
	return c, true
}

// leave drops a caller that stopped waiting. When the last caller of a
// single load leaves, the load is cancelled and forgotten, so the next
// caller starts afresh instead of inheriting the cancellation.
func (f *Flights) leave(key string, c *call) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c.waiters--
	if c.waiters > 0 || c.cancel == nil {
		return
	}
	if f.m[key] == c {
		delete(f.m, key)
	}
	c.cancel()
}

func (f *Flights) finish(key string, c *call, val any, err error) {
	c.val, c.err = val, err
	f.mu.Lock()
	if f.m[key] == c {
		delete(f.m, key)
	}
	f.mu.Unlock()
	close(c.done)
}

// Wait blocks until every load started by Do or DoBatch has returned.
func (f *Flights) Wait() { f.wg.Wait() }

// Loads is how many times a loader ran; Shared is how many callers were
// served by a load another caller started.
func (f *Flights) Loads() int64  { return f.loads.Load() }
func (f *Flights) Shared() int64 { return f.shared.Load() }
