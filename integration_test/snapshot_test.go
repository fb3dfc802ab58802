package integration_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromafs/chromafs/internal/corpus"
)

// TestTreeSnapshotRestart: a restart on a host that mounted the same tree
// with the same groups loads it from the snapshot in the host tier (no
// decode, no build) and serves exactly what the first mount served; a mount
// with other groups never uses it (it sees its own pages); a damaged
// snapshot is skipped.
func TestTreeSnapshotRestart(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, _ := ingestCorpus(t, parent, corpus.Spec{Files: 200, Private: 5, Seed: 31})
	cache := t.TempDir()
	mnt := mountDir(t, parent)
	const view = "find . -printf '%p %i %s %m %T@ %n\\n' | sort; find . -type f -print0 | sort -z | xargs -0 md5sum"
	mountView := func(args ...string) (string, string) {
		t.Helper()
		m := startMount(t, name, mnt, append([]string{"--cache-dir", cache, "--refresh", "0"}, args...)...)
		out, code := sh(t, mnt, view, false)
		if code != 0 {
			t.Fatalf("view: exit %d", code)
		}
		m.stop(t)
		return out, m.logs.String()
	}
	first, logs := mountView()
	if !strings.Contains(logs, "tree_snapshot=false") {
		t.Fatalf("the first mount used a snapshot:\n%s", logs)
	}
	again, logs := mountView()
	if !strings.Contains(logs, "tree_snapshot=true") {
		t.Errorf("the restart did not use the snapshot:\n%s", logs)
	}
	if again != first {
		t.Errorf("the restart from the snapshot serves another tree: %s", firstDiff(again, first))
	}
	team, logs := mountView("--groups", "team")
	if !strings.Contains(logs, "tree_snapshot=false") || team == first {
		t.Errorf("a mount with other groups used the public snapshot, or sees the same pages")
	}
	entries, err := filepath.Glob(filepath.Join(cache, "pages-v1", "*", "*"))
	must(t, err)
	for _, e := range entries { // damage every entry: snapshots and trees alike
		if raw, err := os.ReadFile(e); err == nil && len(raw) > 200 {
			raw[len(raw)-3] ^= 0x20
			must(t, os.WriteFile(e, raw, 0o600))
		}
	}
	damaged, logs := mountView()
	if !strings.Contains(logs, "tree_snapshot=false") || damaged != first {
		t.Errorf("a damaged snapshot was used, or the mount after it serves another tree:\n%s", logs)
	}
}
