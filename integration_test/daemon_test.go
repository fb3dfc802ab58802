package integration_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/harness"
	"github.com/chromafs/chromafs/internal/proc"
	"github.com/chromafs/chromafs/internal/testenv"
)

// The host daemon (issue 22): chromafsd serving views to the chromafs
// client, the policy and the path checks as another user, views handed
// to bubblewrap sandboxes, a SIGKILL and a restart under running
// sandboxes, and detaches that leave no mount behind.

// daemonProc is a chromafsd under test.
type daemonProc struct {
	t        *testing.T
	dir      string // 0755: the socket, the client binary, attachment paths for other users
	socket   string
	stateDir string
	logFile  string
	args     []string
	env      []string
	mu       sync.Mutex
	cmd      *exec.Cmd
	client   string // a copy of chromafs other users may run
}

// startDaemon runs chromafsd as root with a socket other users (group
// 65534) may use, a private state and cache directory, and args.
func startDaemon(t *testing.T, args ...string) *daemonProc {
	t.Helper()
	requireFUSE(t)
	requireRoot(t)
	dir, err := os.MkdirTemp("", "chromafsd-it-")
	must(t, err)
	must(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	d := &daemonProc{t: t, dir: dir, socket: filepath.Join(dir, "chromafsd.sock"), stateDir: filepath.Join(dir, "state"),
		logFile: filepath.Join(dir, "chromafsd.log"), client: filepath.Join(dir, "chromafs")}
	must(t, exec.Command("cp", filepath.Join(env.bin, "chromafs"), d.client).Run())
	// --linger 0: the tests of detach check that it leaves no mount
	// behind and cuts off a sandbox's copies; TestDaemonLinger gives its
	// own (the last --linger given wins)
	d.args = append([]string{"--chroma-url", env.url, "--socket", d.socket, "--socket-group", "65534", "--state-dir", d.stateDir,
		"--cache-dir", filepath.Join(dir, "cache"), "--log-file", d.logFile, "--refresh", "0", "--linger", "0"}, args...)
	d.env = append(os.Environ(), "CHROMA_TOKEN=tok-"+strings.Repeat("s3cr3t", 4))
	d.start()
	t.Cleanup(d.cleanup)
	return d
}

func (d *daemonProc) start() {
	d.t.Helper()
	cmd := exec.Command(filepath.Join(env.bin, "chromafsd"), d.args...)
	cmd.Env = d.env
	must(d.t, cmd.Start())
	d.mu.Lock()
	d.cmd = cmd
	d.mu.Unlock()
	waitFor(d.t, 10*time.Second, func() bool { _, code := d.run(0, "list"); return code == 0 },
		func() string { b, _ := os.ReadFile(d.logFile); return "chromafsd never answered:\n" + string(b) })
}

// kill sends sig and waits for the daemon to exit.
func (d *daemonProc) kill(sig syscall.Signal) {
	d.t.Helper()
	d.mu.Lock()
	cmd := d.cmd
	d.cmd = nil
	d.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	_ = cmd.Wait()
}

// cleanup stops the daemon and takes away whatever it left mounted.
func (d *daemonProc) cleanup() {
	d.kill(syscall.SIGKILL)
	for range 4 {
		for _, mp := range mountsUnder(d.dir) {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	}
}

// run runs the client as uid (0: root; else with gid 65534, the socket's
// group) and returns its combined output and exit code.
func (d *daemonProc) run(uid int, args ...string) (string, int) {
	d.t.Helper()
	all := append([]string{"--socket", d.socket}, args...)
	cmd := exec.Command(d.client, all...)
	if uid != 0 {
		cmd = exec.Command("setpriv", append([]string{fmt.Sprintf("--reuid=%d", uid), "--regid=65534", "--clear-groups", d.client}, all...)...)
	}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), exitCode(d.t, err)
}

// dirFor makes an empty directory under d.dir owned by uid.
func (d *daemonProc) dirFor(uid int, name string) string {
	d.t.Helper()
	p := filepath.Join(d.dir, name)
	must(d.t, os.MkdirAll(p, 0o755))
	must(d.t, os.Chown(p, uid, 65534))
	return p
}

func (d *daemonProc) status() api.Status {
	d.t.Helper()
	out, code := d.run(0, "list", "--json")
	if code != 0 {
		d.t.Fatalf("chromafs list --json: exit %d: %s", code, out)
	}
	var st api.Status
	must(d.t, json.Unmarshal([]byte(out), &st))
	return st
}

// leftMounts lists the mount points at or below dir but the daemon's own
// STATE_DIR/mnt (a private bind it keeps while it runs, and after a
// stop for the next daemon): what attachments and views left.
func leftMounts(dir string) []string {
	var out []string
	for _, m := range mountsUnder(dir) {
		if !strings.HasSuffix(m, "/state/mnt") {
			out = append(out, m)
		}
	}
	return out
}

// mountsUnder lists mount points at or below dir.
func mountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	slices.Reverse(out) // the last mounted first
	return out
}

// visibleCopy copies the pages of src that groups may see (corpus pages
// marked public: false belong to [team]) to dst, for comparing.
func visibleCopy(t *testing.T, src, dst string, team bool) {
	t.Helper()
	must(t, filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b[:min(len(b), 200)], []byte("public: false")) && !team {
			return nil
		}
		rel, _ := filepath.Rel(src, p)
		copyFile(t, filepath.Join(dst, rel), bytes.NewReader(b))
		return nil
	}))
}

// bwrapArgs is the sandbox recipe of the README: the attachment bound
// read-only at /docs, nothing else of the host but /usr, a new /proc.
func bwrapArgs(path string, extra ...string) []string {
	args := []string{"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--ro-bind", path, "/docs", "--unshare-all", "--die-with-parent"}
	return append(args, extra...)
}

func requireBwrap(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("bwrap")
	testenv.Require(t, err == nil, "bwrap (Debian's bubblewrap) is missing")
}

// TestDaemonPolicyAndPaths: what a user who is not root may attach and
// where, decided by the policy and fusermount3's rule, each refusal exit
// 1 with one line; a view attached for one user cannot be entered by
// another; the client carries nothing of chroma-go.
func TestDaemonPolicyAndPaths(t *testing.T) {
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 30, Private: 3, Seed: 41})
	policy := filepath.Join(parent, "policy.yaml")
	must(t, os.WriteFile(policy, []byte(fmt.Sprintf("- users: [65534]\n  collections: [%s]\n  groups: [team]\n- users: [65533]\n  collections: [%s]\n  groups: []\n", name, name)), 0o600))
	d := startDaemon(t, "--policy", policy)
	team, public := filepath.Join(parent, "team"), filepath.Join(parent, "public")
	visibleCopy(t, src, team, true)
	visibleCopy(t, src, public, false)

	mine := d.dirFor(65534, "nobody-docs")
	if out, code := d.run(65534, "attach", "--collection", name, "--groups", "team", mine); code != 0 || len(out) != 12 {
		t.Fatalf("attach as uid 65534 with a granted group: exit %d %q", code, out)
	}
	asNobody := func(script string) (string, int) {
		out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", script).CombinedOutput()
		return string(out), exitCode(t, err)
	}
	for _, s := range []string{"find . -type f | sort | xargs md5sum"} {
		got, code := asNobody("cd " + mine + " && " + s)
		want, _ := sh(t, team, s, false)
		if code != 0 || got != want {
			t.Errorf("%s as uid 65534 on its attachment: exit %d, %s", s, code, firstDiff(got, want))
		}
	}
	if out, err := exec.Command("setpriv", "--reuid=65533", "--regid=65533", "--clear-groups", "ls", mine).CombinedOutput(); err == nil || !strings.Contains(string(out), "Permission denied") {
		t.Errorf("another user listed uid 65534's view: %v %q", err, out)
	}

	// root attaches for the user a sandbox runs as: only that user enters
	served := d.dirFor(0, "served")
	if out, code := d.run(0, "attach", "--collection", name, "--owner", "65534:65534", served); code != 0 {
		t.Fatalf("attach --owner as root: exit %d %s", code, out)
	}
	if got, code := asNobody("cd " + served + " && find . -type f | sort | xargs md5sum"); code != 0 || got != mustSh(t, public, "find . -type f | sort | xargs md5sum") {
		t.Errorf("the user a view is served to: exit %d %s", code, firstDiff(got, mustSh(t, public, "find . -type f | sort | xargs md5sum")))
	}
	if out, err := exec.Command("setpriv", "--reuid=65533", "--regid=65533", "--clear-groups", "ls", served).CombinedOutput(); err == nil || !strings.Contains(string(out), "Permission denied") {
		t.Errorf("a third user listed a view served to uid 65534: %v %q", err, out)
	}
	if out, code := d.run(65534, "attach", "--collection", name, "--owner", "65533", d.dirFor(65534, "for-other")); code != 1 || !strings.Contains(out, "only root may serve a view to another user") {
		t.Errorf("--owner another uid, not as root: exit %d %q", code, out)
	}

	link := filepath.Join(d.dir, "link")
	must(t, os.Symlink(d.dirFor(65534, "target"), link))
	full := d.dirFor(65534, "full")
	must(t, os.WriteFile(filepath.Join(full, "x"), nil, 0o644))
	for _, c := range []struct {
		uid  int
		args []string
		says string
	}{
		{65534, []string{"--collection", name, "--groups", "team,admin", d.dirFor(65534, "a")}, "may not ask for group(s) admin"},
		{65534, []string{"--collection", name + "-other", d.dirFor(65534, "b")}, "may not attach collection"},
		{65533, []string{"--collection", name, "--groups", "team", d.dirFor(65533, "c")}, "granted: public pages only"},
		{65534, []string{"--collection", name, d.dirFor(0, "roots")}, "owned by uid 0"},
		{65534, []string{"--collection", name, link}, "symbolic link"},
		{65534, []string{"--collection", name, full}, "not empty"},
		{65534, []string{"--collection", name, mine}, "in use"},
		{0, []string{"--collection", name + "-missing", d.dirFor(0, "missing")}, "not found"},
		{7, []string{"--collection", name, filepath.Join(d.dir, "u7")}, "permission denied"},
	} {
		out, code := d.run(c.uid, append([]string{"attach"}, c.args...)...)
		if code != 1 || !strings.Contains(out, c.says) || strings.Contains(out, "\n") {
			t.Errorf("attach %q as uid %d: exit %d %q, want exit 1 and one line saying %q", c.args, c.uid, code, out, c.says)
		}
	}
	if out, code := d.run(65534, "detach", mine); code != 0 {
		t.Errorf("detach as its owner: exit %d %s", code, out)
	}
	if _, ok := proc.MountAt(mine); ok {
		t.Error("still mounted after detach")
	}
	list := exec.Command("go", "list", "-deps", "./cmd/chromafs")
	list.Dir = repoRoot()
	deps, err := list.Output()
	must(t, err)
	if strings.Contains(string(deps), "chroma-go") {
		t.Error("the chromafs client imports chroma-go")
	}
}

// TestDaemonSandboxAndRestart: the views of one user share one mount;
// a bubblewrap sandbox over an attachment sees the view and nothing else
// of chromafs; another view of the collection opens it no more and reads
// from its one engine; after a SIGKILL and a new daemon, every attachment
// answers within 2 s and the running sandbox reads its view again;
// detach leaves no mount behind, and a sandbox's copies of the view's
// mounts end with its last detach.
func TestDaemonSandboxAndRestart(t *testing.T) {
	requireBwrap(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 40, Private: 4, Seed: 42})
	d := startDaemon(t)
	public := filepath.Join(parent, "public")
	visibleCopy(t, src, public, false)
	var paths []string
	for i := range 3 {
		p := d.dirFor(0, fmt.Sprintf("conv-%d", i))
		if out, code := d.run(0, "attach", "--collection", name, p); code != 0 {
			t.Fatalf("attach: exit %d %s", code, out)
		}
		paths = append(paths, p)
	}
	private := d.dirFor(0, "private")
	if out, code := d.run(0, "attach", "--private", "--collection", name, private); code != 0 {
		t.Fatalf("attach --private: exit %d %s", code, out)
	}
	mountOf := func(p string) proc.Mount {
		t.Helper()
		m, ok := proc.MountAt(p)
		if !ok || m.Device == "" {
			t.Fatalf("no mount at %s: %+v", p, m)
		}
		return m
	}
	devs := map[string]bool{}
	for _, p := range paths {
		devs[mountOf(p).Device] = true
	}
	pm := mountOf(private)
	if len(devs) != 1 || devs[pm.Device] {
		t.Errorf("three attachments of one view and user on %d mounts (want 1), the private one on one of them: %v", len(devs), devs[pm.Device])
	}
	if st := d.status(); len(st.Views) != 1 || st.Views[0].Attachments != 4 || len(st.Attachments) != 4 {
		t.Errorf("list: %d views, %d attachments", len(st.Views), len(st.Attachments))
	}

	hidden := ""
	must(t, filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if b, _ := os.ReadFile(p); hidden == "" && err == nil && !e.IsDir() && bytes.Contains(b, []byte("public: false")) {
			hidden, _ = filepath.Rel(src, p)
		}
		return err
	}))
	// the token is in the daemon's environment (the control): no
	// process's environment in the sandbox holds it, nor its mount table;
	// a canary in the sandbox's own environment is found the same way
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", d.pid())); err != nil || !bytes.Contains(b, []byte("s3cr3t")) {
		t.Fatalf("the daemon's environment does not hold the token (%v): the sandbox's search for it would prove nothing", err)
	}
	inside := fmt.Sprintf(`test -e /docs/%s && echo HIDDEN-VISIBLE; cat /docs/%s 2>/dev/null && echo HIDDEN-READ;
		CANARY=c4n4ry grep -q c4n4ry /proc/self/environ || echo ENVIRON-NOT-SEARCHED;
		grep -l s3cr3t /proc/self/mountinfo /proc/[0-9]*/environ 2>/dev/null;
		ls /run /var 2>/dev/null; cd /docs && find . -type f | sort | xargs md5sum`, hidden, hidden)
	out, err := exec.Command("bwrap", bwrapArgs(paths[0], "sh", "-c", inside)...).CombinedOutput()
	want, _ := sh(t, public, "find . -type f | sort | xargs md5sum", false)
	if err != nil || string(out) != want {
		t.Errorf("in a sandbox: %v, %s", err, firstDiff(string(out), want))
	}

	// another view of the collection (its own mount) opens nothing again
	// and reads from the collection's one engine: the public pages the
	// sandbox's walk loaded are neither fetched nor cached again
	colOf := func() api.Collection {
		t.Helper()
		st := d.status()
		if len(st.Collections) != 1 {
			t.Fatalf("list: collections %+v, want 1", st.Collections)
		}
		return st.Collections[0]
	}
	before := colOf()
	teamDir := d.dirFor(0, "team")
	if out, code := d.run(0, "attach", "--collection", name, "--groups", "team", teamDir); code != 0 {
		t.Fatalf("attach --groups team: exit %d %s", code, out)
	}
	if tm := mountOf(teamDir); devs[tm.Device] || tm.Device == pm.Device {
		t.Errorf("the team view's attachment is on the public view's mount %s", tm.Device)
	}
	if got, code := sh(t, public, "find . -type f | sort | (cd "+teamDir+" && xargs md5sum)", false); code != 0 || got != want {
		t.Errorf("the public pages through the team view: exit %d, %s", code, firstDiff(got, want))
	}
	if after := colOf(); before.Fetched == 0 || before.PagesCached == 0 || after.Fetched != before.Fetched || after.PagesCached != before.PagesCached {
		t.Errorf("reading the public pages through another view: fetched %d -> %d bytes, %d -> %d pages cached; want neither fetched nor cached again (one read engine per collection)",
			before.Fetched, after.Fetched, before.PagesCached, after.PagesCached)
	}
	if st := d.status(); len(st.Views) != 2 || len(st.Attachments) != 5 || len(st.Collections) != 1 || st.Collections[0].Views != 2 {
		t.Errorf("list: %d views, %d attachments, collections %+v; want one collection opened once for its 2 views", len(st.Views), len(st.Attachments), st.Collections)
	}

	// a sandbox that reads after the restart, never having looked before
	marker := filepath.Join(parent, "go")
	must(t, os.Mkdir(marker, 0o777))
	sandbox := exec.Command("bwrap", bwrapArgs(paths[1], "--bind", marker, "/marker", "sh", "-c",
		`while [ ! -e /marker/now ]; do sleep 0.05; done; cd /docs && find . -type f | sort | xargs md5sum`)...)
	var sandboxOut bytes.Buffer
	sandbox.Stdout, sandbox.Stderr = &sandboxOut, &sandboxOut
	must(t, sandbox.Start())
	d.kill(syscall.SIGKILL)
	start := time.Now()
	d.start()
	all := append(append(paths[:len(paths):len(paths)], private), teamDir)
	for _, p := range all {
		waitFor(t, 2*time.Second-time.Since(start), func() bool { return answers(p) },
			func() string { return p + " does not answer 2 s after the new daemon started" })
	}
	t.Logf("every attachment answered %v after the new daemon started", time.Since(start).Round(time.Millisecond))
	must(t, os.WriteFile(filepath.Join(marker, "now"), nil, 0o644))
	if err := sandbox.Wait(); err != nil || sandboxOut.String() != want {
		t.Errorf("the sandbox running across the restart: %v, %s", err, firstDiff(sandboxOut.String(), want))
	}
	if st := d.status(); len(st.Collections) != 1 || st.Collections[0].Views != 2 || len(st.Views) != 2 {
		t.Errorf("after the restart: collections %+v, %d views; want one collection opened once for its 2 views", st.Collections, len(st.Views))
	}

	// a sandbox holding copies of the shared and the private mount across
	// the detaches: the last detach of the view aborts each mount's
	// connection, so the copies end too (a new lookup is ENOTCONN, where
	// a live server would say ENOENT) and no server waits for them
	held := exec.Command("bwrap", bwrapArgs(paths[0], "--ro-bind", private, "/private", "--bind", marker, "/marker", "sh", "-c",
		`ls /docs >/dev/null && ls /private >/dev/null && touch /marker/held
		while [ ! -e /marker/detached ]; do sleep 0.05; done
		ls /docs/never-looked-up 2>&1; ls /private/never-looked-up 2>&1; exit 0`)...)
	var heldOut bytes.Buffer
	held.Stdout, held.Stderr = &heldOut, &heldOut
	must(t, held.Start())
	t.Cleanup(func() { _ = held.Process.Kill() }) // a failure below must not leave it holding the mounts
	waitFor(t, 10*time.Second, func() bool { _, err := os.Stat(filepath.Join(marker, "held")); return err == nil },
		func() string { return "the sandbox never read its copies: " + heldOut.String() })
	for _, p := range all {
		if out, code := d.run(0, "detach", p); code != 0 {
			t.Errorf("detach %s: exit %d %s", p, code, out)
		}
	}
	if left := leftMounts(d.dir); len(left) > 0 {
		t.Errorf("mounts left after every detach: %v", left)
	}
	must(t, os.WriteFile(filepath.Join(marker, "detached"), nil, 0o644))
	if err := waitCmd(held, 30*time.Second); err != nil || strings.Count(heldOut.String(), "Transport endpoint is not connected") != 2 {
		t.Errorf("the sandbox's copies after the view's last detach: %v %q, want both ENOTCONN (the connections aborted)", err, heldOut.String())
	}
	if b, _ := os.ReadFile(d.logFile); bytes.Contains(b, []byte("did not stop")) {
		t.Errorf("a mount's server waited for a sandbox's copy at detach:\n%s", b)
	}
}

// TestDaemonDetachOnExit: with --detach-on-exit, SIGTERM leaves no mount
// behind and no attachment recorded; without it, SIGTERM keeps them for
// the next daemon, which places them again.
func TestDaemonDetachOnExit(t *testing.T) {
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 5, Seed: 43})
	d := startDaemon(t)
	p := d.dirFor(0, "conv")
	if out, code := d.run(0, "attach", "--collection", name, p); code != 0 {
		t.Fatalf("attach: exit %d %s", code, out)
	}
	d.kill(syscall.SIGTERM)
	d.start()
	if st := d.status(); len(st.Attachments) != 1 {
		t.Fatalf("after SIGTERM and a new start: %d attachments, want the 1 kept", len(st.Attachments))
	}
	// placed again: a FUSE mount that answers and serves the collection
	// (an empty directory would list too, and answer statfs)
	placed := func() bool { m, ok := proc.MountAt(p); return ok && strings.HasPrefix(m.FSType, "fuse") && answers(p) }
	waitFor(t, 5*time.Second, placed, func() string { return p + " was not placed again after a new start" })
	if got, want := mustSh(t, p, "find . -type f | sort | xargs md5sum"), mustSh(t, src, "find . -type f | sort | xargs md5sum"); got != want || want == "" {
		t.Errorf("the kept attachment after a new start: %s", firstDiff(got, want))
	}
	d.kill(syscall.SIGTERM)
	d.args = append(d.args, "--detach-on-exit")
	d.start()
	// the control of the check below: the attachment is mounted when the
	// daemon with --detach-on-exit is stopped
	waitFor(t, 5*time.Second, placed, func() string { return p + " was not placed by the daemon with --detach-on-exit" })
	if st := d.status(); len(st.Attachments) != 1 || st.Attachments[0].Waiting {
		t.Fatalf("before SIGTERM with --detach-on-exit: %+v; want the 1 kept, placed", st.Attachments)
	}
	d.kill(syscall.SIGTERM)
	if left := mountsUnder(d.dir); len(left) > 0 {
		t.Errorf("mounts left after SIGTERM with --detach-on-exit: %v", left)
	}
	d.start()
	if st := d.status(); len(st.Attachments) != 0 {
		t.Errorf("attachments recorded after --detach-on-exit: %d", len(st.Attachments))
	}
}

// trickle opens two API connections whose request never ends, one cut
// inside its headers, one inside its body, and returns a check that waits
// until the daemon has closed both: a request is read within 10 s
// (docs/SEMANTICS.md, Security), else its connection is closed. The
// caller does other work meanwhile; the check waits for what is left.
func (d *daemonProc) trickle() (check func()) {
	d.t.Helper()
	type closed struct {
		after time.Duration
		err   error
	}
	cuts := []struct{ what, sent string }{
		{"a request cut inside its headers", "POST /v1/attach HTTP/1.1\r\nHost: chromafsd\r\nContent-Type: application/json\r\n"},
		{"a request cut inside its body", "POST /v1/attach HTTP/1.1\r\nHost: chromafsd\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{\"collection\": "},
	}
	const bound, slack = 10 * time.Second, 3 * time.Second // slack: a loaded host's scheduling
	start := time.Now()
	var done []chan closed
	for _, c := range cuts {
		conn, err := net.Dial("unix", d.socket)
		must(d.t, err)
		d.t.Cleanup(func() { conn.Close() })
		_, err = io.WriteString(conn, c.sent)
		must(d.t, err)
		must(d.t, conn.SetReadDeadline(start.Add(2*bound))) // ours: the daemon never closed it
		ch := make(chan closed, 1)
		done = append(done, ch)
		go func() {
			_, err := io.Copy(io.Discard, conn) // until the daemon closes it
			ch <- closed{time.Since(start), err}
		}()
	}
	return func() {
		d.t.Helper()
		for i, c := range cuts {
			r := <-done[i]
			var ne net.Error
			switch {
			case errors.As(r.err, &ne) && ne.Timeout():
				d.t.Errorf("%s: still open %v after it was sent, want it closed within %v", c.what, r.after.Round(time.Millisecond), bound)
			case r.after > bound+slack:
				d.t.Errorf("%s: closed %v after it was sent, want within %v", c.what, r.after.Round(time.Millisecond), bound)
			default:
				d.t.Logf("%s: closed by the daemon %v after it was sent (%v)", c.what, r.after.Round(time.Millisecond), r.err)
			}
		}
	}
}

// answers reports whether the mount at p has a server: statfs always
// reaches it (a dead mount's listings may come from the kernel's caches).
func answers(p string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(p, &st) == nil
}

// pid is the running daemon's pid.
func (d *daemonProc) pid() int {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		d.t.Fatal("chromafsd is not running")
	}
	return d.cmd.Process.Pid
}

// daemonFootprint reads the daemon's settled RSS (harness.SettledRSS:
// once it stops moving, as the bench reads it), threads and descriptors.
func (d *daemonProc) footprint() (rss int64, threads, fds int) {
	d.t.Helper()
	pid := d.pid()
	if rss = harness.SettledRSS(pid); rss < 0 {
		d.t.Fatalf("chromafsd (pid %d) is gone", pid)
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	must(d.t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			fmt.Sscan(strings.TrimSpace(v), &threads)
		}
	}
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	must(d.t, err)
	return rss, threads, len(ents)
}

// TestDaemonThousandAttachments: 1,000 attachments of one view cost the
// daemon no thread and no descriptor each and a few KiB of RSS each (at
// most 16); 20 private ones under 1 MiB, at most 3 threads (one, and
// go-fuse's idle reader) and 2 descriptors each; after a SIGKILL every one answers
// within 2 s of the new daemon's start; detaching them all leaves no
// mount. Meanwhile two API requests that never end are closed within
// 10 s (the daemon reads a request within 10 s).
func TestDaemonThousandAttachments(t *testing.T) {
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 50, Seed: 44})
	d := startDaemon(t)
	var paths []string
	attach := func(i int, private bool) {
		p := d.dirFor(0, fmt.Sprintf("conv/%04d", i))
		args := []string{"attach", "--collection", name}
		if private {
			args = append(args, "--private")
		}
		args = append(args, p)
		if out, code := d.run(0, args...); code != 0 {
			t.Fatalf("attach %d: exit %d %s", i, code, out)
		}
		paths = append(paths, p)
	}
	attach(0, false)
	rss0, threads0, fds0 := d.footprint()
	start := time.Now()
	for i := 1; i <= 1000; i++ {
		attach(i, false)
	}
	took := time.Since(start)
	rss1, threads1, fds1 := d.footprint()
	t.Logf("1,000 shared attachments in %v (%v each, the client's exec included): RSS %+d KiB (%d B each), threads %d -> %d, fds %d -> %d",
		took.Round(time.Millisecond), (took / 1000).Round(time.Microsecond), (rss1-rss0)>>10, (rss1-rss0)/1000, threads0, threads1, fds0, fds1)
	if per := (rss1 - rss0) / 1000; per > 16<<10 {
		t.Errorf("RSS grew %d bytes per shared attachment, want a few KiB (at most 16 KiB)", per)
	}
	if threads1 > threads0+4 || fds1 > fds0+4 {
		t.Errorf("shared attachments cost threads (%d -> %d) or descriptors (%d -> %d)", threads0, threads1, fds0, fds1)
	}
	for i := 1001; i <= 1020; i++ {
		attach(i, true)
	}
	rss2, threads2, fds2 := d.footprint()
	t.Logf("20 private attachments: RSS %+d KiB (%d KiB each), threads %d -> %d, fds %d -> %d", (rss2-rss1)>>10, (rss2-rss1)/20>>10, threads1, threads2, fds1, fds2)
	if per := (rss2 - rss1) / 20; per >= 1<<20 {
		t.Errorf("RSS grew %d bytes per private attachment, want under 1 MiB", per)
	}
	// (+4 in all: the Go runtime's own threads come and go, as above)
	if threads2-threads1 > 3*20+4 || fds2-fds1 > 2*20 {
		t.Errorf("20 private attachments: threads %d -> %d, fds %d -> %d; want at most 3 threads and 2 fds each", threads1, threads2, fds1, fds2)
	}
	local, _ := sh(t, src, "find . -type f | sort | xargs md5sum", false)
	if got, _ := sh(t, paths[777], "find . -type f | sort | xargs md5sum", false); got != local {
		t.Errorf("attachment 777: %s", firstDiff(got, local))
	}

	d.kill(syscall.SIGKILL)
	start = time.Now()
	d.start()
	// while the attachments are placed again and detached (more than 10 s
	// of work on a slow host, some 8 s here): two requests that never end
	checkTrickle := d.trickle()
	for _, p := range paths {
		waitFor(t, 2*time.Second-time.Since(start), func() bool { return answers(p) },
			func() string { return p + " does not answer 2 s after the new daemon started" })
	}
	t.Logf("%d attachments answered %v after the new daemon started", len(paths), time.Since(start).Round(time.Millisecond))
	if got, _ := sh(t, paths[1010], "find . -type f | sort | xargs md5sum", false); got != local {
		t.Errorf("private attachment after the restart: %s", firstDiff(got, local))
	}
	start = time.Now()
	for _, p := range paths {
		if out, code := d.run(0, "detach", p); code != 0 {
			t.Fatalf("detach %s: exit %d %s", p, code, out)
		}
	}
	t.Logf("%d detaches in %v", len(paths), time.Since(start).Round(time.Millisecond))
	if left := leftMounts(d.dir); len(left) > 0 {
		t.Errorf("%d mounts left after every detach, e.g. %s", len(left), left[0])
	}
	checkTrickle()
}

// TestDaemonWithoutRoot: a chromafsd run by a user who is not root serves
// that user only, each attachment a FUSE mount of its own (fusermount3;
// two of one view, two mounts);
// another uid is refused; after a SIGKILL the next daemon clears the dead
// mounts and mounts them again.
func TestDaemonWithoutRoot(t *testing.T) {
	requireFUSE(t)
	requireRoot(t) // to become uid 65534 and to open /dev/fuse to users for the test's length
	st, err := os.Stat("/dev/fuse")
	must(t, err)
	if st.Mode().Perm()&0o006 != 0o006 {
		must(t, os.Chmod("/dev/fuse", 0o666)) // Debian's own mode for it
		t.Cleanup(func() { _ = os.Chmod("/dev/fuse", st.Mode().Perm()) })
	}
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 10, Seed: 45})
	home, err := os.MkdirTemp("", "chromafsd-user-")
	must(t, err)
	t.Cleanup(func() {
		for _, mp := range mountsUnder(home) {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
		_ = os.RemoveAll(home)
	})
	must(t, os.Chmod(home, 0o755))
	must(t, os.Chown(home, 65534, 65534))
	bin := filepath.Join(home, "bin")
	must(t, os.Mkdir(bin, 0o755))
	for _, b := range []string{"chromafsd", "chromafs"} {
		must(t, exec.Command("cp", filepath.Join(env.bin, b), bin).Run())
	}
	asUser := func(uid int, name string, args ...string) *exec.Cmd {
		cmd := exec.Command("setpriv", append([]string{fmt.Sprintf("--reuid=%d", uid), "--regid=65534", "--clear-groups", filepath.Join(bin, name)}, args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + home, "XDG_RUNTIME_DIR=" + filepath.Join(home, "run")}
		return cmd
	}
	var daemon *exec.Cmd
	startIt := func() {
		daemon = asUser(65534, "chromafsd", "--chroma-url", env.url, "--state-dir", filepath.Join(home, "state"), "--cache-dir", filepath.Join(home, "cache"),
			"--log-file", filepath.Join(home, "chromafsd.log"), "--refresh", "0")
		must(t, daemon.Start())
		waitFor(t, 10*time.Second, func() bool { return asUser(65534, "chromafs", "list").Run() == nil },
			func() string {
				b, _ := os.ReadFile(filepath.Join(home, "chromafsd.log"))
				return "chromafsd never answered:\n" + string(b)
			})
	}
	startIt()
	t.Cleanup(func() { _ = daemon.Process.Kill(); _ = daemon.Wait() })
	// two attachments of one view: each a FUSE mount of its own
	p, p2 := filepath.Join(home, "docs"), filepath.Join(home, "docs-2")
	for _, dir := range []string{p, p2} {
		if out, err := asUser(65534, "chromafs", "attach", "--collection", name, dir).CombinedOutput(); err != nil {
			t.Fatalf("attach as the daemon's user: %v %s", err, out)
		}
	}
	local, _ := sh(t, src, "find . -type f | sort | xargs md5sum", false)
	check := func(when string) {
		t.Helper()
		for _, dir := range []string{p, p2} {
			out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", "cd "+dir+" && find . -type f | sort | xargs md5sum").CombinedOutput()
			if err != nil || string(out) != local {
				t.Errorf("%s at %s: %v %s", when, dir, err, firstDiff(string(out), local))
			}
		}
	}
	check("the attachment")
	m1, ok1 := proc.MountAt(p)
	m2, ok2 := proc.MountAt(p2)
	if !ok1 || !ok2 || !strings.HasPrefix(m1.FSType, "fuse") || !strings.HasPrefix(m2.FSType, "fuse") || m1.Device == "" || m1.Device == m2.Device {
		t.Errorf("two attachments of one view, not each a FUSE mount of its own: %s %+v, %s %+v", p, m1, p2, m2)
	}
	other := filepath.Join(home, "other")
	must(t, os.Mkdir(other, 0o777))
	if out, err := asUser(65533, "chromafs", "attach", "--collection", name, other).CombinedOutput(); err == nil || !strings.Contains(string(out), "serves its own user only") {
		t.Errorf("another uid attached through a daemon not run by root: %v %s", err, out)
	}
	_ = daemon.Process.Kill()
	_ = daemon.Wait()
	startIt()
	for _, dir := range []string{p, p2} {
		waitFor(t, 5*time.Second, func() bool { return answers(dir) }, func() string { return dir + " was not mounted again" })
	}
	check("after a SIGKILL and a new daemon")
	for _, dir := range []string{p, p2} {
		if out, err := asUser(65534, "chromafs", "detach", dir).CombinedOutput(); err != nil {
			t.Fatalf("detach: %v %s", err, out)
		}
	}
	if left := mountsUnder(home); len(left) > 0 {
		t.Errorf("mounts left after detach: %v", left)
	}
}

// TestDaemonRefreshesEveryView: a collection is polled once per
// --refresh whatever its views (one small request), and a re-ingest
// reaches every view's attachments; chromafs refresh asks at once.
func TestDaemonRefreshesEveryView(t *testing.T) {
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 12, Private: 3, Seed: 46})
	port, err := freePort()
	must(t, err)
	d := startDaemon(t, "--metrics", fmt.Sprintf("127.0.0.1:%d", port), "--prefetch", "none") // no warm-up among the requests counted
	public, team := d.dirFor(0, "public"), d.dirFor(0, "team")
	for p, g := range map[string]string{public: "", team: "team"} {
		if out, code := d.run(0, "attach", "--collection", name, "--groups", g, p); code != 0 {
			t.Fatalf("attach: exit %d %s", code, out)
		}
	}
	requests := func() int64 {
		v, err := harness.Metric(fmt.Sprintf("http://127.0.0.1:%d/metrics", port), fmt.Sprintf(`chromafs_collection_requests_total{collection=%q}`, name))
		must(t, err)
		return v
	}
	// chromafs refresh asks at once: this daemon does not poll
	// (--refresh 0), so only the refresh asks Chroma anything
	before := requests()
	if out, code := d.run(0, "refresh", name); code != 0 || out != "checked 1 collection(s)" {
		t.Errorf("chromafs refresh: exit %d %q, want checked 1 collection(s)", code, out)
	}
	waitFor(t, 5*time.Second, func() bool { return requests() > before },
		func() string {
			return fmt.Sprintf("chromafs refresh asked Chroma nothing (%d requests before, %d after)", before, requests())
		})

	// the same attachments under a daemon polling every 200 ms
	d.args = append(d.args[:len(d.args):len(d.args)], "--refresh", "200ms") // the last --refresh wins
	d.kill(syscall.SIGTERM)
	d.start()
	for _, p := range []string{public, team} {
		waitFor(t, 5*time.Second, func() bool { return answers(p) }, func() string { return p + " was not placed again" })
	}
	// one poll per collection, not per view: counted, not timed. A poll
	// is counted before its one request is sent, so the two counts differ
	// by at most the poll in flight; a poll per view would double the
	// requests
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	pollsName, reqName := fmt.Sprintf(`chromafs_collection_polls_total{collection=%q}`, name), fmt.Sprintf(`chromafs_collection_requests_total{collection=%q}`, name)
	scrape := func() (polls, requests int64) {
		m, err := harness.Metrics(metricsURL, pollsName, reqName)
		must(t, err)
		return m[pollsName], m[reqName]
	}
	polls0, requests0 := scrape()
	var polls, reqs int64
	waitFor(t, 30*time.Second, func() bool { polls, reqs = scrape(); return polls-polls0 >= 10 },
		func() string { return fmt.Sprintf("%d polls of --refresh 200ms", polls-polls0) })
	t.Logf("%d polls, %d requests to Chroma, of --refresh 200ms with 2 views", polls-polls0, reqs-requests0)
	if dp, dr := polls-polls0, reqs-requests0; dr < dp-1 || dr > dp+1 {
		t.Errorf("%d polls made %d requests with 2 views: want one request a poll (one poll per collection, not per view)", dp, dr)
	}
	must(t, os.WriteFile(filepath.Join(src, "fresh.md"), []byte("# fresh\n"), 0o644))
	if _, errOut, code := ingestCmd(t, nil, "--chroma-url", env.url, "--collection", name, "--quiet", src); code != 0 {
		t.Fatalf("re-ingest: %s", errOut)
	}
	for _, p := range []string{public, team} {
		waitFor(t, 10*time.Second, func() bool { _, err := os.Stat(filepath.Join(p, "fresh.md")); return err == nil },
			func() string { return "the re-ingested page never reached " + p })
	}
}

// mustSh is sh's output.
func mustSh(t *testing.T, dir, script string) string {
	t.Helper()
	out, _ := sh(t, dir, script, false)
	return out
}

// TestDaemonRestoreWaitsForChroma: a daemon that starts while Chroma is
// down keeps its attachments (listed as waiting, never dropped from the
// state) and places them once Chroma answers; one detached meanwhile
// leaves no mount.
func TestDaemonRestoreWaitsForChroma(t *testing.T) {
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 8, Seed: 47})
	d := startDaemon(t, "--disk-cache-size", "0") // no host tier: the tree must come from Chroma
	keep, gone := d.dirFor(0, "keep"), d.dirFor(0, "gone")
	for _, p := range []string{keep, gone} {
		if out, code := d.run(0, "attach", "--collection", name, p); code != 0 {
			t.Fatalf("attach: exit %d %s", code, out)
		}
	}
	d.kill(syscall.SIGKILL)
	serverCtl(t, "stop")
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			serverCtl(t, "start")
		}
	})
	d.start()
	st := d.status()
	if len(st.Attachments) != 2 || !st.Attachments[0].Waiting || !st.Attachments[1].Waiting {
		t.Fatalf("with Chroma down: %+v, want both attachments waiting", st.Attachments)
	}
	if out, code := d.run(0, "detach", gone); code != 0 {
		t.Errorf("detach of a waiting attachment: exit %d %s", code, out)
	}
	serverCtl(t, "start")
	restarted = true
	waitFor(t, 20*time.Second, func() bool { return answers(keep) }, func() string { return keep + " was not placed once Chroma answered" })
	if got, want := mustSh(t, keep, "find . -type f | sort | xargs md5sum"), mustSh(t, src, "find . -type f | sort | xargs md5sum"); got != want {
		t.Errorf("the attachment placed late: %s", firstDiff(got, want))
	}
	if st := d.status(); len(st.Attachments) != 1 || st.Attachments[0].Waiting {
		t.Errorf("after Chroma came back: %+v", st.Attachments)
	}
	if left := mountsUnder(gone); len(left) > 0 {
		t.Errorf("the attachment detached while waiting left mounts: %v", left)
	}
	if out, code := d.run(0, "detach", keep); code != 0 {
		t.Errorf("detach: exit %d %s", code, out)
	}
	if left := leftMounts(d.dir); len(left) > 0 {
		t.Errorf("mounts left: %v", left)
	}
}
