package integration_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/internal/corpus"
)

// TestDaemonPrefetchesAtFirstUse (issue 32): chromafsd starts a
// collection's prefetch at the first request a mount of its views serves,
// or --prefetch-after after its first view is placed, whichever comes
// first: not while the attach answers (it would compete with the attach
// for the host's cores: a dropped view's attach on a busy host waited for
// its own prefetch). chromafs attach's own check that the mount answers
// is not such a request. With --prefetch-after 1h, two collections are
// attached, then one is listed: once its prefetch has loaded every page,
// the other, attached before it was listed, has loaded none; it starts
// at its first request. With --prefetch-after 200ms, a collection
// attached and never read is warmed all the same.
func TestDaemonPrefetchesAtFirstUse(t *testing.T) {
	parent := t.TempDir()
	const files = 30
	var names [2]string
	for i := range names {
		dir := filepath.Join(parent, fmt.Sprint(i))
		must(t, os.MkdirAll(dir, 0o755))
		names[i], _ = ingestCorpus(t, dir, corpus.Spec{Files: files, Seed: uint64(70 + i)})
	}
	d := startDaemon(t, "--prefetch", "all", "--prefetch-after", "1h")
	var paths [2]string
	for i, name := range names {
		paths[i] = d.dirFor(0, fmt.Sprint("conv-", i))
		if out, code := d.run(0, "attach", "--collection", name, paths[i]); code != 0 {
			t.Fatalf("attach %s: exit %d %s", name, code, out)
		}
	}
	col := func(name string) api.Collection { t.Helper(); return collectionIn(t, d, name) }
	if _, err := os.ReadDir(paths[0]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() bool { return col(names[0]).PagesCached >= files },
		func() string {
			return fmt.Sprintf("listing the first view did not prefetch its %d pages: %+v", files, col(names[0]))
		})
	if c := col(names[1]); c.PagesCached != 0 || c.Fetched != 0 {
		t.Errorf("the view attached and never read cached %d chunks (%d bytes fetched) while the other's prefetch loaded all its %d pages; want none", c.PagesCached, c.Fetched, files)
	}
	// its first request starts it
	if _, err := os.ReadDir(paths[1]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() bool { return col(names[1]).PagesCached >= files },
		func() string {
			return fmt.Sprintf("listing the second view did not prefetch its %d pages: %+v", files, col(names[1]))
		})

	// not read, warmed all the same --prefetch-after after it was placed
	later := startDaemon(t, "--prefetch", "all", "--prefetch-after", "200ms")
	p := later.dirFor(0, "conv-later")
	if out, code := later.run(0, "attach", "--collection", names[0], p); code != 0 {
		t.Fatalf("attach %s: exit %d %s", names[0], code, out)
	}
	waitFor(t, 20*time.Second, func() bool { return collectionIn(t, later, names[0]).PagesCached >= files },
		func() string {
			return fmt.Sprintf("a view attached and not read was not warmed after --prefetch-after: %+v", collectionIn(t, later, names[0]))
		})
}

// collectionIn is the collection name of d's status.
func collectionIn(t *testing.T, d *daemonProc, name string) api.Collection {
	t.Helper()
	for _, c := range d.status().Collections {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("collection %s is not open", name)
	return api.Collection{}
}
