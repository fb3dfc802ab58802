package content

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromafs/chromafs/tree"
)

// TestBatchesCutAtChunks: a batch holds at most batchPages pages and
// BatchChunks chunks, a page of more chunks is a batch of its own, and
// every page is in one batch, in order.
func TestBatchesCutAtChunks(t *testing.T) {
	e := &Engine{cfg: Config{BatchChunks: 10}}
	files := func(chunks ...int) []*tree.File {
		out := make([]*tree.File, len(chunks))
		for i, n := range chunks {
			out[i] = &tree.File{Slug: fmt.Sprint(i), Chunks: make([]int64, n)}
		}
		return out
	}
	many := make([]int, batchPages+1) // unknown or empty: counted as one chunk each
	tests := []struct {
		name   string
		chunks []int
		limit  int   // BatchChunks, when not 10
		want   []int // pages per batch
	}{
		{"none", nil, 0, nil},
		{"fits", []int{3, 3, 4}, 0, []int{3}},
		{"cut at the chunks", []int{3, 3, 4, 1}, 0, []int{3, 1}},
		{"a page past the limit alone", []int{2, 25, 2}, 0, []int{1, 1, 1}},
		{"one chunk each", many, 0, []int{10, 10, 10, 10, 10, 10, 10, 10, 10, 10, 1}},
		{"cut at the pages", many, 1000, []int{batchPages, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := e
			if tt.limit != 0 {
				e = &Engine{cfg: Config{BatchChunks: tt.limit}}
			}
			in := files(tt.chunks...)
			var got []int
			var flat []*tree.File
			for _, b := range e.batches(in) {
				got = append(got, len(b))
				flat = append(flat, b...)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("batches of %v pages, want %v", got, tt.want)
			}
			if len(flat) != len(in) {
				t.Fatalf("%d pages in the batches, want %d", len(flat), len(in))
			}
			for i := range in {
				if flat[i] != in[i] {
					t.Fatalf("page %d out of order", i)
				}
			}
		})
	}
}

// concurrencySource counts the requests in flight and keeps each one
// until release is closed.
type concurrencySource struct {
	*fakeSource
	release        chan struct{}
	inflight, peak atomic.Int64
	batches        atomic.Int64
}

func (s *concurrencySource) hold(ctx context.Context) error {
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for {
		p := s.peak.Load()
		if n <= p || s.peak.CompareAndSwap(p, n) {
			break
		}
	}
	select {
	case <-s.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *concurrencySource) FetchPages(ctx context.Context, refs []Ref) (map[string]Page, error) {
	s.batches.Add(1)
	if err := s.hold(ctx); err != nil {
		return nil, err
	}
	return s.fakeSource.FetchPages(ctx, refs)
}

// TestWalkBatchesLeaveAReaderASlot: a walk's group of many chunks is cut
// into many batches, one request each, but no more of them load at once
// than Concurrency-1: a reader of a page outside them gets the slot left
// at once, not after the batches queued before it.
func TestWalkBatchesLeaveAReaderASlot(t *testing.T) {
	other := strings.Repeat("elsewhere!", 30) // past one window: in no batch
	pages := map[string]string{"solo/other": other}
	for i := 0; i < 60; i++ {
		pages[fmt.Sprintf("img/p%03d", i)] = strings.Repeat("x", 50) // 5 chunks of 10 bytes
	}
	tr, fake := fixture(t, 10, pages)
	src := &concurrencySource{fakeSource: fake, release: make(chan struct{})}
	const conc = 4
	e := newFS(t, tr, src, Config{Concurrency: conc, BatchChunks: 10, WindowBytes: 100, Prefetch: PrefetchDir})
	e.Prefetch(tr.Lookup("img"), nil)
	// 60 pages of 5 chunks: 30 batches of two pages, conc-1 of them held
	deadline := time.Now().Add(10 * time.Second)
	for src.inflight.Load() < conc-1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := src.inflight.Load(); n != conc-1 {
		t.Fatalf("%d batches in flight, want %d (Concurrency-1)", n, conc-1)
	}
	var got []byte
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		got, err = read(t, e, tr, "solo/other.md", 0, 100) // its first window: its own request
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a reader waited behind the walk's batches")
	}
	if err != nil || string(got) != other[:100] {
		t.Fatalf("read %q, %v", got, err)
	}
	close(src.release)
	e.flights.Wait()
	if n := src.batches.Load(); n != 30 {
		t.Errorf("%d batch requests, want 30 (two pages of 5 chunks each)", n)
	}
	if p := src.peak.Load(); p > conc-1 {
		t.Errorf("%d batches in flight at once, want at most %d", p, conc-1)
	}
	for i := 0; i < 60; i++ {
		if !e.cached(tr.Lookup(fmt.Sprintf("img/p%03d.md", i)).File) {
			t.Fatalf("page %d not loaded by the walk", i)
		}
	}
}

// TestScanLoadsLargePagesOfAncestors: a walk that steps on starts the
// first windows of the large pages of the directories it went through and
// will come back to (an ancestor's, read between its subdirectories), not
// only of the lookahead's own directories; a walk that did not go through
// the ancestor (grep -r of one subdirectory) leaves them alone.
func TestScanLoadsLargePagesOfAncestors(t *testing.T) {
	pages := map[string]string{"m-lock": strings.Repeat("0123456789", 300), "a-readme": "small"} // m-lock: 30 chunks, 3 windows
	for _, d := range []string{"a", "b", "z"} {
		for i := 0; i < 100; i++ {
			pages[fmt.Sprintf("%s/p%03d", d, i)] = "small"
		}
	}
	for _, tt := range []struct {
		name    string
		walk    []string // the directories Prefetch is told of, in order
		another bool     // of another view's tree than the plan's (a daemon's)
		wants   int      // windows of m-lock loaded
	}{
		{"through the root", []string{"", "a", "b"}, false, 3},
		{"through the root, another view's tree", []string{"", "a", "b"}, true, 3},
		{"below the root only", []string{"a", "b", "z"}, false, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tr, src := fixture(t, 100, pages)
			walked := tr
			if tt.another {
				walked, _ = fixture(t, 100, pages)
			}
			e := newFS(t, tr, src, Config{Lookahead: 1, WindowBytes: 1000, Prefetch: PrefetchDir})
			windows := func() int {
				src.mu.Lock()
				defer src.mu.Unlock()
				return len(src.idxs)
			}
			e.Prefetch(walked.Lookup(tt.walk[0]), nil) // the walk's first group
			e.flights.Wait()
			if n := windows(); n != 0 {
				t.Fatalf("a read in one directory loaded %d windows of a large page", n)
			}
			for _, d := range tt.walk[1:] { // steps on
				e.Prefetch(walked.Lookup(d), nil)
			}
			if _, scanned := e.plan.Load().scannedDirs.Load(tr.Root); scanned != (tt.wants > 0) {
				t.Fatalf("the root's large pages scanned: %v, want %v", scanned, tt.wants > 0)
			}
			deadline := time.Now().Add(10 * time.Second)
			for windows() < tt.wants && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			e.flights.Wait()
			if n := windows(); n != tt.wants {
				t.Fatalf("the walk loaded %d windows of the root's large page, want %d", n, tt.wants)
			}
			if tt.wants == 0 {
				return
			}
			before := src.calls.Load()
			if data, err := read(t, e, tr, "m-lock.md", 0, 3000); err != nil || string(data) != pages["m-lock"] {
				t.Fatalf("the large page read back wrong: %v", err)
			}
			if n := src.calls.Load() - before; n != 0 {
				t.Errorf("reading the scanned page made %d requests, want none", n)
			}
		})
	}
}
