package integration_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/hostcache"
	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/testenv"
)

// session is a short agent-like session: a recursive grep, reads of whole
// files, a metadata walk. Its output must equal the same on local disk.
const session = `grep -rc chunk . | sort | md5sum
find . -type f | sort | xargs cat | md5sum
find . -type f -name 'page-*' | wc -l
head -c 100 large/big-0.md | md5sum
tail -c 100 large/big-0.md | md5sum`

func runSession(t *testing.T, mnt, src, when string) {
	t.Helper()
	want, _ := sh(t, src, session, false)
	got, code := sh(t, mnt, session, true)
	if code != 0 || got != want {
		t.Fatalf("%s: session output differs from local disk (exit %d):\n%s\nwant:\n%s", when, code, got, want)
	}
}

// hostEntries lists the files of the host tier's entries in dir.
func hostEntries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	root := filepath.Join(dir, hostcache.FormatDir)
	must(t, filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && len(filepath.Base(filepath.Dir(p))) == 2 {
			out = append(out, p)
		}
		return err
	}))
	return out
}

// TestHostCacheNextConversation: a second mount process on a host whose
// cache a first one filled runs the same session pulling almost nothing from
// Chroma, with byte-identical output.
func TestHostCacheNextConversation(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 300, Large: []int64{3 << 20}, Seed: 41}, "--chunk-size", "2048")
	readOnlyTree(t, src)
	p := newFaultProxy(t, env.url)
	mnt := mountDir(t, parent)
	cacheDir := t.TempDir()

	doc, err := openStore(t, name).LoadTree(t.Context())
	must(t, err)
	if n := len(chroma.TreeIDs(string(doc))) - 1; n < 2 {
		t.Fatalf("the test needs a tree in parts; it is in %d", n)
	}
	m1 := startMountEnv(t, nil, name, mnt, p.URL, "--cache-dir", cacheDir)
	// the mount's own count of what it waited for: the proxy's may hold
	// a get of prefetch all (a small collection), which starts as the
	// mount answers
	if n := m1.metric(t, "chromafs_mount_chroma_requests"); n != 2 {
		t.Errorf("the first mount waited for %d requests to be ready, want 2 (the collection, then the tree's header with its parts in one get)", n)
	}
	runSession(t, mnt, src, "first conversation")
	first := p.gets.Load()
	m1.stop(t)
	if n := len(hostEntries(t, cacheDir)); n < 300 {
		t.Errorf("host cache holds %d pages after the first session, want the 300 small ones", n)
	}

	m2 := startMountEnv(t, nil, name, mnt, p.URL, "--cache-dir", cacheDir)
	if n := m2.metric(t, "chromafs_mount_chroma_requests"); n != 0 {
		t.Errorf("the next mount waited for %d requests to be ready, want none (the version the host served last)", n)
	}
	waitMetric(t, m2, "chromafs_tree_last_poll_timestamp_seconds", 1) // its check, right after
	if n := p.gets.Load() - first; n != 1 {
		t.Errorf("the next mount checked its tree with %d record gets, want 1 (the header, by the collection id the host remembers)", n)
	}
	if n := m2.metric(t, "chromafs_chroma_requests_total"); n != 1 {
		t.Errorf("the next mount made %d requests until checked, want 1 (the tree header)", n)
	}
	runSession(t, mnt, src, "next conversation")
	next := p.gets.Load() - first
	hits := m2.metric(t, "chromafs_host_cache_hits_total")
	fmt.Printf("BENCH host cache: first conversation %d record gets, next conversation %d (%d host-cache hits, 301 pages)\n", first, next, hits)
	if next*20 > 301 { // <= 5% of the pages
		t.Errorf("the next conversation made %d record gets, want at most 5%% of 301 pages", next)
	}
	if hits < 300 {
		t.Errorf("%d host cache hits, want >= 300", hits)
	}
	// Lookups are timed after they return; a few may be between the two.
	if n := m2.metric(t, `chromafs_load_seconds_count{tier="host"}`); n < hits-16 {
		t.Errorf("%d host lookups timed, want about the %d hits at least", n, hits)
	}
}

// TestHostCacheFaults: whatever happens to the host tier — entries
// truncated, bit-flipped, deleted, unreadable, the directory removed, a full
// or read-only file system — reads stay byte-exact and never fail.
func TestHostCacheFaults(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 120, Large: []int64{1 << 20}, Seed: 43})
	readOnlyTree(t, src)
	mnt := mountDir(t, parent)
	warm := func(t *testing.T, dir string) {
		m := startMountEnv(t, nil, name, mnt, env.url, "--cache-dir", dir)
		runSession(t, mnt, src, "warming")
		m.stop(t)
	}

	t.Run("damaged entries", func(t *testing.T) {
		dir := t.TempDir()
		warm(t, dir)
		// dir, not auto: auto would start reading the whole collection from
		// the host cache as soon as the mount answers, before the damage.
		m := startMountEnv(t, nil, name, mnt, env.url, "--cache-dir", dir, "--prefetch", "dir")
		entries := hostEntries(t, dir)
		if len(entries) < 100 {
			t.Fatalf("only %d entries after warming", len(entries))
		}
		for i, e := range entries {
			switch i % 5 {
			case 0: // truncated
				raw, _ := os.ReadFile(e)
				must(t, os.WriteFile(e, raw[:len(raw)/2], 0o600))
			case 1: // one bit flipped near the end
				raw, _ := os.ReadFile(e)
				raw[len(raw)-2] ^= 0x04
				must(t, os.WriteFile(e, raw, 0o600))
			case 2:
				must(t, os.Remove(e))
			case 3: // another entry's bytes under this name
				raw, _ := os.ReadFile(entries[(i+1)%len(entries)])
				must(t, os.WriteFile(e, raw, 0o600))
			}
		}
		runSession(t, mnt, src, "damaged host cache")
		if n := m.metric(t, "chromafs_host_cache_corrupt_total"); n < int64(len(entries))*3/5-2 {
			t.Errorf("%d damaged entries detected, want about %d", n, len(entries)*3/5)
		}
	})

	t.Run("directory removed while mounted", func(t *testing.T) {
		dir := t.TempDir()
		m := startMountEnv(t, nil, name, mnt, env.url, "--cache-dir", dir)
		// the mount may be creating lock files in it (auto prefetch): a
		// removal racing one of them is tried again
		for i := 0; ; i++ {
			err := os.RemoveAll(dir)
			if err == nil {
				break
			}
			if i == 50 {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		runSession(t, mnt, src, "cache dir removed")
		if n := m.metric(t, "chromafs_host_cache_errors_total"); n == 0 {
			t.Error("no host cache error counted with its directory gone")
		}
	})

	t.Run("full file system", func(t *testing.T) {
		dir := tmpfs(t, "size=96k")
		m := startMountEnv(t, nil, name, mnt, env.url, "--cache-dir", dir)
		runSession(t, mnt, src, "full host cache file system")
		// pages reach the host cache from a background writer, after the
		// session's reads: wait for its first failed write
		waitMetric(t, m, "chromafs_host_cache_errors_total", 1)
	})

	t.Run("read-only file system", func(t *testing.T) {
		dir := tmpfs(t, "ro")
		m := startMountEnv(t, nil, name, mnt, env.url, "--cache-dir", dir)
		runSession(t, mnt, src, "read-only host cache")
		if !strings.Contains(m.logs.String(), "running without the host cache") {
			t.Errorf("no warning about the unusable host cache:\n%s", m.logs)
		}
	})
}

// tmpfs mounts a small tmpfs for the test (root only).
func tmpfs(t *testing.T, opts string) string {
	t.Helper()
	testenv.Require(t, os.Geteuid() == 0, "mounting a tmpfs needs root")
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// TestMountWaitsOutBackPressure: HTTP 429 while the tree loads (a quota,
// not a failure) delays the mount; it does not fail it.
func TestMountWaitsOutBackPressure(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 20, Seed: 47})
	p := newFaultProxy(t, env.url)
	p.burst.Store(6)
	p.set("429burst")
	mnt := mountDir(t, parent)
	startMountEnv(t, nil, name, mnt, p.URL)
	p.set("")
	if n := p.gets.Load(); n < 7 {
		t.Errorf("%d record gets, want the 6 refused and then the tree", n)
	}
	sameOutput(t, mnt, src, "find . -type f | sort")
}

// TestRememberedCollectionRecreated: the host tier remembers a name's
// collection id and the version a view served last, so that a restart
// answers with no request and checks right after (issue 31); when the
// collection was deleted and created again under the same name, that
// check finds the new one (the old id answers 404), opens it by name in
// place and swaps its tree in: the mount then serves its bytes, never the
// old collection's.
func TestRememberedCollectionRecreated(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 40, Seed: 51})
	mnt := mountDir(t, parent)
	cacheDir := t.TempDir()
	m := startMountEnv(t, nil, name, mnt, env.url, "--cache-dir", cacheDir)
	sameOutput(t, mnt, src, "find . -type f | sort | xargs cat | md5sum")
	m.stop(t)

	client, err := v2.NewHTTPClient(v2.WithBaseURL(env.url))
	must(t, err)
	defer client.Close()
	must(t, client.DeleteCollection(context.Background(), name))
	src2 := filepath.Join(t.TempDir(), "src")
	must(t, os.MkdirAll(src2, 0o755))
	_, err = corpus.Generate(src2, corpus.Spec{Files: 40, Seed: 52})
	must(t, err)
	if _, errOut, code := ingestCmd(t, nil, "--chroma-url", env.url, "--collection", name, "--quiet", src2); code != 0 {
		t.Fatalf("ingest exit %d: %s", code, errOut)
	}

	m = startMountEnv(t, nil, name, mnt, env.url, "--cache-dir", cacheDir)
	if !strings.Contains(m.logs.String(), "tree_unchecked=true") {
		t.Errorf("the restart did not serve the version it served last:\n%s", m.logs)
	}
	waitMetric(t, m, "chromafs_tree_refreshes_total", 1) // the check: the old id fails, opened by name, the new tree swapped in
	sameOutput(t, mnt, src2, "find . -type f | sort | xargs cat | md5sum")
	if n := m.metric(t, "chromafs_chroma_requests_total"); n < 3 {
		t.Errorf("%d requests: the remembered id should have failed (1), then the collection opened by name (2) and its tree loaded (3)", n)
	}
	m.stop(t)
	m = startMountEnv(t, nil, name, mnt, env.url, "--cache-dir", cacheDir)
	if n := m.metric(t, "chromafs_mount_chroma_requests"); n != 0 {
		t.Errorf("the mount after that waited for %d requests to be ready, want none: the new id and version are remembered", n)
	}
	waitMetric(t, m, "chromafs_tree_last_poll_timestamp_seconds", 1)
	if n := m.metric(t, "chromafs_tree_refreshes_total"); n != 0 {
		t.Errorf("the check of the remembered version refreshed %d times, want 0: it is current", n)
	}
	sameOutput(t, mnt, src2, "find . -type f | sort | xargs cat | md5sum")
}
