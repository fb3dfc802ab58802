package refresh

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromafs/chromafs/tree"
	"github.com/chromafs/chromafs/treeload"
)

// source is a stored tree whose stamp and load can be changed or broken.
type source struct {
	mu            sync.Mutex // protects the following
	stamp         string
	stampErr      error
	loadErr       error
	stamps, loads int
	applied       []string
}

func (s *source) config() Config {
	return Config{
		Stamp: func(context.Context) (string, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.stamps++
			return s.stamp, s.stampErr
		},
		Load: func(context.Context) (treeload.Result, error) {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.loads++
			if s.loadErr != nil {
				return treeload.Result{}, s.loadErr
			}
			return treeload.Result{Tree: &tree.Tree{Version: "v-" + s.stamp, Files: 3}, Stamp: s.stamp}, nil
		},
		Apply: func(t *tree.Tree) int {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.applied = append(s.applied, t.Version)
			return 7
		},
	}
}

func (s *source) set(f func(*source)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func TestPoll(t *testing.T) {
	src := &source{stamp: "a"}
	r := New(src.config(), &tree.Tree{Version: "v-a"}, "a")
	defer r.Close()
	if r.Poll() || src.loads != 0 {
		t.Fatalf("an unchanged stamp loaded the tree (%d loads)", src.loads)
	}
	src.set(func(s *source) { s.stamp = "b" })
	if !r.Poll() {
		t.Fatal("a changed stamp did not refresh")
	}
	st := r.Stats()
	if st.Version != "v-b" || st.Refreshes != 1 || st.Invalidated != 7 || st.Polls != 2 || st.LastRefresh.IsZero() {
		t.Errorf("stats after a refresh: %+v", st)
	}
	src.set(func(s *source) { s.stamp, s.loadErr = "c", errors.New("corrupt tree") })
	if r.Poll() || r.Stats().Failures != 1 || r.Stats().Version != "v-b" {
		t.Errorf("a failed load: stats %+v; want the old version kept and 1 failure", r.Stats())
	}
	src.set(func(s *source) { s.loadErr = nil })
	if !r.Poll() || r.Stats().Version != "v-c" {
		t.Errorf("the next poll after a failed load did not retry: %+v", r.Stats())
	}
	src.set(func(s *source) { s.stampErr = errors.New("unreachable") })
	if r.Poll() || r.Stats().Failures != 2 {
		t.Errorf("a failed poll: %+v", r.Stats())
	}
	if got := len(src.applied); got != 2 {
		t.Errorf("%d trees applied, want 2", got)
	}
}

// TestTriggerAndInterval: Trigger polls at once, the interval polls by
// itself, and Close stops both: once it returns, the polling goroutine is
// gone, and it polled nothing after.
func TestTriggerAndInterval(t *testing.T) {
	src := &source{stamp: "a"}
	cfg := src.config()
	var closed atomic.Bool // set once Close returned
	var late atomic.Int64  // polls that began after
	stamp := cfg.Stamp
	cfg.Stamp = func(ctx context.Context) (string, error) {
		if closed.Load() {
			late.Add(1)
		}
		return stamp(ctx)
	}
	r := New(cfg, &tree.Tree{Version: "v-a"}, "a")
	r.Start()
	src.set(func(s *source) { s.stamp = "b" })
	r.Trigger()
	waitFor(t, "the triggered refresh", func() bool { return r.Stats().Version == "v-b" })
	closes(t, r)

	cfg.Interval = 20 * time.Millisecond
	r = New(cfg, &tree.Tree{Version: "v-b"}, "b")
	r.Start()
	src.set(func(s *source) { s.stamp = "c" })
	waitFor(t, "the interval's refresh", func() bool { return r.Stats().Version == "v-c" })
	closes(t, r)
	closed.Store(true)
	polls := r.Stats().Polls
	r.Trigger()
	waitFor(t, "the polling goroutine to end after Close", func() bool { return !pollerRuns() })
	if n := late.Load(); n != 0 || r.Stats().Polls != polls {
		t.Errorf("polls went on after Close: %d stamps asked, %d polls counted after it", n, r.Stats().Polls-polls)
	}
}

// closes closes r, failing the test if Close does not return within a
// minute (a guard against a hang, not a measure).
func closes(t *testing.T, r *Refresher) {
	t.Helper()
	done := make(chan struct{})
	go func() { r.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("Close never returned")
	}
}

// pollerRuns reports whether a Refresher's polling goroutine is alive.
func pollerRuns() bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), "refresh.(*Refresher).run(")
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestUnchecked: a mount serving a version it has not checked polls at
// Start even with no Interval, retries a failed poll (a trigger retries at
// once), and stops retrying once a poll answers.
func TestUnchecked(t *testing.T) {
	src := &source{stamp: "b", stampErr: errors.New("unreachable")}
	cfg := src.config()
	cfg.Unchecked = true
	r := New(cfg, &tree.Tree{Version: "v-a"}, "a")
	r.Start()
	defer r.Close()
	waitFor(t, "a first poll at Start", func() bool { return r.Stats().Failures >= 1 })
	src.set(func(s *source) { s.stampErr = nil })
	r.Trigger()
	waitFor(t, "the current version swapped in", func() bool { return r.Stats().Refreshes == 1 })
	polls := r.Stats().Polls
	time.Sleep(50 * time.Millisecond) // nothing should happen: no Interval, no trigger
	if st := r.Stats(); st.Polls != polls || st.Version != "v-b" {
		t.Fatalf("polls went on after one answered: %+v (was %d polls)", st, polls)
	}

	// without Unchecked, no poll before a trigger or Interval
	src2 := &source{stamp: "a"}
	r2 := New(src2.config(), &tree.Tree{Version: "v-a"}, "a")
	r2.Start()
	defer r2.Close()
	time.Sleep(50 * time.Millisecond)
	if r2.Stats().Polls != 0 {
		t.Fatal("a checked mount polled at Start")
	}
}
