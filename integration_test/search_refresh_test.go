package integration_test

import (
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
// at once, since the mount has searched.
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
	startMount(t, name, mnt, "--refresh", "200ms")
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

	must(t, os.Remove(filepath.Join(src, "old/xylophone.md")))
	writeSource(t, src, map[string]string{"new/zanzibar.md": "# zanzibar\nthe zanzibar page, added\n"})
	if _, errOut, code := ingestCmd(t, nil, ingestArgs...); code != 0 {
		t.Fatalf("re-ingest: %s", errOut)
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
