package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/harness"
)

// refreshEdits changes a source the ways a docs repository changes: edit,
// grow, shrink, add (in a new and an existing directory), delete, rename,
// make private, make public (the page was private from the start).
func refreshEdits(t *testing.T, src string) {
	t.Helper()
	must(t, exec.Command("chmod", "-R", "u+w", src).Run())
	edit := func(p, s string) { must(t, os.WriteFile(filepath.Join(src, p), []byte(s), 0o644)) }
	edit("guides/page-0000.mdx", "# Edited\n\nnew words\n")
	grown, err := os.ReadFile(filepath.Join(src, "guides/page-0002.mdx"))
	must(t, err)
	edit("guides/page-0002.mdx", string(grown)+strings.Repeat("more text\n", 2000))
	edit("guides/page-0003.mdx", "short\n")
	writeSource(t, src, map[string]string{"guides/added.md": "added to an existing directory\n", "fresh/dir/added.md": "added in a new directory\n"})
	must(t, os.Remove(filepath.Join(src, "guides/page-0004.md")))
	must(t, os.Rename(filepath.Join(src, "guides/page-0005.mdx"), filepath.Join(src, "guides/renamed.mdx")))
	edit("guides/page-0006.mdx", "---\ngroups: [admin]\n---\nnow private\n")
	edit("secret.md", "now public\n")
	edit("deep/a/b.md", "deeper\n")
	later := time.Now().Add(time.Hour)
	must(t, os.Chtimes(filepath.Join(src, "deep/a/b.md"), later, later))
	must(t, os.Chtimes(filepath.Join(src, "deep/a"), later, later)) // as an editor's atomic replace of b.md does
}

// TestLiveRefresh: a mount follows its collection without a remount. After
// the edits above and a re-ingest, SIGHUP (and, on another mount, the poll
// alone) makes the mount equal the new source (diff -r, ls -lR, the pages
// made private gone, the pages made public there); a reader that opened a
// multi-MiB page before reads its old bytes to EOF; unchanged files keep
// their inode numbers and their page cache (a re-read does not reach the
// daemon); a corrupt tree leaves the current version served.
func TestLiveRefresh(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 40, PerDir: 10, Large: []int64{3 << 20}, Seed: 61})
	writeSource(t, src, map[string]string{"secret.md": "---\ngroups: [admin]\n---\nprivate at first\n", "deep/a/b.md": "deep\n"})
	ingestArgs := []string{"--chroma-url", env.url, "--collection", name, "--quiet", src}
	if _, errOut, code := ingestCmd(t, nil, ingestArgs...); code != 0 {
		t.Fatalf("ingest: %s", errOut)
	}
	readOnlyTree(t, src)
	old := snapshot(t, src)
	mnt := mountDir(t, parent)
	m := startMount(t, name, mnt, "--refresh", "0", "--prefetch", "none")
	polled := mountDir(t, t.TempDir())
	mp := startMount(t, name, polled, "--refresh", "1s", "--prefetch", "none")
	sameOutput(t, mnt, src, "ls -lanR --time-style=+TS guides large")

	unchanged := "guides/page-0001.md"
	inoBefore := inode(t, filepath.Join(mnt, unchanged))
	quietDir, err := os.Stat(filepath.Join(mnt, "deep")) // its entry a/ stays; only a/b.md changes
	must(t, err)
	sh(t, mnt, "cat "+unchanged+" >/dev/null", false) // now in the kernel's page cache
	big, err := os.Open(filepath.Join(mnt, "large/big-0.md"))
	must(t, err)
	defer big.Close()
	head := make([]byte, 100<<10)
	_, err = io.ReadFull(big, head)
	must(t, err)
	removed, err := os.Open(filepath.Join(mnt, "guides/page-0004.md")) // deleted by the edits, not read yet
	must(t, err)
	defer removed.Close()

	refreshEdits(t, src)
	must(t, os.WriteFile(filepath.Join(src, "large/big-0.md"), []byte("replaced\n"), 0o644))
	pollRefreshes := mp.metric(t, "chromafs_tree_refreshes_total") // the tree cannot change before the re-ingest writes it
	if _, errOut, code := ingestCmd(t, nil, ingestArgs...); code != 0 {
		t.Fatalf("re-ingest: %s", errOut)
	}
	// the polling mount, counted in polls, not seconds: the refresh came
	// from one of the first two polls after the re-ingest returned,
	// however late a busy machine ran them (read here, before anything
	// else runs, from the scrape that first shows the refresh)
	pollsAtIngest := mp.metric(t, "chromafs_tree_polls_total")
	var polledAt map[string]int64
	waitFor(t, 30*time.Second, func() bool {
		var err error
		polledAt, err = harness.Metrics(mp.metrics, "chromafs_tree_polls_total", "chromafs_tree_refreshes_total")
		must(t, err)
		return polledAt["chromafs_tree_refreshes_total"] > pollRefreshes
	}, func() string { return fmt.Sprintf("the polling mount never refreshed: %v\n%s", polledAt, mp.logs) })
	must(t, os.Remove(filepath.Join(src, "guides/page-0006.mdx"))) // private now: not on a public mount
	readOnlyTree(t, src)
	refreshed := m.metric(t, "chromafs_tree_refreshes_total")
	must(t, m.cmd.Process.Signal(syscall.SIGHUP))
	waitMetric(t, m, "chromafs_tree_refreshes_total", refreshed+1)

	t.Run("equals-the-new-source", func(t *testing.T) {
		if out, code := sh(t, parent, fmt.Sprintf("diff -r %s src", filepath.Base(mnt)), true); code != 0 || out != "" {
			t.Fatalf("diff -r after SIGHUP: exit %d\n%.2000s", code, out)
		}
		sameOutput(t, mnt, src, "ls -lanR --time-style=+TS .")
		sameOutput(t, mnt, src, "find . | sort; cat secret.md; du -ab . | sort -k2")
		hiddenIsAbsent(t, mnt, "guides/page-0006.mdx")
	})
	t.Run("an-open-reader-finishes-the-old-version", func(t *testing.T) {
		rest, err := io.ReadAll(big)
		must(t, err)
		if got := append(head, rest...); !bytes.Equal(got, old["large/big-0.md"]) {
			t.Errorf("the reader that opened big-0.md before the refresh read %d bytes, not its %d old bytes", len(got), len(old["large/big-0.md"]))
		}
		if b, err := os.ReadFile(filepath.Join(mnt, "large/big-0.md")); err != nil || string(b) != "replaced\n" {
			t.Errorf("a new open of big-0.md: %q, %v; want the new content", b, err)
		}
		if got, err := io.ReadAll(removed); err != nil || !bytes.Equal(got, old["guides/page-0004.md"]) {
			t.Errorf("a page removed while open read %d bytes (%v), want its %d old bytes", len(got), err, len(old["guides/page-0004.md"]))
		}
	})
	t.Run("unchanged-files-keep-inode-and-page-cache", func(t *testing.T) {
		if got := inode(t, filepath.Join(mnt, unchanged)); got != inoBefore {
			t.Errorf("%s: inode %d after the refresh, was %d", unchanged, got, inoBefore)
		}
		if st, err := os.Stat(filepath.Join(mnt, "deep")); err != nil || !st.ModTime().Equal(quietDir.ModTime()) {
			t.Errorf("deep/, whose entries did not change, has mtime %v, was %v (%v)", st.ModTime(), quietDir.ModTime(), err)
		}
		// directories show their source's mtime (recorded by ingest): the
		// kernel's cached attributes of deep/a/ were invalidated
		srcA, err := os.Stat(filepath.Join(src, "deep/a"))
		must(t, err)
		if st, err := os.Stat(filepath.Join(mnt, "deep/a")); err != nil || !st.ModTime().Equal(srcA.ModTime()) || st.ModTime().Equal(quietDir.ModTime()) {
			t.Errorf("deep/a/, whose entry b.md was replaced, has mtime %v, its source %v (%v)", st.ModTime(), srcA.ModTime(), err)
		}
		before := m.metric(t, "chromafs_cache_hits_total") + m.metric(t, "chromafs_cache_misses_total")
		sameOutput(t, mnt, src, "cat "+unchanged)
		if after := m.metric(t, "chromafs_cache_hits_total") + m.metric(t, "chromafs_cache_misses_total"); after != before {
			t.Errorf("re-reading an unchanged file after the refresh reached the daemon (%d chunk reads)", after-before)
		}
	})
	t.Run("the-poll-alone-within-2x-the-interval", func(t *testing.T) {
		if n := polledAt["chromafs_tree_polls_total"] - pollsAtIngest; n > 2 {
			t.Errorf("the polling mount refreshed %d polls after the re-ingest returned, want within 2 (2x the interval)", n)
		}
		if out, code := sh(t, parent, fmt.Sprintf("diff -r %s src", polled), true); code != 0 || out != "" {
			t.Fatalf("the polling mount differs after its refresh: %.1000s", out)
		}
		sameOutput(t, polled, src, "ls -lanR --time-style=+TS . | grep -v ' \\.\\.$'") // .. is another directory
	})
	t.Run("a-corrupt-tree-leaves-the-current-version", func(t *testing.T) {
		st := openStore(t, name)
		must(t, st.WriteTree(context.Background(), "this is not a path tree"))
		failures := m.metric(t, "chromafs_tree_failures_total")
		must(t, m.cmd.Process.Signal(syscall.SIGHUP))
		waitMetric(t, m, "chromafs_tree_failures_total", failures+1)
		if out, code := sh(t, parent, fmt.Sprintf("diff -r %s src", filepath.Base(mnt)), true); code != 0 || out != "" {
			t.Errorf("after a corrupt tree: exit %d\n%.2000s", code, out)
		}
		if !strings.Contains(m.logs.String(), "tree refresh failed") {
			t.Errorf("no log line for the failed refresh:\n%s", m.logs)
		}
	})
}

// TestRefreshUnderLoad: 100 refreshes between two tree versions with the
// same paths, while grep -r runs in a loop and a walker reads every file:
// no error; every file read whole equals its content in one of the two
// versions, and every count grep gives is one version's; every listing
// holds the names both versions have, and every size stat gives is one
// version's.
func TestRefreshUnderLoad(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 60, PerDir: 6, Large: []int64{1 << 20}, Seed: 71}, "--chunk-size", "2048")
	versionA := snapshot(t, src)
	st := openStore(t, name)
	docA, err := st.LoadTree(context.Background())
	must(t, err)
	for p := range versionA {
		if strings.HasSuffix(p, "5.md") || strings.HasSuffix(p, "0.mdx") || strings.HasPrefix(p, "large/") {
			must(t, os.WriteFile(filepath.Join(src, p), []byte(strings.Repeat("version B of "+p+"\n", 50+len(p))), 0o644))
		}
	}
	if _, errOut, code := ingestCmd(t, nil, "--chroma-url", env.url, "--collection", name, "--quiet", "--chunk-size", "2048", src); code != 0 {
		t.Fatalf("ingest B: %s", errOut)
	}
	versionB := snapshot(t, src)
	docB, err := st.LoadTree(context.Background())
	must(t, err)
	mnt := mountDir(t, parent)
	m := startMount(t, name, mnt, "--refresh", "0")

	var stop atomic.Bool
	var wg sync.WaitGroup
	var mu sync.Mutex
	var problems []string
	report := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		if len(problems) < 20 {
			problems = append(problems, fmt.Sprintf(format, args...))
		}
	}
	var greps, walks atomic.Int64
	countsA, countsB := grepCounts(versionA, "version"), grepCounts(versionB, "version")
	wg.Add(2)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			cmd := exec.Command("grep", "-rc", "version", ".")
			cmd.Dir = mnt
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			if err := cmd.Run(); err != nil && cmd.ProcessState.ExitCode() != 1 {
				report("grep -r: %v: %s", err, stderr.String())
			}
			checkGrepCounts(stdout.String(), countsA, countsB, report)
			greps.Add(1)
		}
	}()
	go func() {
		defer wg.Done()
		for !stop.Load() {
			walkAndCheck(mnt, versionA, versionB, report)
			walks.Add(1)
		}
	}()
	for i := 0; i < 100; i++ {
		doc := docB
		if i%2 == 0 {
			doc = docA
		}
		must(t, st.WriteTree(context.Background(), string(doc)))
		before := m.metric(t, "chromafs_tree_refreshes_total")
		must(t, m.cmd.Process.Signal(syscall.SIGHUP))
		waitMetric(t, m, "chromafs_tree_refreshes_total", before+1)
	}
	stop.Store(true)
	wg.Wait()
	for _, p := range problems {
		t.Error(p)
	}
	if greps.Load() < 3 || walks.Load() < 3 {
		t.Errorf("only %d grep -r runs and %d walks overlapped the refreshes, want 3 of each", greps.Load(), walks.Load())
	}
	if f := m.metric(t, "chromafs_tree_failures_total"); f != 0 {
		t.Errorf("%d refresh failures", f)
	}
	fmt.Printf("BENCH refresh under load: 100 refreshes, %d concurrent grep -r runs, 0 errors\n", greps.Load())
}

// grepCounts is what grep -c pattern gives for each file of a version:
// the number of its lines holding pattern.
func grepCounts(files map[string][]byte, pattern string) map[string]int {
	out := make(map[string]int, len(files))
	for rel, b := range files {
		out[rel] = 0
		for _, line := range strings.SplitAfter(string(b), "\n") {
			if strings.Contains(line, pattern) {
				out[rel]++
			}
		}
	}
	return out
}

// checkGrepCounts checks grep -rc's lines ("./path:count"): one for each
// file, each count one of the two versions'.
func checkGrepCounts(out string, a, b map[string]int, report func(string, ...any)) {
	seen := 0
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		i := strings.LastIndexByte(line, ':')
		if i < 0 {
			report("grep -rc: a line without a count: %q", line)
			continue
		}
		rel := strings.TrimPrefix(line[:i], "./")
		n, err := strconv.Atoi(line[i+1:])
		_, known := a[rel]
		switch {
		case err != nil || !known:
			report("grep -rc: %q is no file of either version", line)
		case n != a[rel] && n != b[rel]:
			report("grep -rc: %s counts %d, the versions %d and %d", rel, n, a[rel], b[rel])
		}
		seen++
	}
	if seen != len(a) {
		report("grep -rc: %d files counted, the versions have %d", seen, len(a))
	}
}

// walkAndCheck reads every file under mnt and checks it against the two
// versions (which have the same paths): each directory lists the names
// they have, each size and each file read whole is one version's.
func walkAndCheck(mnt string, a, b map[string][]byte, report func(string, ...any)) {
	names := map[string][]string{} // directory -> the names in it, in both versions
	for rel := range a {
		for child := rel; child != "."; child = filepath.Dir(child) {
			names[filepath.Dir(child)] = append(names[filepath.Dir(child)], filepath.Base(child))
		}
	}
	for dir, list := range names {
		slices.Sort(list)
		names[dir] = slices.Compact(list)
	}
	files := 0
	err := filepath.Walk(mnt, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			report("walk %s: %v", p, err)
			return nil
		}
		rel, _ := filepath.Rel(mnt, p)
		if info.IsDir() {
			entries, err := os.ReadDir(p)
			var got []string
			for _, e := range entries {
				got = append(got, e.Name())
			}
			if err != nil || !slices.Equal(got, names[rel]) {
				report("listing %s: %q (%v), the versions' %q", rel, got, err, names[rel])
			}
			return nil
		}
		files++
		want, inA := a[rel]
		if !inA {
			report("%s is no file of either version", rel)
			return nil
		}
		if info.Size() != int64(len(want)) && info.Size() != int64(len(b[rel])) {
			report("%s: size %d, the versions' %d and %d", rel, info.Size(), len(want), len(b[rel]))
		}
		got, err := os.ReadFile(p)
		switch {
		case err != nil:
			report("read %s: %v", rel, err)
		case !bytes.Equal(got, want) && !bytes.Equal(got, b[rel]):
			report("%s: %d bytes that are neither version (%d or %d bytes)", rel, len(got), len(want), len(b[rel]))
		}
		return nil
	})
	if err != nil {
		report("walk: %v", err)
	}
	if files != len(a) {
		report("a walk found %d files, the versions have %d", files, len(a))
	}
}

// snapshot reads every file under dir.
func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	must(t, filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		out[rel] = b
		return err
	}))
	return out
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	must(t, syscall.Stat(p, &st))
	return st.Ino
}
