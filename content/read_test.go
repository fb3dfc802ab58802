package content

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/tree"
)

// fakeSource serves pages from memory and counts requests; it stands in
// for Chroma in tests of the read logic only.
type fakeSource struct {
	pages   map[string][]string // slug -> chunks
	calls   atomic.Int64
	chunks  atomic.Int64  // chunks returned
	gate    chan struct{} // when non-nil, requests wait for it
	mu      sync.Mutex    // protects the following
	idxs    [][]int       // every ranged request's chunk indexes
	failErr error         // returned by every request while set
}

func (s *fakeSource) FetchPage(ctx context.Context, ref Ref, idx []int) ([]string, error) {
	s.calls.Add(1)
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if idx != nil {
		s.idxs = append(s.idxs, idx)
	}
	s.mu.Unlock()
	all := s.pages[ref.Slug]
	if idx == nil {
		s.chunks.Add(int64(len(all)))
		return all, nil
	}
	out := make([]string, len(idx))
	for i, k := range idx {
		out[i] = all[k]
	}
	s.chunks.Add(int64(len(out)))
	return out, nil
}

func (s *fakeSource) FetchPages(ctx context.Context, refs []Ref) (map[string]Page, error) {
	s.calls.Add(1)
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	out := map[string]Page{}
	for _, r := range refs {
		out[r.Slug] = Page{Chunks: s.pages[r.Slug]}
		s.chunks.Add(int64(len(s.pages[r.Slug])))
	}
	return out, nil
}

func (s *fakeSource) setFail(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failErr = err
}

func (s *fakeSource) wait(ctx context.Context) error {
	s.mu.Lock()
	err := s.failErr
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// fixture builds a tree and a source from page contents. Pages whose slug
// starts with "foreign/" have no sizes or chunk lengths in the tree.
func fixture(t *testing.T, chunkSize int, pages map[string]string) (*tree.Tree, *fakeSource) {
	t.Helper()
	src := &fakeSource{pages: map[string][]string{}}
	entries := map[string]tree.Entry{}
	for slug, content := range pages {
		var chunks []string
		for rest := content; rest != ""; {
			n := min(chunkSize, len(rest))
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		src.pages[slug] = chunks
		e := tree.Entry{IsPublic: true, Path: slug + ".md"}
		if !strings.HasPrefix(slug, "foreign/") {
			size := int64(len(content))
			e.Size = &size
			e.Chunks = []int64{}
			for _, c := range chunks {
				e.Chunks = append(e.Chunks, int64(len(c)))
			}
			sum := sha256.Sum256([]byte(content))
			e.SHA256 = hex.EncodeToString(sum[:])
		}
		entries[slug] = e
	}
	raw, err := tree.Encode(entries)
	if err != nil {
		t.Fatal(err)
	}
	d, err := tree.Decode(raw, tree.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return tree.BuildVisible(d, nil, tree.DefaultLimits), src
}

func newFS(t *testing.T, tr *tree.Tree, src Source, cfg Config) *Engine {
	cfg.Identity = "test"
	f := New(tr, src, cfg)
	t.Cleanup(f.Close)
	return f
}

func read(t *testing.T, f *Engine, tr *tree.Tree, path string, off int64, n int) ([]byte, error) {
	t.Helper()
	node := tr.Lookup(path)
	if node == nil {
		t.Fatalf("%s not in tree", path)
	}
	buf := make([]byte, n)
	got, err := f.ReadAt(context.Background(), node.File, buf, off)
	return buf[:got], err
}

func TestReadRanges(t *testing.T) {
	content := strings.Repeat("0123456789abcdef", 4096) // 64 KiB
	tr, src := fixture(t, 1000, map[string]string{"big": content, "empty": ""})
	f := newFS(t, tr, src, Config{WindowBytes: 4000})
	tests := []struct {
		off int64
		n   int
	}{{0, 1}, {0, 4096}, {999, 2}, {1000, 1000}, {65000, 4096}, {65535, 10}, {12345, 30000}, {0, 70000}}
	for _, tc := range tests {
		got, err := read(t, f, tr, "big.md", tc.off, tc.n)
		end := min(int(tc.off)+tc.n, len(content))
		if err != nil || string(got) != content[tc.off:end] {
			t.Errorf("read(%d, %d): %d bytes, err %v; want %d bytes", tc.off, tc.n, len(got), err, end-int(tc.off))
		}
	}
	if got, err := read(t, f, tr, "big.md", 1<<20, 10); len(got) != 0 || err != nil {
		t.Errorf("read past EOF: %q, %v", got, err)
	}
	before := src.calls.Load()
	if got, err := read(t, f, tr, "empty.md", 0, 10); len(got) != 0 || err != nil || src.calls.Load() != before {
		t.Errorf("empty file: %q, %v, %d requests", got, err, src.calls.Load()-before)
	}
}

func TestRangedReadFetchesOnlyItsWindow(t *testing.T) {
	content := strings.Repeat("x", 50<<10) // 50 chunks of 1 KiB
	tr, src := fixture(t, 1024, map[string]string{"big": content})
	f := newFS(t, tr, src, Config{WindowBytes: 4096})
	if _, err := read(t, f, tr, "big.md", 0, 1024); err != nil {
		t.Fatal(err)
	}
	if src.calls.Load() != 1 || src.chunks.Load() != 4 {
		t.Errorf("reading the first KiB made %d requests for %d chunks; want 1 request for one 4-chunk window",
			src.calls.Load(), src.chunks.Load())
	}
	if _, err := read(t, f, tr, "big.md", 30<<10, 10); err != nil {
		t.Fatal(err)
	}
	// Readahead of the next windows may run meanwhile; the read's own
	// request is the window 28..31, and nothing before it was fetched.
	src.mu.Lock()
	defer src.mu.Unlock()
	found := false
	for _, idx := range src.idxs {
		found = found || (idx[0] == 28 && len(idx) == 4)
		if idx[0] > 0 && idx[0] < 28 {
			t.Errorf("a read at 30 KiB fetched chunks %v", idx)
		}
	}
	if !found {
		t.Errorf("read at 30 KiB fetched %v, want the window 28..31 among them", src.idxs)
	}
}

func TestConcurrentReadersShareOneRequest(t *testing.T) {
	tr, src := fixture(t, 1000, map[string]string{"p": strings.Repeat("y", 5000)})
	src.gate = make(chan struct{})
	f := newFS(t, tr, src, Config{})
	var wg sync.WaitGroup
	errs := make([]error, 64)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := read(t, f, tr, "p.md", 0, 5000)
			if err == nil && len(got) != 5000 {
				err = fmt.Errorf("short read %d", len(got))
			}
			errs[i] = err
		}()
	}
	for f.Stats().Shared < 63 {
		time.Sleep(time.Millisecond)
	}
	close(src.gate)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("reader %d: %v", i, err)
		}
	}
	if n := src.calls.Load(); n != 1 {
		t.Errorf("64 concurrent readers made %d requests, want 1", n)
	}
}

func TestFailuresAreEIOAndBounded(t *testing.T) {
	tr, src := fixture(t, 1000, map[string]string{"p": "hello"})
	src.setFail(fmt.Errorf("boom: %w", ErrTemporary))
	f := newFS(t, tr, src, Config{Retries: 2, Timeout: time.Second, FailTTL: -1})
	_, err := read(t, f, tr, "p.md", 0, 10)
	if !errors.Is(err, ErrTemporary) {
		t.Errorf("err = %v, want the source's error (EIO)", err)
	}
	// bounded in time too: a backoff that would pass the read's budget
	// (Timeout × attempts) ends the retries, so three attempts are three
	// that fitted in it
	if src.calls.Load() != 3 {
		t.Errorf("%d attempts, want 1 + 2 retries", src.calls.Load())
	}
	src.calls.Store(0)
	src.setFail(fmt.Errorf("no: %w", errUnauthorized))
	if _, err := read(t, f, tr, "p.md", 0, 10); err == nil || src.calls.Load() != 1 {
		t.Errorf("non-retryable error: %v after %d attempts, want 1 attempt", err, src.calls.Load())
	}
	src.setFail(nil)
	if got, err := read(t, f, tr, "p.md", 0, 10); err != nil || string(got) != "hello" {
		t.Errorf("no recovery after the server returned: %q, %v", got, err)
	}
}

func TestLengthMismatchIsAnError(t *testing.T) {
	tr, src := fixture(t, 4, map[string]string{"p": "abcdefgh"})
	src.pages["p"][1] = "efg" // shorter than the tree says
	f := newFS(t, tr, src, Config{})
	if _, err := read(t, f, tr, "p.md", 0, 8); !errors.Is(err, ErrBadPage) {
		t.Errorf("err = %v, want ErrBadPage", err)
	}
}

func TestCancelledReaderReturnsEINTR(t *testing.T) {
	tr, src := fixture(t, 1000, map[string]string{"p": "hello"})
	src.gate = make(chan struct{})
	defer close(src.gate)
	f := newFS(t, tr, src, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	node := tr.Lookup("p.md")
	done := make(chan error)
	go func() {
		_, err := f.ReadAt(ctx, node.File, make([]byte, 5), 0)
		done <- err
	}()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled (EINTR)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled read did not return")
	}
}

func TestForeignPages(t *testing.T) {
	tr, src := fixture(t, 3, map[string]string{"foreign/a": "hello world", "foreign/b": "", "foreign/c": "xyz"})
	f := newFS(t, tr, src, Config{})
	a := tr.Lookup("foreign/a.md")
	if _, ok := a.File.Size(); ok {
		t.Fatal("foreign size should start unknown")
	}
	if err := f.EnsureSize(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]int64{"a": 11, "b": 0, "c": 3} {
		if s, ok := tr.Lookup("foreign/" + name + ".md").File.Size(); !ok || s != want {
			t.Errorf("size of %s = %d,%v want %d", name, s, ok, want)
		}
	}
	if src.calls.Load() != 1 {
		t.Errorf("sizes of a directory took %d requests, want 1 batch", src.calls.Load())
	}
	if got, err := read(t, f, tr, "foreign/a.md", 6, 100); err != nil || string(got) != "world" || src.calls.Load() != 1 {
		t.Errorf("read after size batch: %q %v, %d requests", got, err, src.calls.Load())
	}
}

func TestPrefetchDir(t *testing.T) {
	pages := map[string]string{}
	for i := 0; i < 250; i++ {
		pages[fmt.Sprintf("d/p%03d", i)] = strings.Repeat("z", 100+i)
	}
	pages["d/huge"] = strings.Repeat("h", 3<<20)
	tr, src := fixture(t, 1000, pages)
	f := newFS(t, tr, src, Config{})
	f.Prefetch(tr.Lookup("d"), nil)
	f.Prefetch(tr.Lookup("d"), nil) // once per directory
	f.flights.Wait()
	if src.calls.Load() != 3 {
		t.Errorf("prefetch of 250 pages took %d requests, want 3 batches of <= 100", src.calls.Load())
	}
	for i := 0; i < 250; i++ {
		p := fmt.Sprintf("d/p%03d.md", i)
		got, err := read(t, f, tr, p, 0, 1000)
		if err != nil || !bytes.Equal(got, []byte(pages[strings.TrimSuffix(p, ".md")])) {
			t.Fatalf("%s: %v", p, err)
		}
	}
	if src.calls.Load() != 3 {
		t.Errorf("reads after prefetch made %d more requests", src.calls.Load()-3)
	}
	if f.cached(tr.Lookup("d/huge.md").File) {
		t.Error("a page larger than one window was prefetched")
	}
}

func TestFirstReadPrefetchesItsDirectory(t *testing.T) {
	pages := map[string]string{}
	for i := 0; i < 50; i++ {
		pages[fmt.Sprintf("d/p%02d", i)] = strings.Repeat("q", 500+i)
	}
	tr, src := fixture(t, 1000, pages)
	f := newFS(t, tr, src, Config{})
	n := tr.Lookup("d/p07.md")
	f.Prefetch(n.Parent, n.File) // what a read through FUSE does first
	if got, err := read(t, f, tr, "d/p07.md", 0, 4096); err != nil || string(got) != pages["d/p07"] {
		t.Fatalf("read %q, %v", got, err)
	}
	f.flights.Wait()
	for i := 0; i < 50; i++ {
		if _, err := read(t, f, tr, fmt.Sprintf("d/p%02d.md", i), 0, 4096); err != nil {
			t.Fatal(err)
		}
	}
	if n := src.calls.Load(); n != 2 {
		t.Errorf("reading 50 files of one directory made %d requests, want 2 (the first file alone, the rest in one batch)", n)
	}
}

// dirsOfTen is the pages of dirs directories d00, d01, ... of ten pages
// p0-p9 each: a walk-order group every ten directories.
func dirsOfTen(dirs int) map[string]string {
	pages := map[string]string{}
	for d := 0; d < dirs; d++ {
		for i := 0; i < 10; i++ {
			pages[fmt.Sprintf("d%02d/p%d", d, i)] = "content"
		}
	}
	return pages
}

func TestPrefetchRunsAheadOfTheWalk(t *testing.T) {
	pages := dirsOfTen(60)
	tr, src := fixture(t, 1000, pages) // 600 files: 6 groups of 100
	f := newFS(t, tr, src, Config{Lookahead: 2})
	if n := len(f.plan.Load().groups); n != 6 {
		t.Fatalf("%d groups, want 6", n)
	}
	f.Prefetch(tr.Lookup("d00"), nil)
	f.flights.Wait()
	if n := src.calls.Load(); n != 3 {
		t.Errorf("first read started %d batches, want its group and 2 ahead", n)
	}
	for d := 1; d < 60; d++ { // the walk goes on: each new group extends the lookahead
		f.Prefetch(tr.Lookup(fmt.Sprintf("d%02d", d)), nil)
	}
	// A refill runs in a goroutine of its own and may be the one to send
	// a group: wait for every group to be sent, then for the loads.
	for deadline := time.Now().Add(10 * time.Second); src.calls.Load() < 6 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	f.flights.Wait()
	if n := src.calls.Load(); n != 6 {
		t.Errorf("walking 600 files made %d requests, want 6 (one per group)", n)
	}
	before := src.calls.Load()
	for d := 0; d < 60; d++ {
		if _, err := read(t, f, tr, fmt.Sprintf("d%02d/p3.md", d), 0, 100); err != nil {
			t.Fatal(err)
		}
	}
	if src.calls.Load() != before {
		t.Errorf("reads after the walk's prefetch made %d requests", src.calls.Load()-before)
	}
}

// TestWalkKeepsBatchesInFlight: once a walk has stepped on into the next
// group, each batch sent before the step that finishes with fewer than
// Lookahead prefetch batches left in flight sends the next group, without
// the walk moving again; batches that finish before any step, or above
// that many in flight, send nothing.
func TestWalkKeepsBatchesInFlight(t *testing.T) {
	pages := dirsOfTen(100)
	tr, src := fixture(t, 1000, pages) // 1,000 files: 10 groups of 100
	src.gate = make(chan struct{})
	f := newFS(t, tr, src, Config{Lookahead: 3})
	// Requests wait for the gate in the order they were sent (the order
	// Go hands a channel's blocked receivers over).
	release := func(want int64) {
		t.Helper()
		src.gate <- struct{}{}
		deadline := time.Now().Add(10 * time.Second)
		for src.calls.Load() < want && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond) // no more than want either
		if got := src.calls.Load(); got != want {
			t.Fatalf("%d requests, want %d", got, want)
		}
	}
	f.Prefetch(tr.Lookup("d00"), nil) // groups 0-3
	for deadline := time.Now().Add(10 * time.Second); src.calls.Load() < 4 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	release(4)                        // group 0, before any step: nothing
	f.Prefetch(tr.Lookup("d10"), nil) // steps into group 1: sends group 4
	release(5)                        // group 1: 3 left in flight, not fewer than Lookahead
	release(6)                        // group 2: 2 left: sends group 5
	release(7)                        // group 3: 2 left: sends group 6
	release(7)                        // group 4, sent after the step: nothing
	close(src.gate)
	f.flights.Wait()
	if n := src.calls.Load(); n != 7 {
		t.Fatalf("%d requests in all, want 7", n)
	}
}

// TestRefillStopsTwiceLookaheadAhead: refill sends groups up to twice
// Lookahead after the one the walk entered last, and no further.
func TestRefillStopsTwiceLookaheadAhead(t *testing.T) {
	pages := dirsOfTen(100)
	tr, src := fixture(t, 1000, pages) // 10 groups
	f := newFS(t, tr, src, Config{Lookahead: 2})
	p := f.plan.Load()
	for g := 0; g <= 3; g++ {
		p.prefetched.Store(g, struct{}{}) // the walk's own: groups 0-3
	}
	p.enter(0, 2)
	if !p.enter(1, 2) {
		t.Fatal("entering the next group is no step")
	}
	for range 4 { // a batch sent before the step, done, each time
		f.refill(p, 0)
		f.flights.Wait()
	}
	if n := src.calls.Load(); n != 2 {
		t.Fatalf("refill sent %d groups, want 2 (groups 4 and 5: twice Lookahead after group 1)", n)
	}
	if p.enter(9, 2) || p.enter(2, 2) {
		t.Error("a jump ahead, or back, counted as a step")
	}
}

// TestScanLoadsFirstWindowsOfLargePages: a walk that has moved into a
// second group (a scan such as grep -r) loads the first windows of the
// pages past one window in its lookahead; a read in one directory does
// not.
func TestScanLoadsFirstWindowsOfLargePages(t *testing.T) {
	pages := map[string]string{}
	for _, d := range []string{"a", "b", "c"} {
		for i := 0; i < 100; i++ {
			pages[fmt.Sprintf("%s/p%03d", d, i)] = "small"
		}
	}
	big := strings.Repeat("0123456789", 600) // 6,000 bytes: 60 chunks, 6 windows
	pages["c/zbig"] = big
	tr, src := fixture(t, 100, pages)
	f := newFS(t, tr, src, Config{Lookahead: 2, WindowBytes: 1000})
	windows := func() int {
		src.mu.Lock()
		defer src.mu.Unlock()
		return len(src.idxs)
	}
	f.Prefetch(tr.Lookup("a"), nil) // groups 0-2, the big page in group 2
	f.flights.Wait()
	time.Sleep(50 * time.Millisecond)
	if n := windows(); n != 0 {
		t.Fatalf("a read in one directory loaded %d windows of a large page", n)
	}
	f.Prefetch(tr.Lookup("b"), nil) // a second group: a scan
	for deadline := time.Now().Add(10 * time.Second); windows() < readaheadWindows+1 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // a fifth window, wrongly started, would be by now
	f.flights.Wait()
	src.mu.Lock()
	got := slices.Clone(src.idxs)
	src.mu.Unlock()
	firsts := map[int]bool{}
	for _, idx := range got {
		firsts[idx[0]] = true
	}
	if len(got) != readaheadWindows+1 || !firsts[0] || !firsts[10] || !firsts[20] || !firsts[30] {
		t.Fatalf("a scan loaded windows starting at %v, want the first %d (chunks 0, 10, 20, 30)", firsts, readaheadWindows+1)
	}
	if data, err := read(t, f, tr, "c/zbig.md", 0, len(big)); err != nil || string(data) != big {
		t.Fatalf("the large page read back wrong: %v", err)
	}
}

// panicSource panics on every request: a bug in a load must become EIO
// for its reader, never a crash of the daemon.
type panicSource struct{ *fakeSource }

func (p *panicSource) FetchPage(context.Context, Ref, []int) ([]string, error) {
	panic("injected")
}

func TestPanicInLoadIsEIO(t *testing.T) {
	tr, src := fixture(t, 1000, map[string]string{"p": "hello"})
	f := newFS(t, tr, &panicSource{src}, Config{FailTTL: -1})
	_, err := read(t, f, tr, "p.md", 0, 5)
	if !errors.Is(err, cache.ErrPanic) {
		t.Errorf("err = %v, want ErrPanic (EIO)", err)
	}
	f.src = src // the daemon keeps serving
	if got, err := read(t, f, tr, "p.md", 0, 5); err != nil || string(got) != "hello" {
		t.Errorf("after a panic: %q %v", got, err)
	}
}

// TestFailedReadsReReadIsAnsweredOnce: the re-read right after a failed
// read (the kernel's, after a failed readahead) gets the error at once;
// the read after that asks the source again, so the first read once the
// server is back succeeds.
func TestFailedReadsReReadIsAnsweredOnce(t *testing.T) {
	tr, src := fixture(t, 1000, map[string]string{"p": "hello"})
	src.setFail(fmt.Errorf("x: %w", ErrTemporary))
	f := newFS(t, tr, src, Config{Retries: 0, FailTTL: time.Hour})
	for i, want := range []int64{1, 1, 2, 2} { // requests made after each read
		if _, err := read(t, f, tr, "p.md", 0, 5); err == nil {
			t.Fatal("read succeeded against a failing server")
		}
		if n := src.calls.Load(); n != want {
			t.Errorf("after read %d: %d requests, want %d", i+1, n, want)
		}
	}
	src.setFail(nil)
	if got, err := read(t, f, tr, "p.md", 0, 5); err != nil || string(got) != "hello" {
		t.Errorf("the first read once the server is back: %q, %v", got, err)
	}
}

// TestOutageMakesOneAttempt: while the source keeps failing, a load makes
// one attempt instead of 1+Retries; it still asks, and the first answer
// ends the outage.
func TestOutageMakesOneAttempt(t *testing.T) {
	tr, src := fixture(t, 1000, map[string]string{"a": "1", "b": "2", "c": "3", "d": "4"})
	f := newFS(t, tr, src, Config{Retries: 2, Timeout: time.Second, FailTTL: -1, Prefetch: PrefetchNone})
	steps := []struct {
		page  string
		fail  bool
		calls int64
	}{
		{"a", true, 3},  // the outage starts: 1 + 2 retries
		{"b", true, 1},  // during it: one attempt
		{"c", false, 1}, // the server is back: that attempt is the read
		{"d", true, 3},  // its answer ended the outage
	}
	for _, st := range steps {
		src.setFail(nil)
		if st.fail {
			src.setFail(fmt.Errorf("refused: %w", ErrTemporary))
		}
		before := src.calls.Load()
		got, err := read(t, f, tr, st.page+".md", 0, 5)
		if st.fail != (err != nil) || (!st.fail && string(got) != "3") {
			t.Errorf("read %s: %q, %v", st.page, got, err)
		}
		if n := src.calls.Load() - before; n != st.calls {
			t.Errorf("read %s made %d requests, want %d", st.page, n, st.calls)
		}
	}
}

// errUnauthorized stands for a failure a retry cannot mend.
var errUnauthorized = errors.New("not authorized")

// busyAfter is back-pressure that names its wait, as chroma's errors for
// a 429 with Retry-After do.
type busyAfter struct{ after time.Duration }

func (b busyAfter) Error() string             { return "busy" }
func (b busyAfter) Unwrap() error             { return ErrBusy }
func (b busyAfter) RetryAfter() time.Duration { return b.after }

// busyTwice answers busyAfter twice, then serves the fake's pages.
type busyTwice struct {
	*fakeSource
	mu sync.Mutex // protects at
	at []time.Time
}

func (s *busyTwice) FetchPage(ctx context.Context, ref Ref, idx []int) ([]string, error) {
	s.mu.Lock()
	s.at = append(s.at, time.Now())
	n := len(s.at)
	s.mu.Unlock()
	if n <= 2 {
		return nil, busyAfter{200 * time.Millisecond}
	}
	return s.fakeSource.FetchPage(ctx, ref, idx)
}

// TestRetryAfterIsHonoured: a source that asks to be left alone for a
// while is not asked sooner, and the read succeeds within its budget.
func TestRetryAfterIsHonoured(t *testing.T) {
	tr, fake := fixture(t, 100, map[string]string{"a": "hello, world"})
	src := &busyTwice{fakeSource: fake}
	f := newFS(t, tr, src, Config{Prefetch: PrefetchNone, Timeout: time.Second})
	got, err := read(t, f, tr, "a.md", 0, 100)
	if err != nil || string(got) != "hello, world" {
		t.Fatalf("read = %q, %v", got, err)
	}
	src.mu.Lock()
	defer src.mu.Unlock()
	for i := 1; i < len(src.at); i++ {
		if d := src.at[i].Sub(src.at[i-1]); d < 200*time.Millisecond {
			t.Errorf("attempt %d came %s after the previous one, want at least the 200ms asked for", i+1, d)
		}
	}
}

// TestPrefetchAllKeepsHalfInFlight: warming a whole collection keeps half
// the engine's requests in flight (one group each), not one at a time,
// and never more; every group is loaded once.
func TestPrefetchAllKeepsHalfInFlight(t *testing.T) {
	pages := dirsOfTen(60)
	tr, src := fixture(t, 1000, pages) // 600 files: 6 groups of 100
	src.gate = make(chan struct{})
	f := newFS(t, tr, src, Config{Prefetch: PrefetchAll, Concurrency: 8})
	f.Start()
	deadline := time.Now().Add(10 * time.Second)
	for src.calls.Load() < 4 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // a fifth would have started by now
	if n := src.calls.Load(); n != 4 {
		t.Fatalf("%d group requests in flight, want 4 (half of 8)", n)
	}
	close(src.gate)
	f.wg.Wait()
	if n := src.calls.Load(); n != 6 {
		t.Errorf("the warm-up made %d requests, want 6 (one per group)", n)
	}
	if n := f.Stats().PrefetchPages; n != 600 {
		t.Errorf("%d pages prefetched, want 600", n)
	}
}

// TestPrefetchForAnotherViewsTree: a daemon's views of one collection
// share an engine planned on one view's tree; a read in a directory of
// another view's tree (other nodes, the same path) prefetches that
// path's group too, instead of nothing.
func TestPrefetchForAnotherViewsTree(t *testing.T) {
	pages := dirsOfTen(30)
	tr, src := fixture(t, 1000, pages)  // 300 files: 3 groups of 100
	other, _ := fixture(t, 1000, pages) // another view's tree: the same paths, other nodes
	f := newFS(t, tr, src, Config{Lookahead: 1})
	f.Prefetch(other.Lookup("d00"), nil)
	f.flights.Wait()
	if n := src.calls.Load(); n != 2 {
		t.Fatalf("a read in another view's tree started %d batches, want its group and 1 ahead", n)
	}
	before := src.calls.Load()
	if _, err := read(t, f, other, "d05/p3.md", 0, 100); err != nil {
		t.Fatal(err)
	}
	if src.calls.Load() != before {
		t.Errorf("a read of a prefetched page of the other view made a request")
	}
}
