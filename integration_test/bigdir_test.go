package integration_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBigDirectoryListing: a directory of more than 4,096 entries is
// listed without an inode for each name (READDIRPLUS answers give names
// only, past their first part, as the kernel's readdirplus-auto policy
// does), and what stats, opens or greps its files afterwards sees exactly
// what it sees on local disk. A small directory keeps attributes in every
// answer: its stats cost no LOOKUP.
func TestBigDirectoryListing(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	src := filepath.Join(parent, "src")
	files := map[string]string{}
	for i := range 5000 {
		body := fmt.Sprintf("page %d\n", i)
		if i%997 == 0 {
			body += "needle\n"
		}
		files[fmt.Sprintf("big/f-%05d.txt", i)] = body
	}
	for i := range 50 {
		files[fmt.Sprintf("small/g-%02d.txt", i)] = fmt.Sprintf("small %d\n", i)
	}
	writeSource(t, src, files)
	name := collectionName(t)
	if _, errOut, code := ingestCmd(t, nil, "--chroma-url", env.url, "--collection", name, "--quiet", src); code != 0 {
		t.Fatalf("ingest: exit %d: %s", code, errOut)
	}
	mnt := mountDir(t, parent)
	m := startMount(t, name, mnt, "--debug", "--refresh", "100ms", "--prefetch", "none")
	// The debug log reaches m.logs through a pipe, after the answers: settle
	// looks up a name of its own (a marker no listing holds) and waits until
	// its line is in the log, so every earlier request's line is too.
	markers := 0
	lookups := func() int {
		n := 0
		for _, line := range strings.Split(m.logs.String(), "\n") {
			if strings.Contains(line, ": LOOKUP") && !strings.Contains(line, "settle-marker-") {
				n++
			}
		}
		return n
	}
	settle := func() {
		t.Helper()
		markers++
		marker := fmt.Sprintf("settle-marker-%04d", markers) // no marker's name holds another's
		if _, err := os.Stat(filepath.Join(mnt, marker)); !os.IsNotExist(err) {
			t.Fatalf("stat of the marker %s: %v, want ENOENT", marker, err)
		}
		waitFor(t, 10*time.Second, func() bool { return strings.Contains(m.logs.String(), marker) },
			func() string { return "the LOOKUP of " + marker + " never reached the debug log" })
	}
	sameOutput(t, mnt, src, "ls big | md5sum; ls big | wc -l")
	settle()
	before := lookups()
	sameOutput(t, mnt, src, "stat -c '%n %s %Y %F' big/* | md5sum")
	settle()
	if n := lookups() - before; n < 4000 || n > 5000 {
		t.Errorf("stat of every file after ls of the big directory made %d LOOKUPs; want about 5,000 (its listing gave names only past the first part)", n)
	}
	sameOutput(t, mnt, src, "grep -rl needle big | sort")
	sameOutput(t, mnt, src, "ls -l --time-style=+%s big | awk '{print $5, $6, $7}' | md5sum")
	sameOutput(t, mnt, src, "ls small | md5sum")
	settle()
	before = lookups()
	sameOutput(t, mnt, src, "stat -c '%n %s %Y' small/* | md5sum")
	settle()
	if n := lookups() - before; n != 0 {
		t.Errorf("stat of a small directory's files after ls made %d LOOKUPs; want 0 (its listing gives attributes)", n)
	}
	sameOutput(t, mnt, src, "find . -type f | sort | md5sum; find . | wc -l")

	// a refresh that adds and removes names: listings (whose offsets now
	// carry the directory's generation) still give exactly the new names
	writeSource(t, src, map[string]string{"big/a-new.txt": "new\n", "big/f-99999.txt": "last\n"})
	must(t, os.Remove(filepath.Join(src, "big/f-02500.txt")))
	refreshes := m.metric(t, "chromafs_tree_refreshes_total")
	if _, errOut, code := ingestCmd(t, nil, "--chroma-url", env.url, "--collection", name, "--quiet", src); code != 0 {
		t.Fatalf("ingest again: exit %d: %s", code, errOut)
	}
	waitMetric(t, m, "chromafs_tree_refreshes_total", refreshes+1)
	sameOutput(t, mnt, src, "ls big | md5sum; ls big | wc -l")
	sameOutput(t, mnt, src, "ls -f big | sort | md5sum")
	sameOutput(t, mnt, src, "stat -c '%n %s' big/* | md5sum")
}
