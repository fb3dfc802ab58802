package integration_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/proc"
)

// TestDaemonWarmsOnceAttached (issue 32): chromafsd starts a
// collection's prefetch once the attach that placed its first view is
// done (not while it places it: the attach would compete with its own
// prefetch for the host's cores), so a view attached and not yet read is
// warmed all the same, while the agent thinks; and an attach answers
// with the mount in place (chromafs attach checks a stat of its root, on
// another device than its parent).
func TestDaemonWarmsOnceAttached(t *testing.T) {
	parent := t.TempDir()
	const files = 30
	dir := filepath.Join(parent, "site")
	must(t, os.MkdirAll(dir, 0o755))
	name, _ := ingestCorpus(t, dir, corpus.Spec{Files: files, Seed: 70})
	d := startDaemon(t, "--prefetch", "all")
	p := d.dirFor(0, "conv")
	if out, code := d.run(0, "attach", "--collection", name, p); code != 0 {
		t.Fatalf("attach %s: exit %d %s", name, code, out)
	}
	if m, ok := proc.MountAt(p); !ok || m.Device == "" {
		t.Fatalf("chromafs attach returned with no mount at %s", p)
	}
	col := func() api.Collection {
		t.Helper()
		for _, c := range d.status().Collections {
			if c.Name == name {
				return c
			}
		}
		t.Fatalf("collection %s is not open", name)
		return api.Collection{}
	}
	waitFor(t, 20*time.Second, func() bool { return col().PagesCached >= files },
		func() string { return fmt.Sprintf("a view attached and not read was not warmed: %+v", col()) })
}
