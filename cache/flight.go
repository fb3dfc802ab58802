package cache

import (
	"context"
	"sync"
	"sync/atomic"
)

// Flights de-duplicates concurrent loads by key. The zero value is ready.
type Flights struct {
	mu sync.Mutex // protects the following
	m  map[string]*call

	wg     sync.WaitGroup
	loads  atomic.Int64 // loader invocations
	shared atomic.Int64 // callers served by another caller's load
}

type call struct {
	done chan struct{}
	val  any
	err  error
}

// Do returns the result of fn for key, running fn at most once for all
// concurrent callers with that key. fn runs in its own goroutine and must
// bound its own duration; a caller whose ctx ends returns ctx.Err() at once
// while the load finishes for the others.
func (f *Flights) Do(ctx context.Context, key string, fn func() (any, error)) (any, error) {
	c, owner := f.join(key)
	if owner {
		f.loads.Add(1)
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			val, err := fn()
			f.finish(key, c, val, err)
		}()
	} else {
		f.shared.Add(1)
	}
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// DoBatch claims the keys nobody is loading and starts fn with them in
// its own goroutine; it returns the claimed keys at once. Do calls for a
// claimed key, from now on, wait for fn. fn returns a value per key; keys
// it leaves out get its error (or ErrNotLoaded). Keys already in flight are
// skipped, and nothing runs when none is left.
func (f *Flights) DoBatch(keys []string, fn func(claimed []string) (map[string]any, error)) []string {
	f.mu.Lock()
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
	f.mu.Unlock()
	if len(claimed) == 0 {
		return nil
	}
	f.loads.Add(1)
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		vals, err := fn(claimed)
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
		return c, false
	}
	c := &call{done: make(chan struct{})}
	f.m[key] = c
	return c, true
}

func (f *Flights) finish(key string, c *call, val any, err error) {
	c.val, c.err = val, err
	f.mu.Lock()
	delete(f.m, key)
	f.mu.Unlock()
	close(c.done)
}

// Wait blocks until every load started by Do or DoBatch has returned.
func (f *Flights) Wait() { f.wg.Wait() }

// Loads is how many times a loader ran; Shared is how many callers were
// served by a load another caller started.
func (f *Flights) Loads() int64  { return f.loads.Load() }
func (f *Flights) Shared() int64 { return f.shared.Load() }
