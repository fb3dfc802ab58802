package integration_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/corpus"
)

// TestSearchAfterRefresh: a search the kernel has cached is asked again
// after a refresh brings a page that answers it (the swap drops .search
// from the kernel's caches), and a page the refresh removed is no longer
// among the answers; the lexical index of the new tree version is built
// at once, since the mount has searched: it is ready, with the new tree's
// page count (one more), before any search of the new tree is asked.
func TestSearchAfterRefresh(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 30, Seed: 62})
	writeSource(t, src, map[string]string{"old/xylophone.md": "# xylophone\nthe xylophone page, to be removed\n"})
	ingestArgs := []string{"--chroma-url", env.url, "--collection", name, "--quiet", src}
	if _, errOut, code := ingestCmd(t, nil, ingestArgs...); code != 0 {
		t.Fatalf("ingest: %s", errOut)
	}
	mnt := mountDir(t, parent)
	m := startMount(t, name, mnt, "--refresh", "200ms")
	list := func(q string) string {
		out, code := sh(t, mnt, "ls '.search/"+q+"?mode=lexical/'", false)
		if code != 0 {
			t.Fatalf("ls .search/%s: exit %d", q, code)
		}
		return out
	}
	if got := list("zanzibar"); got != "" {
		t.Fatalf("zanzibar found before any page says it: %q", got)
	}
	if got := list("xylophone"); !strings.Contains(got, "01-xylophone.md") {
		t.Fatalf("xylophone: %q", got)
	}

	// the new tree has one page more than the old (two added, one
	// removed): its index is told from the old one by its page count
	pages := m.metric(t, "chromafs_search_index_pages")
	refreshes := m.metric(t, "chromafs_tree_refreshes_total")
	must(t, os.Remove(filepath.Join(src, "old/xylophone.md")))
	writeSource(t, src, map[string]string{"new/zanzibar.md": "# zanzibar\nthe zanzibar page, added\n", "new/quince.md": "# quince\nanother page\n"})
	if _, errOut, code := ingestCmd(t, nil, ingestArgs...); code != 0 {
		t.Fatalf("re-ingest: %s", errOut)
	}
	waitMetric(t, m, "chromafs_tree_refreshes_total", refreshes+1)
	searches := m.metric(t, "chromafs_searches_total")
	waitFor(t, 20*time.Second, func() bool {
		return m.metric(t, "chromafs_search_index_ready") == 1 && m.metric(t, "chromafs_search_index_pages") == pages+1
	}, func() string {
		return fmt.Sprintf("the new tree's lexical index was not built before a search asked for it: ready %d, %d pages (the old tree's %d)",
			m.metric(t, "chromafs_search_index_ready"), m.metric(t, "chromafs_search_index_pages"), pages)
	})
	if n := m.metric(t, "chromafs_searches_total"); n != searches {
		t.Errorf("%d searches ran while the new index was awaited: the index was not built of itself", n-searches)
	}
	waitFor(t, 20*time.Second, func() bool { return strings.Contains(list("zanzibar"), "01-zanzibar.md") },
		func() string { return "a page added by a refresh never answered a search the kernel had cached" })
	if got := list("xylophone"); strings.Contains(got, "xylophone") {
		t.Errorf("a page the refresh removed still answers: %q", got)
	}
	target, err := os.Readlink(filepath.Join(mnt, ".search/zanzibar?mode=lexical/01-zanzibar.md"))
	if err != nil || target != "../../new/zanzibar.md" {
		t.Errorf("readlink: %q, %v", target, err)
	}
	if b, err := os.ReadFile(filepath.Join(mnt, ".search/zanzibar?mode=lexical/01-zanzibar.md")); err != nil || !strings.Contains(string(b), "added") {
		t.Errorf("the link gives %q, %v", b, err)
	}
}

// TestSearchPrebuild: with --search-prebuild, the host's first mount of a
// view builds its lexical index by itself, before any search, and keeps
// it in the host tier; the next mount of the view on the host reads it
// from there at its first search instead of building it again.
func TestSearchPrebuild(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 30, Seed: 63})
	writeSource(t, src, map[string]string{"tools/quokka.md": "# quokka\nthe quokka page\n"})
	if _, errOut, code := ingestCmd(t, nil, "--chroma-url", env.url, "--collection", name, "--quiet", src); code != 0 {
		t.Fatalf("ingest: %s", errOut)
	}
	mnt := mountDir(t, parent)
	cacheDir := t.TempDir()

	first := startMount(t, name, mnt, "--cache-dir", cacheDir, "--search-prebuild")
	waitMetric(t, first, "chromafs_search_index_ready", 1)
	if n := first.metric(t, "chromafs_searches_total"); n != 0 {
		t.Errorf("%d searches counted before any was asked", n)
	}
	if first.metric(t, "chromafs_search_index_built") != 1 || first.metric(t, "chromafs_search_index_pages") < 31 {
		t.Errorf("the first mount's index: built %d, %d pages; want built here, with the 31 pages",
			first.metric(t, "chromafs_search_index_built"), first.metric(t, "chromafs_search_index_pages"))
	}
	first.stop(t)

	next := startMount(t, name, mnt, "--cache-dir", cacheDir, "--search-prebuild")
	out, code := sh(t, mnt, "ls '.search/quokka?mode=lexical/'", false)
	if code != 0 || !strings.Contains(out, "01-quokka.md") {
		t.Fatalf("ls .search/quokka: exit %d, %q", code, out)
	}
	if next.metric(t, "chromafs_search_index_ready") != 1 || next.metric(t, "chromafs_search_index_built") != 0 {
		t.Errorf("the next mount's index: ready %d, built %d; want it read from the host tier",
			next.metric(t, "chromafs_search_index_ready"), next.metric(t, "chromafs_search_index_built"))
	}
}
