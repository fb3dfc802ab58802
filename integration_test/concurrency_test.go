package integration_test

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/corpus"
)

// TestThousandConcurrentReaders runs 1,000 readers at once (cat, stat,
// grep -r, md5sum) over a cold mount, through the proxy, with the daemon
// built with -race. Every output must match local disk, requests in flight
// must stay within the mount's limit, and memory must stay bounded.
func TestThousandConcurrentReaders(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 400, Large: []int64{3 << 20}, Seed: 31})
	readOnlyTree(t, src)
	p := newFaultProxy(t, env.url)
	mnt := mountDir(t, parent)
	// 1,000 processes starting at once on 2 cores starve the server too; a
	// long deadline keeps that from turning into timeouts, which free a slot
	// while the server may still be answering the request (the proxy would
	// then see more than the limit in flight).
	m := startMountBin(t, env.raceBin, name, mnt, p.URL, "--cache-size", "8MiB", "--timeout", "60s")
	pages := sourcePages(t, src)
	scripts := make([]string, 1000)
	for i := range scripts {
		f := pages[i%len(pages)]
		switch i % 10 {
		case 0:
			scripts[i] = "grep -rc chunk " + filepath.Dir(f) + " | sort"
		case 1:
			scripts[i] = "stat -c '%s %a' " + f
		case 2:
			scripts[i] = "md5sum large/big-0.md"
		default:
			scripts[i] = "cat " + f + " | md5sum"
		}
	}
	want := make([]string, len(scripts))
	for i, s := range scripts {
		want[i], _ = sh(t, src, s, false)
	}
	start := time.Now()
	got := make([]string, len(scripts))
	codes := make([]int, len(scripts))
	var wg sync.WaitGroup
	for i, s := range scripts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command("bash", "-c", s)
			cmd.Dir = mnt
			out, err := cmd.Output()
			got[i] = string(out)
			if err != nil {
				codes[i] = 1
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	bad := 0
	for i := range scripts {
		if got[i] != want[i] || codes[i] != 0 {
			if bad++; bad <= 5 {
				t.Errorf("reader %d (%s): %q, want %q", i, scripts[i], strings.TrimSpace(got[i]), strings.TrimSpace(want[i]))
			}
		}
	}
	rss := peakRSSOf(t, m.cmd.Process.Pid)
	fmt.Printf("BENCH 1000 concurrent readers: %s, %d wrong, peak requests in flight %d, daemon peak RSS %d MiB (8 MiB cache, -race build)\n",
		took, bad, p.maxInflight.Load(), rss>>20)
	if n := m.metric(t, "chromafs_fetch_errors_total"); n != 0 {
		t.Errorf("%d fetch attempts failed (timed out?) under load", n)
	}
	if n := p.maxInflight.Load(); n > 8 || n == 0 {
		t.Errorf("%d requests in flight at once; the mount allows 8", n)
	}
	if rss > 400<<20 {
		t.Errorf("daemon peak RSS %d MiB with an 8 MiB cache", rss>>20)
	}
	// after the exit: a race at shutdown (the race detector's exit 66, or
	// its report) fails the test too
	m.stop(t)
}
