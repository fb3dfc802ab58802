package integration_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/proc"
	"github.com/chromafs/chromafs/internal/testenv"
)

// TestDaemonOwnersShareAMount: the attachments of one view served to
// different users (root attaching with --owner, as for a sandbox per uid)
// are copies of one FUSE mount, idmapped: each owner sees the view as
// theirs and no other user enters it, and what one owner's conversation
// read is in the page cache the next owner's reads (no read reaches the
// daemon, where an attachment with its own mount does). After a SIGKILL
// and a new daemon, each copy answers again as its owner's, also where
// every mount is shared (systemd's hosts).
func TestDaemonOwnersShareAMount(t *testing.T) {
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 30, Private: 3, Seed: 48})
	d := startDaemon(t, "--linger", "10m") // with --linger 0, a mount per owner: a detach cuts its user's sandboxes off
	// as on a host where systemd makes every mount shared: the daemon's
	// mounts and the attachments' paths under a shared mount, where a
	// copy of a shared mount joins its peer group
	d.kill(syscall.SIGKILL)
	must(t, syscall.Mount(d.dir, d.dir, "", syscall.MS_BIND, ""))
	must(t, syscall.Mount("", d.dir, "", syscall.MS_SHARED, ""))
	d.start()
	public := filepath.Join(parent, "public")
	visibleCopy(t, src, public, false)
	if b, _ := os.ReadFile(d.logFile); strings.Contains(string(b), "this kernel makes no idmapped copy") {
		testenv.Missing(t, "this kernel makes no idmapped copy of a FUSE mount (Linux 6.12 does): %s", b)
	}

	attach := func(dir string, args ...string) string {
		t.Helper()
		p := d.dirFor(0, dir)
		if out, code := d.run(0, append(append([]string{"attach", "--collection", name}, args...), p)...); code != 0 {
			t.Fatalf("attach %s %q: exit %d %s", dir, args, code, out)
		}
		return p
	}
	log := filepath.Join(d.dir, "access.log")
	first := attach("first", "--owner", "65534:65534")
	second := attach("second", "--owner", "65533:65533")
	root := attach("root")
	logged := attach("logged", "--owner", "65534:65534", "--access-log", log) // a mount of its own: a log sees its mount's reads

	device := func(p string) string {
		t.Helper()
		mi, ok := proc.MountAt(p)
		if !ok {
			t.Fatalf("%s is not a mount", p)
		}
		return mi.Device
	}
	if a, b, r, l := device(first), device(second), device(root), device(logged); a != b || a != r || l == a {
		t.Errorf("FUSE connections: owner 65534 %s, owner 65533 %s, root %s, with an access log %s: want the first three one, the last its own", a, b, r, l)
	}
	as := func(uid int, script string) (string, int) {
		out, err := exec.Command("setpriv", fmt.Sprintf("--reuid=%d", uid), fmt.Sprintf("--regid=%d", uid), "--clear-groups", "sh", "-c", script).CombinedOutput()
		return string(out), exitCode(t, err)
	}
	page := strings.Fields(mustSh(t, public, "find . -type f | sort | head -1"))[0]
	for p, owner := range map[string]uint32{first: 65534, second: 65533, root: 0} {
		for _, f := range []string{p, filepath.Join(p, page)} {
			var st syscall.Stat_t
			must(t, syscall.Stat(f, &st))
			if st.Uid != owner || st.Gid != owner {
				t.Errorf("%s belongs to %d:%d, want its owner %d:%d", f, st.Uid, st.Gid, owner, owner)
			}
		}
	}
	for _, c := range []struct {
		uid int
		dir string
	}{{65533, first}, {65534, second}, {65534, root}} {
		if out, code := as(c.uid, "ls "+c.dir); code == 0 || !strings.Contains(out, "Permission denied") {
			t.Errorf("uid %d listed %s: exit %d %q", c.uid, c.dir, code, out)
		}
	}

	reads := func() int64 {
		var n int64
		for _, v := range d.status().Views {
			n += v.Reads
		}
		return n
	}
	const walk = "find . -type f | sort | xargs md5sum"
	want := mustSh(t, public, walk)
	before := reads()
	if got, code := as(65534, "cd "+first+" && "+walk); code != 0 || got != want {
		t.Fatalf("owner 65534's first conversation: exit %d %s", code, firstDiff(got, want))
	}
	afterFirst := reads()
	if got, code := as(65533, "cd "+second+" && "+walk); code != 0 || got != want {
		t.Fatalf("owner 65533's conversation: exit %d %s", code, firstDiff(got, want))
	}
	afterSecond := reads()
	if got, code := as(65534, "cd "+logged+" && "+walk); code != 0 || got != want {
		t.Fatalf("the attachment with an access log: exit %d %s", code, firstDiff(got, want))
	}
	afterLogged := reads()
	t.Logf("reads reaching the daemon: first owner %d, next owner %d, a mount of its own %d", afterFirst-before, afterSecond-afterFirst, afterLogged-afterSecond)
	if afterFirst == before || afterLogged == afterSecond || !fromKernelCache(afterSecond-afterFirst, afterFirst-before) {
		t.Errorf("reads reaching the daemon: first owner %d, next owner %d, a mount of its own %d: want the next owner's 1 or at most 5%% of the first's (the first's page cache), the others more",
			afterFirst-before, afterSecond-afterFirst, afterLogged-afterSecond)
	}

	// a new daemon stacks an idmapped copy on each dead one, on its path
	// only (the copies are not peers: one stacked on another's path would
	// refuse its owner and drop its record)
	d.kill(syscall.SIGKILL)
	d.start()
	if n := len(d.status().Attachments); n != 4 {
		t.Errorf("%d attachments after a restart, want 4", n)
	}
	for _, c := range []struct {
		uid  int
		dir  string
		fail bool
	}{{65534, first, false}, {65533, second, false}, {65533, first, true}, {65534, second, true}} {
		waitFor(t, 10*time.Second, func() bool { return answers(c.dir) }, func() string { return c.dir + " was not placed again" })
		got, code := as(c.uid, "cd "+c.dir+" && "+walk)
		if c.fail != (code != 0) || (!c.fail && got != want) {
			t.Errorf("after a restart, uid %d in %s: exit %d (want refused: %v) %s", c.uid, c.dir, code, c.fail, firstDiff(got, want))
		}
	}
	if a, b, r, l := device(first), device(second), device(root), device(logged); a != b || a != r || l == a {
		t.Errorf("after a restart, FUSE connections: owner 65534 %s, owner 65533 %s, root %s, with an access log %s: want the first three one, the last its own", a, b, r, l)
	}
}
