package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func key(i int) Key { return Key{Collection: "c", Version: "v1", Page: fmt.Sprint("p", i), Chunk: 0} }

func TestByteBound(t *testing.T) {
	c := bare(100).New(0)
	for i := 0; i < 10; i++ {
		c.Add(key(i), make([]byte, 30))
	}
	st := c.Stats()
	if st.Bytes > 100 || st.Entries != 3 || st.Evictions != 7 {
		t.Fatalf("stats after overfill: %+v", st)
	}
	if _, ok := c.Get(key(9)); !ok {
		t.Error("newest entry evicted")
	}
	if _, ok := c.Get(key(0)); ok {
		t.Error("oldest entry kept")
	}
	c.Add(key(99), make([]byte, 101))
	if c.Contains(key(99)) {
		t.Error("value larger than the cache stored")
	}
	if st := c.Stats(); st.Hits != 1 || st.Misses != 1 {
		t.Errorf("hits/misses = %d/%d", st.Hits, st.Misses)
	}
}

func TestLRUOrder(t *testing.T) {
	c := bare(90).New(0)
	c.Add(key(1), make([]byte, 30))
	c.Add(key(2), make([]byte, 30))
	c.Add(key(3), make([]byte, 30))
	c.Get(key(1)) // 1 is now the most recent
	c.Add(key(4), make([]byte, 30))
	if !c.Contains(key(1)) || c.Contains(key(2)) {
		t.Error("eviction did not follow recency")
	}
	c.Add(key(4), make([]byte, 10)) // replace shrinks the byte count
	if st := c.Stats(); st.Bytes != 70 {
		t.Errorf("bytes after replace = %d, want 70", st.Bytes)
	}
	if c.Room() != 20 {
		t.Errorf("room = %d", c.Room())
	}
}

func TestKeysNeverCollide(t *testing.T) {
	c := bare(1 << 10).New(0)
	a := Key{Collection: "c", Version: "v1", Page: "p", Chunk: 0}
	b := a
	b.Version = "v2"
	c.Add(a, []byte("old"))
	if c.Contains(b) {
		t.Error("a new page version sees the old version's value")
	}
}

func TestFlightsDeduplicate(t *testing.T) {
	var f Flights
	var calls atomic.Int32
	release := make(chan struct{})
	var wg sync.WaitGroup
	results := make([]any, 64)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _ = f.Do(context.Background(), "page", func(context.Context) (any, error) {
				calls.Add(1)
				<-release
				return "content", nil
			})
		}()
	}
	waitFor(t, func() bool { return f.Shared() == 63 })
	close(release)
	wg.Wait()
	if calls.Load() != 1 || f.Loads() != 1 {
		t.Errorf("%d loads for 64 concurrent readers", calls.Load())
	}
	for i, r := range results {
		if r != "content" {
			t.Fatalf("reader %d got %v", i, r)
		}
	}
}

func TestFlightsCancelledCallerReturns(t *testing.T) {
	var f Flights
	var loadCancelled atomic.Bool
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := f.Do(ctx, "k", func(lctx context.Context) (any, error) {
			select {
			case <-release:
				return 1, nil
			case <-lctx.Done(): // the only caller left: the load is cancelled
				loadCancelled.Store(true)
				return nil, lctx.Err()
			}
		})
		done <- err
	}()
	waitFor(t, func() bool { return f.Loads() == 1 })
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled caller still waiting")
	}
	f.Wait()
	if !loadCancelled.Load() {
		t.Error("an abandoned load was not cancelled")
	}
	close(release)
	v, err := f.Do(context.Background(), "k", func(context.Context) (any, error) { return 2, nil })
	if err != nil || v != 2 {
		t.Errorf("a new caller after an abandoned load got %v, %v; want a fresh load", v, err)
	}
}

func TestPanicBecomesError(t *testing.T) {
	var f Flights
	_, err := f.Do(context.Background(), "k", func(context.Context) (any, error) { panic("boom") })
	if !errors.Is(err, ErrPanic) {
		t.Errorf("err = %v, want ErrPanic", err)
	}
	claimed := f.DoBatch([]string{"a"}, func(context.Context, []string) (map[string]any, error) { panic("boom") })
	f.Wait()
	if len(claimed) != 1 {
		t.Fatal("batch not started")
	}
	if v, err := f.Do(context.Background(), "a", func(context.Context) (any, error) { return 1, nil }); err != nil || v != 1 {
		t.Errorf("after a panicking batch: %v %v", v, err)
	}
}

func TestBatchSharesKeys(t *testing.T) {
	var f Flights
	started := make(chan struct{})
	release := make(chan struct{})
	f.DoBatch([]string{"a", "b"}, func(_ context.Context, claimed []string) (map[string]any, error) {
		close(started)
		<-release
		return map[string]any{"a": "A"}, nil
	})
	<-started
	if claimed := f.DoBatch([]string{"a", "c"}, func(_ context.Context, c []string) (map[string]any, error) {
		return map[string]any{"c": "C"}, nil
	}); len(claimed) != 1 || claimed[0] != "c" {
		t.Errorf("second batch claimed %v, want [c]", claimed)
	}
	var got any
	var gotErr error
	var loaded atomic.Bool
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		got, _ = f.Do(context.Background(), "a", func(context.Context) (any, error) { loaded.Store(true); return "own", nil })
	}()
	go func() {
		defer wg.Done()
		_, gotErr = f.Do(context.Background(), "b", func(context.Context) (any, error) { return "own", nil })
	}()
	waitFor(t, func() bool { return f.Shared() >= 2 })
	close(release)
	wg.Wait()
	if got != "A" || loaded.Load() {
		t.Errorf("reader of a batch key got %v (own load %v), want the batch's value", got, loaded.Load())
	}
	if !errors.Is(gotErr, ErrNotLoaded) {
		t.Errorf("reader of a key the batch left out: err %v, want ErrNotLoaded", gotErr)
	}
	f.Wait()
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
		time.Sleep(time.Millisecond)
	}
}
