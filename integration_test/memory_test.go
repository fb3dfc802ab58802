package integration_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/internal/corpus"
)

// TestMemoryBudget (issue 32): one memory budget for every collection of
// the host (chromafsd --memory 6MiB). A small site stays attached while
// three bigger ones are each attached, read whole and detached (their
// views linger). The budget holds: pages plus trees stay within it, the
// small site (in use, within its share) keeps every page while the idle
// big ones lose theirs, oldest first, and the big site idle longest is
// dropped whole once pages used after it went idle are evicted. Attached
// again, that site loads again (counted as a reload) and reads the same
// bytes.
func TestMemoryBudget(t *testing.T) {
	parent := t.TempDir()
	type site struct{ name, src string }
	ingest := func(i, files int) site {
		name, src := ingestCorpus(t, filepath.Join(parent, fmt.Sprint(i)), corpus.Spec{Files: files, MinSize: 20 << 10, MaxSize: 40 << 10, Seed: uint64(70 + i)})
		return site{name, src}
	}
	small := ingest(0, 30) // about 0.9 MiB
	var bigs []site
	for i := 1; i <= 3; i++ {
		bigs = append(bigs, ingest(i, 100)) // about 3 MiB each
	}
	const budget = 6 << 20
	d := startDaemon(t, "--memory", "6MiB", "--linger", "10m", "--prefetch", "none")
	readAll := func(s site, path string) {
		t.Helper()
		const sums = "find . -type f | sort | xargs md5sum"
		if got, want := mustSh(t, path, sums), mustSh(t, s.src, sums); got != want {
			t.Fatalf("%s read through the daemon: %s", s.name, firstDiff(got, want))
		}
	}
	attach := func(s site, dir string) string {
		t.Helper()
		path := d.dirFor(0, dir)
		if out, code := d.run(0, "attach", "--collection", s.name, path); code != 0 {
			t.Fatalf("attach %s: exit %d %s", s.name, code, out)
		}
		return path
	}
	collectionOf := func(st api.Status, name string) (api.Collection, bool) {
		for _, c := range st.Collections {
			if c.Name == name {
				return c, true
			}
		}
		return api.Collection{}, false
	}
	within := func(st api.Status) {
		t.Helper()
		if m := st.Memory; m.Budget != budget || m.Pages+m.Trees+m.Overhead > budget || m.Trees <= 0 {
			t.Errorf("memory: %+v; want a budget of %d holding pages, trees (> 0) and the heap's overhead within it", m, budget)
		}
	}

	smallPath := attach(small, "small")
	readAll(small, smallPath)
	smallBytes := int64(0)
	must(t, filepath.Walk(small.src, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			smallBytes += fi.Size()
		}
		return err
	}))
	for i, b := range bigs {
		path := attach(b, fmt.Sprint("big-", i))
		readAll(b, path)
		within(d.status())
		if out, code := d.run(0, "detach", path); code != 0 {
			t.Fatalf("detach %s: exit %d %s", b.name, code, out)
		}
	}
	var st api.Status
	waitFor(t, 15*time.Second, func() bool { st = d.status(); return st.Memory.ViewEvictions > 0 },
		func() string {
			b, _ := os.ReadFile(d.logFile)
			return fmt.Sprintf("no idle view dropped: %+v\n%s", st.Memory, b)
		})
	within(st)
	if st.Memory.PageEvictions == 0 {
		t.Errorf("no page evicted reading %d MiB of sites through a 6 MiB budget: %+v", 10, st.Memory)
	}
	if c, ok := collectionOf(st, small.name); !ok || c.CacheBytes < smallBytes || c.PageEvictions != 0 {
		t.Errorf("the small site, attached and within its share: %+v (found %v); want all its %d bytes cached, none evicted", c, ok, smallBytes)
	}
	if _, ok := collectionOf(st, bigs[0].name); ok {
		t.Errorf("the site idle longest is still open after pages used after it went idle were evicted: %+v", st.Collections)
	}
	if out, _ := d.run(0, "list"); !strings.Contains(out, "memory budget 6.0MiB") || !strings.Contains(out, "idle views") {
		t.Errorf("chromafs list does not show the budget:\n%s", out)
	}
	log, _ := os.ReadFile(d.logFile)
	if !strings.Contains(string(log), "idle view dropped for memory") {
		t.Errorf("the log does not say why a view went:\n%s", log)
	}

	// the dropped site comes back: loaded again, the same bytes
	reloads := st.Memory.Reloads
	readAll(bigs[0], attach(bigs[0], "big-0-again"))
	st = d.status()
	if st.Memory.Reloads != reloads+1 {
		t.Errorf("reloads %d -> %d after attaching the dropped site again, want one more", reloads, st.Memory.Reloads)
	}
	// it waited for no request: the version this host served last, from
	// the host tier's snapshot, checked right after
	log, _ = os.ReadFile(d.logFile)
	attached := regexp.MustCompile(`msg=attached .*chroma_requests=(\d+)`).FindAllStringSubmatch(string(log), -1)
	if len(attached) == 0 || attached[len(attached)-1][1] != "0" {
		t.Errorf("the dropped site's attach waited for requests (%v), want none:\n%s", attached[max(len(attached)-1, 0):], log)
	}
	if !regexp.MustCompile(`msg="view loaded" .*collection=` + regexp.QuoteMeta(bigs[0].name) + ` .*tree_unchecked=true`).Match(log) {
		t.Errorf("the dropped site was not loaded again from the version served last:\n%s", log)
	}
	within(st)
	fmt.Printf("BENCH memory: budget %s, pages %d, trees %d bytes; %d chunks and %d idle views evicted, %d reloaded; daemon RSS %.1f MiB (race detector binaries: not a figure)\n",
		"6MiB", st.Memory.Pages, st.Memory.Trees, st.Memory.PageEvictions, st.Memory.ViewEvictions, st.Memory.Reloads, float64(st.Memory.RSS)/(1<<20))
}
