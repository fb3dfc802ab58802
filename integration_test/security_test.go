package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/proc"
)

// The red team's findings against a root chromafsd (issue 28), each as
// it was found: an unprivileged user (uid 65534, in the socket's group)
// calling through the real socket.

// writePolicy writes a policy file for the daemon (0600: root's).
func writePolicy(t *testing.T, dir, text string) string {
	t.Helper()
	p := filepath.Join(dir, "policy.yaml")
	must(t, os.WriteFile(p, []byte(text), 0o600))
	return p
}

// TestSecurityOtherDatabase: a rule granting collections ["*"] grants
// the daemon's database's collections, not another database's through a
// collection name that climbs out of its path segment (chroma-go joins
// names into the URL, resolving ".."); every such name is refused before
// any request, and the refusal names Chroma's rule.
func TestSecurityOtherDatabase(t *testing.T) {
	requireServer(t)
	parent := t.TempDir()
	// database "vault" of the default tenant, with a collection payroll
	vault := fmt.Sprintf("vault%d", time.Now().UnixNano()%1e9)
	body, _ := json.Marshal(map[string]string{"name": vault})
	resp, err := http.Post(env.url+"/api/v2/tenants/default_tenant/databases", "application/json", bytes.NewReader(body))
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("create database %s: %s", vault, resp.Status)
	}
	src := filepath.Join(parent, "payroll")
	must(t, os.MkdirAll(src, 0o755))
	must(t, os.WriteFile(filepath.Join(src, "payroll.md"), []byte("salaries: HUNTER2\n"), 0o644))
	if _, errOut, code := ingestCmd(t, nil, "--chroma-url", env.url, "--database", vault, "--collection", "payroll", "--quiet", src); code != 0 {
		t.Fatalf("ingest into database %s: exit %d: %s", vault, code, errOut)
	}
	d := startDaemon(t, "--policy", writePolicy(t, parent, "- users: [65534]\n  collections: [\"*\"]\n  groups: []\n"))
	for i, coll := range []string{
		"../../" + vault + "/collections/payroll",
		"..%2f..%2f" + vault + "%2fcollections%2fpayroll",
		"a/../../../" + vault + "/collections/payroll",
		"payroll/..",
	} {
		dir := d.dirFor(65534, fmt.Sprintf("climb-%d", i))
		out, code := d.run(65534, "attach", "--collection", coll, dir)
		if code != 1 || !strings.Contains(out, "collection name") || strings.Contains(out, "\n") {
			t.Errorf("attach --collection %q as uid 65534: exit %d %q, want exit 1 and one line on the collection name", coll, code, out)
		}
		if b, err := exec.Command("grep", "-r", "HUNTER2", dir).CombinedOutput(); err == nil {
			t.Errorf("payroll of database %s is readable at %s: %s", vault, dir, b)
		}
	}
	// the daemon's own database has no payroll: not found, never another's
	if out, code := d.run(65534, "attach", "--collection", "payroll", d.dirFor(65534, "plain")); code != 1 || !strings.Contains(out, "not found") {
		t.Errorf("attach --collection payroll: exit %d %q, want not found (the daemon serves its own database)", code, out)
	}
	if st := d.status(); len(st.Attachments) != 0 {
		t.Errorf("attachments left: %+v", st.Attachments)
	}
}

// TestSecurityBoundsPerSubject: one user cannot take every mount slot,
// every attachment slot or open a collection per layout: each is
// refused at its policy limit with one line naming it, while root and
// other users still attach; a user without a limits rule meets the
// host-wide bound, of which root keeps a reserve.
func TestSecurityBoundsPerSubject(t *testing.T) {
	parent := t.TempDir()
	name, _ := ingestCorpus(t, parent, corpus.Spec{Files: 10, Seed: 44})
	other, _ := ingestCorpus(t, filepath.Join(parent, "other"), corpus.Spec{Files: 5, Seed: 48})
	pol := fmt.Sprintf(`
- users: [65534, 65533]
  collections: [%s, %s]
  groups: []
- users: [65534]
  limits: {attachments: 4, mounts: 3, private_mounts: 1, layouts: 1}
`, name, other)
	d := startDaemon(t, "--policy", writePolicy(t, parent, pol), "--max-mounts", "7")
	n := 0
	attach := func(uid int, args ...string) (string, int) {
		n++
		return d.run(uid, append(append([]string{"attach", "--collection", name}, args...), d.dirFor(uid, fmt.Sprintf("a%d", n)))...)
	}
	ok := func(out string, code int) {
		t.Helper()
		if code != 0 {
			t.Fatalf("attach: exit %d %s", code, out)
		}
	}
	refused := func(says string, out string, code int) {
		t.Helper()
		if code != 1 || !strings.Contains(out, says) || strings.Contains(out, "\n") {
			t.Errorf("attach: exit %d %q, want exit 1 and one line saying %q", code, out, says)
		}
	}
	ok(attach(65534, "--private"))
	out, code := attach(65534, "--private")
	refused("limits.private_mounts", out, code)
	ok(attach(65534, "--layout", "custom", "--path-key", "page"))
	out, code = attach(65534, "--layout", "custom", "--path-key", "source")
	refused("limits.layouts", out, code)
	ok(attach(65534))
	ok(attach(65534))
	out, code = attach(65534)
	refused("limits.attachments", out, code)
	// a view of another collection is another FUSE mount: 65534 holds 3
	// (its private one, one per view), its limit
	if out, code := d.run(65534, "detach", filepath.Join(d.dir, fmt.Sprintf("a%d", n-1))); code != 0 {
		t.Fatalf("detach: exit %d %s", code, out)
	}
	out, code = d.run(65534, "attach", "--collection", other, d.dirFor(65534, "other"))
	refused("limits.mounts", out, code)
	if st := d.status(); len(st.Collections) != 2 {
		t.Errorf("%d collections open, want 2 (the default layout and one of its own)", len(st.Collections))
	}
	// another user (the defaults: 8 private) fills what the host has
	// left but root's reserve: --max-mounts 7 keeps 1 for root; 65534
	// holds 3 mounts (its private one, and one per view it attached)
	for i := range 3 {
		if out, code := attach(65533, "--private"); code != 0 {
			t.Fatalf("private attachment %d of uid 65533: exit %d %s", i, code, out)
		}
	}
	out, code = attach(65533, "--private")
	refused("kept for root", out, code)
	ok(attach(0, "--private"))
}

// TestSecurityIdleConnections: idle API connections of one user cannot
// exhaust the daemon's descriptors: past its share (32) a user's
// connection is answered 503 with the reason, root's calls and the
// daemon's other users go on, and the daemon closes idle connections.
func TestSecurityIdleConnections(t *testing.T) {
	d := startDaemon(t, "--api-idle-timeout", "2s")
	bin := helperBinary(t, d.dir)
	h := startHelper(t, bin, 65534, "hold-conns", "CHROMAFS_IT_SOCKET="+d.socket, "CHROMAFS_IT_CONNS=200")
	var rep holdReport
	h.next(t, &rep)
	if rep.Admitted != 32 || rep.Refused != 200-32 || !strings.Contains(rep.Refusal, "uid 65534 holds 32 connections") {
		t.Errorf("200 connections of uid 65534: %+v; want 32 admitted, the rest refused saying why", rep)
	}
	// while they are held: root is served, and the user is told why not
	if out, code := d.run(0, "list"); code != 0 {
		t.Errorf("root's list while uid 65534 holds its connections: exit %d %s", code, out)
	}
	if out, code := d.run(65534, "list"); code == 0 || !strings.Contains(out, "holds 32 connections") {
		t.Errorf("uid 65534's list past its share: exit %d %q, want the reason", code, out)
	}
	if out, code := d.run(65533, "list"); code != 0 {
		t.Errorf("another user's list: exit %d %s", code, out)
	}
	h.proceed()
	h.next(t, &rep)
	if rep.ClosedByServer != rep.Admitted {
		t.Errorf("the daemon closed %d of %d idle connections within 60 s (--api-idle-timeout 2s)", rep.ClosedByServer, rep.Admitted)
	}
	// idle since their answers, before the helper was told to go on: each
	// is closed at most 2 s later (--api-idle-timeout), 3 s of slack for
	// a loaded host; the default's 30 s would be a flag not taken
	t.Logf("the last idle connection closed %d ms after the helper went on", rep.ClosedAfterMS)
	if rep.ClosedAfterMS > 5000 {
		t.Errorf("the last idle connection was closed %d ms after the helper went on, want at most 2 s (--api-idle-timeout 2s) and slack", rep.ClosedAfterMS)
	}
	if out, code := d.run(65534, "list"); code != 0 {
		t.Errorf("uid 65534's list once its connections are closed: exit %d %s", code, out)
	}
}

// hungFS is a FUSE file system of the test's own standing for a user's
// hostile one (mounted by root with allow_other, as a user's may be with
// user_allow_other): a lookup of "stall", statfs, a file's getattr and
// every write wait until release is closed; files made in it are their
// creator's.
type hungFS struct {
	fs.Inode
	release chan struct{}
}

func (r *hungFS) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	out.Mode = syscall.S_IFDIR | 0o777
	return 0
}

func (r *hungFS) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	<-r.release
	return 0
}

func (r *hungFS) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if name == "stall" {
		<-r.release
		return nil, syscall.ENOENT
	}
	ch := r.GetChild(name)
	if ch == nil {
		return nil, syscall.ENOENT
	}
	ch.Operations().(*hungFile).attr(&out.Attr)
	return ch, 0
}

func (r *hungFS) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	caller, _ := fuse.FromContext(ctx)
	f := &hungFile{release: r.release, uid: caller.Uid}
	ch := r.NewPersistentInode(ctx, f, fs.StableAttr{Mode: syscall.S_IFREG})
	r.AddChild(name, ch, true)
	f.attr(&out.Attr)
	return ch, nil, fuse.FOPEN_DIRECT_IO, 0
}

type hungFile struct {
	fs.Inode
	release chan struct{}
	uid     uint32
}

func (f *hungFile) attr(a *fuse.Attr) { a.Mode, a.Uid = syscall.S_IFREG|0o600, f.uid }

func (f *hungFile) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	<-f.release
	f.attr(&out.Attr)
	return 0
}

func (f *hungFile) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	return nil, fuse.FOPEN_DIRECT_IO, 0
}

func (f *hungFile) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	<-f.release
	return uint32(len(data)), 0
}

// mountHung mounts a hungFS at dir; release lets everything it holds go
// (the test's cleanup does too).
func mountHung(t *testing.T, dir string) (release func()) {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o755))
	root := &hungFS{release: make(chan struct{})}
	srv, err := fs.Mount(dir, root, &fs.Options{MountOptions: fuse.MountOptions{AllowOther: true, FsName: "hungfs", DisableXAttrs: true}})
	must(t, err)
	var once sync.Once
	release = func() { once.Do(func() { close(root.release) }) }
	t.Cleanup(func() { release(); _ = srv.Unmount() })
	return release
}

// TestSecurityHungFileSystems: a user's file system that never answers
// can neither stall the daemon through an access log (a log on a FUSE
// file system is refused: its server decides when a write returns; and
// the daemon's logs are written from a queue, never inside a request or
// under its lock) nor pile up blocked threads through attach paths that
// cross it (a user's resolutions in flight are bounded, the rest refused
// at once), while root's calls are answered throughout.
func TestSecurityHungFileSystems(t *testing.T) {
	parent := t.TempDir()
	name, _ := ingestCorpus(t, parent, corpus.Spec{Files: 10, Seed: 45})
	d := startDaemon(t, "--policy", writePolicy(t, parent, fmt.Sprintf("- users: [65534]\n  collections: [%s]\n  groups: []\n", name)))
	hung := filepath.Join(d.dir, "hung")
	release := mountHung(t, hung)

	// attach paths through a lookup that never answers: two rounds of 24
	// at once (each call its own connection, within the user's share),
	// through the API itself (the chromafs client would make the path
	// first, and wait on the file system in its own process)
	apiAttach := func(path string, more ...string) (string, int) {
		req := map[string]string{"collection": name, "path": path}
		for i := 0; i+1 < len(more); i += 2 {
			req[more[i]] = more[i+1]
		}
		body, _ := json.Marshal(req)
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
			"curl", "-sS", "--max-time", "60", "--unix-socket", d.socket, "-X", "POST", "--data-binary", string(body), "http://chromafsd/v1/attach")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return string(out), -1
		}
		var e struct{ Error string }
		if json.Unmarshal(out, &e) == nil && e.Error != "" {
			return e.Error, 1
		}
		return string(out), 0
	}

	// an access log on the hung file system: refused from the mount
	// table, before its server is asked anything (its statfs and getattr
	// never answer)
	logged := d.dirFor(65534, "logged")
	out, code := apiAttach(logged, "access_log", filepath.Join(hung, "log.jsonl"))
	if code != 1 || !strings.Contains(out, "FUSE file system") {
		t.Errorf("attach with an access log on a FUSE file system: %d %q, want it refused", code, out)
	}
	if m, ok := proc.MountAt(logged); ok {
		t.Errorf("the refused attachment was placed: %s is a mount (%s)", logged, m.FSType)
	}
	for _, a := range d.status().Attachments {
		if a.Path == logged {
			t.Errorf("the refused attachment is recorded: %+v", a)
		}
	}

	base := d.status().Threads
	timedOut := 0
	for round := range 2 {
		var wg sync.WaitGroup
		var mu sync.Mutex
		outs := map[string]int{}
		for i := range 24 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out, code := apiAttach(filepath.Join(hung, "stall", fmt.Sprintf("r%d-%d", round, i)))
				kind := "other: " + out
				switch {
				case code == 1 && strings.Contains(out, "no answer within"):
					kind = "timed out"
				case code == 1 && strings.Contains(out, "in flight"):
					kind = "refused at once"
				}
				mu.Lock()
				outs[kind]++
				mu.Unlock()
			}()
		}
		wg.Wait()
		t.Logf("round %d: %v", round, outs)
		for kind, n := range outs {
			if kind != "timed out" && kind != "refused at once" {
				t.Errorf("round %d: %d attach(es) %s; want every attach timed out or refused at once", round, n, kind)
			}
		}
		if outs["refused at once"] == 0 {
			t.Errorf("round %d: %v, want the attaches past the user's 16 resolutions in flight refused at once", round, outs)
		}
		timedOut += outs["timed out"]
		if out, code := d.run(0, "list"); code != 0 {
			t.Fatalf("root's list with the user's lookups stalled: exit %d %s", code, out)
		}
	}
	// a resolution stays in flight until its thread ends, and the
	// lookups of the first round still hang: at most 16 over both rounds
	if timedOut > 16 {
		t.Errorf("%d attaches waited for their resolution over both rounds, want at most the user's 16 in flight", timedOut)
	}
	grown := d.status().Threads - base
	t.Logf("the daemon's threads grew by %d after 48 stalled attaches", grown)
	if grown > 16+8 {
		t.Errorf("the daemon's threads grew by %d after 48 stalled attaches, want at most the user's 16 in flight and a few (8: the Go runtime keeps threads it made for the 48 attaches)", grown)
	}
	release()
	waitFor(t, 15*time.Second, func() bool { return d.status().Threads-base <= 8 },
		func() string {
			return fmt.Sprintf("threads still %d above the start once the file system answered", d.status().Threads-base)
		})
	after := d.dirFor(65534, "after")
	if out, code := d.run(65534, "attach", "--collection", name, after); code != 0 {
		t.Errorf("attach once the file system answered: exit %d %s", code, out)
	}
	if _, ok := proc.MountAt(after); !ok { // the control of the refused attachment's check above
		t.Errorf("the attachment once the file system answered is not a mount at %s", after)
	}
}

// TestSecurityRestoreGroupsNow: a restart judges each attachment with
// the groups its user holds now: an attachment granted through a unix
// group the user no longer holds (here: a uid the user database does not
// know, so it holds none) is dropped, not re-created with the groups it
// had when it attached; one granted to the uid itself is re-created.
func TestSecurityRestoreGroupsNow(t *testing.T) {
	parent := t.TempDir()
	name, _ := ingestCorpus(t, parent, corpus.Spec{Files: 10, Private: 2, Seed: 46})
	uid := unknownUID(t)
	d := startDaemon(t, "--policy", writePolicy(t, parent, fmt.Sprintf(`
- unix_groups: [4242]
  collections: [%s]
  groups: [team]
- users: [65534]
  collections: [%s]
  groups: []
`, name, name)))
	byGroup := d.dirFor(uid, "by-group")
	cmd := exec.Command("setpriv", fmt.Sprintf("--reuid=%d", uid), "--regid=65534", "--groups=4242", d.client, "--socket", d.socket,
		"attach", "--collection", name, "--groups", "team", byGroup)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("attach as uid %d in group 4242: %v %s", uid, err, out)
	}
	byUID := d.dirFor(65534, "by-uid")
	if out, code := d.run(65534, "attach", "--collection", name, byUID); code != 0 {
		t.Fatalf("attach as uid 65534: exit %d %s", code, out)
	}
	if len(mountsUnder(byGroup)) == 0 || len(mountsUnder(byUID)) == 0 { // the control of the check after the restart
		t.Fatalf("before the restart: mounts %v at %s and %v at %s, want both attached", mountsUnder(byGroup), byGroup, mountsUnder(byUID), byUID)
	}
	d.kill(syscall.SIGTERM)
	d.start()
	var paths []string
	for _, a := range d.status().Attachments {
		paths = append(paths, a.Path)
	}
	if len(paths) != 1 || paths[0] != byUID {
		t.Errorf("after a restart: attachments %v, want only %s (uid %d holds group 4242 no more)", paths, byUID, uid)
	}
	if b, _ := os.ReadFile(d.logFile); !strings.Contains(string(b), "attachment not restored; dropped") {
		t.Errorf("the log does not say the attachment was dropped:\n%s", b)
	}
	// the dropped record's dead mount goes with it; the kept one is
	// placed again (stacked on its own)
	if left := mountsUnder(byGroup); len(left) != 0 {
		t.Errorf("the dropped attachment left mounts: %v", left)
	}
	if entries, err := os.ReadDir(byGroup); err != nil || len(entries) != 0 {
		t.Errorf("the dropped attachment's directory: %d entries, %v; want an empty directory", len(entries), err)
	}
	if !answers(byUID) {
		t.Errorf("the kept attachment %s does not answer after the restart", byUID)
	}
}

// unknownUID is a uid the user database does not know.
func unknownUID(t *testing.T) int {
	t.Helper()
	for uid := 61234; uid < 61334; uid++ {
		if err := exec.Command("getent", "passwd", fmt.Sprint(uid)).Run(); err != nil {
			return uid
		}
	}
	t.Fatal("no free uid in 61234-61333")
	return 0
}

// TestSecurityRestoreHungLog: a restart whose attachment's access log
// now lies on a file system that never answers (its user mounted one
// over the log's directory) answers its callers at once and places the
// attachment without the log: what a restore opens as the user is
// opened without the daemon's lock, and a FUSE file is refused from the
// mount table before its server is asked.
func TestSecurityRestoreHungLog(t *testing.T) {
	parent := t.TempDir()
	name, _ := ingestCorpus(t, parent, corpus.Spec{Files: 10, Seed: 47})
	d := startDaemon(t, "--policy", writePolicy(t, parent, fmt.Sprintf("- users: [65534]\n  collections: [%s]\n  groups: []\n", name)))
	logs, conv := d.dirFor(65534, "logs"), d.dirFor(65534, "conv")
	if out, code := d.run(65534, "attach", "--collection", name, "--access-log", filepath.Join(logs, "a.jsonl"), conv); code != 0 {
		t.Fatalf("attach with an access log: exit %d %s", code, out)
	}
	d.kill(syscall.SIGKILL)
	mountHung(t, logs)
	d.start() // fails the test unless list answers within 10 s
	st := d.status()
	if len(st.Attachments) != 1 || st.Attachments[0].Path != conv || st.Attachments[0].Waiting {
		t.Errorf("after the restart: %+v, want %s placed", st.Attachments, conv)
	}
	if b, _ := os.ReadFile(d.logFile); !strings.Contains(string(b), "access log not reopened") || !strings.Contains(string(b), "FUSE file system") {
		t.Errorf("the log does not say why the access log was not reopened:\n%s", b)
	}
	if out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "ls", conv).CombinedOutput(); err != nil || len(out) == 0 {
		t.Errorf("the restored attachment: %v %q", err, out)
	}
}
