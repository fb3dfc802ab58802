package integration_test

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/harness"
)

// TestStalledTenantStallsNoOther: one collection's server stalls (a proxy
// holds its reads) while the first attach of that collection waits for
// its tree; meanwhile attaches of another collection's loaded view are
// placed as fast as before the stall (p50 and p99 of 100 each, measured
// in the same run), all before the stalled attach returns. The daemon
// loads trees outside its lock (daemon/prepare.go): before, every attach
// waited for the stalled one, up to the request timeout. Once the server
// answers, the stalled attach is placed and serves its collection.
func TestStalledTenantStallsNoOther(t *testing.T) {
	parent := t.TempDir()
	loadedName, _ := ingestCorpus(t, parent, corpus.Spec{Files: 10, Seed: 61})
	stalledName, stalledSrc := ingestCorpus(t, filepath.Join(parent, "stalled"), corpus.Spec{Files: 10, Seed: 62})
	p, err := harness.StartCloudProxy(env.url, harness.Network{})
	must(t, err)
	t.Cleanup(p.Close)
	d := startDaemon(t, "--chroma-url", p.URL, "--prefetch", "none")
	if out, code := d.run(0, "attach", "--collection", loadedName, d.dirFor(0, "loaded")); code != 0 {
		t.Fatalf("attach of the first collection: exit %d %s", code, out)
	}
	// attaches of the loaded view: each timed from the client's start to
	// its exit, detached after (scripts/bench.sh asks for 200)
	n := envInt("CHROMAFS_STALL_ATTACHES", 100)
	attaches := func(round string) []time.Duration {
		out := make([]time.Duration, 0, n)
		for i := range n {
			path := d.dirFor(0, fmt.Sprintf("%s-%d", round, i))
			start := time.Now()
			if msg, code := d.run(0, "attach", "--collection", loadedName, path); code != 0 {
				t.Fatalf("attach %s %d: exit %d %s", round, i, code, msg)
			}
			out = append(out, time.Since(start))
			if msg, code := d.run(0, "detach", path); code != 0 {
				t.Fatalf("detach %s %d: exit %d %s", round, i, code, msg)
			}
		}
		slices.Sort(out)
		return out
	}
	before := attaches("before")

	hold := make(chan struct{})
	p.Hold.Store(&hold)
	released := false
	release := func() {
		if !released {
			released = true
			p.Hold.Store(nil)
			close(hold)
		}
	}
	t.Cleanup(release)
	reads := p.Reads.Load()
	stalledDone := make(chan string, 1)
	go func() {
		out, code := d.run(0, "attach", "--collection", stalledName, d.dirFor(0, "stalled"))
		stalledDone <- fmt.Sprintf("exit %d %s", code, out)
	}()
	waitFor(t, 10*time.Second, func() bool { return p.Reads.Load() > reads && len(stalledDone) == 0 },
		func() string { return "the stalled collection's first attach sent no read" })
	during := attaches("during")
	select {
	case out := <-stalledDone:
		t.Fatalf("the stalled attach returned (%s) before the other attaches were done: nothing was stalled", out)
	default:
	}
	release()
	select {
	case out := <-stalledDone:
		if !strings.HasPrefix(out, "exit 0 ") {
			t.Fatalf("the stalled attach, once its server answered: %s", out)
		}
	case <-time.After(time.Minute):
		t.Fatal("the stalled attach never returned once its server answered")
	}
	if got, want := mustSh(t, filepath.Join(d.dir, "stalled"), "find . -type f | sort | xargs md5sum"), mustSh(t, stalledSrc, "find . -type f | sort | xargs md5sum"); got != want {
		t.Errorf("the stalled collection once placed: %s", firstDiff(got, want))
	}
	p50, p99 := func(s []time.Duration) time.Duration { return s[len(s)/2] }, func(s []time.Duration) time.Duration { return s[len(s)*99/100] }
	fmt.Printf("BENCH tenants: attach of a loaded view, p50/p99 of %d: %v/%v before, %v/%v while another collection's first attach is stalled\n",
		n, p50(before).Round(time.Microsecond), p99(before).Round(time.Microsecond), p50(during).Round(time.Microsecond), p99(during).Round(time.Microsecond))
	fmt.Printf("BENCH tenants figures: p99_ratio=%.3f p50_ratio=%.3f\n", float64(p99(during))/float64(p99(before)), float64(p50(during))/float64(p50(before)))
	// a stall is the proxy's hold: seconds for every attach; what is left
	// is this VM's noise, which a ratio of p99s of 100 on two cores shows
	// too: bounded here, measured by scripts/bench.sh
	if p50(during) > 2*p50(before)+5*time.Millisecond || p99(during) > 3*p99(before)+20*time.Millisecond {
		t.Errorf("attaches of a loaded view took %v/%v (p50/p99) while another collection stalled, %v/%v before", p50(during), p99(during), p50(before), p99(before))
	}
}
