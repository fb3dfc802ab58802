package refresh

import (
	"context"
	"errors"
	"sync"
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
// itself, and Close stops both.
func TestTriggerAndInterval(t *testing.T) {
	src := &source{stamp: "a"}
	cfg := src.config()
	r := New(cfg, &tree.Tree{Version: "v-a"}, "a")
	r.Start()
	src.set(func(s *source) { s.stamp = "b" })
	r.Trigger()
	waitFor(t, func() bool { return r.Stats().Version == "v-b" })
	r.Close()

	cfg.Interval = 20 * time.Millisecond
	r = New(cfg, &tree.Tree{Version: "v-b"}, "b")
	r.Start()
	src.set(func(s *source) { s.stamp = "c" })
	waitFor(t, func() bool { return r.Stats().Version == "v-c" })
	r.Close()
	polls := r.Stats().Polls
	time.Sleep(60 * time.Millisecond)
	if r.Stats().Polls != polls {
		t.Errorf("polls went on after Close")
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		time.Sleep(2 * time.Millisecond)
	}
}
