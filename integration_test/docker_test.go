package integration_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/harness"
	"github.com/chromafs/chromafs/internal/testenv"
)

// The Docker recipe of the README (issue 22, points 4 and 6): a view
// attached by chromafsd and handed to containers of a real dockerd with
// `--mount type=bind,src=PATH,dst=/docs,readonly,bind-propagation=rslave`,
// what the containers see and do not see, and a SIGKILL and a restart of
// the daemon under running containers.
//
// The dockerd is scripts/dockerd.sh's private one (its own data root,
// exec root and socket under $CHROMAFS_CACHE/docker; no bridge, no
// iptables; the image chromafs-test-busybox:1 imported from Debian's
// static busybox). The first test that needs it starts it; when this run
// started it (it was not running before), the cleanup of the last test
// holding it stops it again, so a run leaves no dockerd behind; one that
// was running already (started by hand) is left running. A run killed
// before its cleanups leaves it running: scripts/test.sh stops it at its
// exit when it was not running before.

// dockerEnv is how to reach the private dockerd.
type dockerEnv struct {
	bin, host, config, image string
}

// dockerd counts the tests holding the private dockerd.
var dockerd struct {
	mu      sync.Mutex
	users   int
	started bool // this run started it: the last user stops it
	env     dockerEnv
}

// containerSeq numbers this run's containers (names unique per run).
var containerSeq atomic.Int64

// requireDocker starts the private dockerd (through scripts/dockerd.sh)
// unless it runs already, holds it until the test's cleanup, and returns
// how to reach it. It skips loudly when Docker cannot run here, and fails
// instead under CI=true.
func requireDocker(t *testing.T) dockerEnv {
	t.Helper()
	requireRoot(t)
	dockerd.mu.Lock()
	defer dockerd.mu.Unlock()
	if dockerd.users == 0 {
		e, started, err := startDockerd()
		if err != nil {
			testenv.Missing(t, "no private dockerd (Debian's docker.io, scripts/dockerd.sh): %v", err)
		}
		dockerd.env, dockerd.started = e, started
	}
	dockerd.users++
	t.Cleanup(releaseDocker)
	return dockerd.env
}

// startDockerd runs scripts/dockerd.sh start and reads its env; started
// says whether it was stopped before.
func startDockerd() (dockerEnv, bool, error) {
	script := filepath.Join(repoRoot(), "scripts", "dockerd.sh")
	started := exec.Command(script, "status").Run() != nil
	if out, err := exec.Command(script, "start").CombinedOutput(); err != nil {
		return dockerEnv{}, false, fmt.Errorf("dockerd.sh start: %w: %s", err, lastLine(out))
	}
	out, err := exec.Command(script, "env").Output()
	if err != nil {
		return dockerEnv{}, started, fmt.Errorf("dockerd.sh env: %w", err)
	}
	vars := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			vars[k] = v // the values are paths and a tag: %q left them bare
		}
	}
	e := dockerEnv{bin: vars["DOCKER"], host: vars["DOCKER_HOST"], config: vars["DOCKER_CONFIG"], image: vars["CHROMAFS_TEST_IMAGE"]}
	if e.bin == "" || e.host == "" || e.image == "" {
		return dockerEnv{}, started, fmt.Errorf("dockerd.sh env printed %q", out)
	}
	return e, started, nil
}

// releaseDocker lets go of the dockerd; the last user stops it when this
// run started it.
func releaseDocker() {
	dockerd.mu.Lock()
	defer dockerd.mu.Unlock()
	dockerd.users--
	if dockerd.users == 0 && dockerd.started {
		if out, err := exec.Command(filepath.Join(repoRoot(), "scripts", "dockerd.sh"), "stop").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "dockerd.sh stop: %v: %s\n", err, out)
		}
		dockerd.started = false
	}
}

func lastLine(b []byte) string {
	s := strings.TrimSpace(string(b))
	return s[strings.LastIndex(s, "\n")+1:]
}

// command is the docker client talking to the private dockerd.
func (e dockerEnv) command(args ...string) *exec.Cmd {
	cmd := exec.Command(e.bin, args...)
	cmd.Env = append(os.Environ(), "DOCKER_HOST="+e.host, "DOCKER_CONFIG="+e.config)
	return cmd
}

// container is a `docker run` of the README's recipe: docs bound
// read-only at /docs with rslave propagation, no network, and binds
// (src:dst, read-write) for markers. It is removed at the test's cleanup
// whatever happened to it.
func (e dockerEnv) container(t *testing.T, docs string, binds []string, script string) *exec.Cmd {
	t.Helper()
	name := fmt.Sprintf("chromafs-it-%d-%d", os.Getpid(), containerSeq.Add(1))
	args := []string{"run", "--rm", "--name", name, "--network", "none", "--label", fmt.Sprintf("chromafs-it=%d", os.Getpid()),
		"--mount", "type=bind,src=" + docs + ",dst=/docs,readonly,bind-propagation=rslave"}
	for _, b := range binds {
		src, dst, _ := strings.Cut(b, ":")
		args = append(args, "--mount", "type=bind,src="+src+",dst="+dst)
	}
	t.Cleanup(func() { _ = e.command("rm", "-f", name).Run() })
	return e.command(append(args, e.image, "sh", "-c", script)...)
}

// waitCmd waits at most timeout for cmd (started) to exit.
func waitCmd(cmd *exec.Cmd, timeout time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(timeout):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("no exit within %v", timeout)
	}
}

// hiddenPage is the relative path of a page of src marked public: false.
func hiddenPage(t *testing.T, src string) string {
	t.Helper()
	hidden := ""
	must(t, filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || hidden != "" {
			return err
		}
		if b, err := os.ReadFile(p); err == nil && bytes.Contains(b[:min(len(b), 200)], []byte("public: false")) {
			hidden, _ = filepath.Rel(src, p)
		}
		return nil
	}))
	if hidden == "" {
		t.Fatal("the corpus has no hidden page")
	}
	return hidden
}

// TestDockerSandbox: a container of a real dockerd over an attachment
// sees the view (every file, byte for byte) and nothing else of chromafs:
// a hidden page is ENOENT, /docs is read-only and the only FUSE mount, no
// FUSE device, no socket, no token (neither in mountinfo nor in the
// environment of any process it can see, while the daemon's holds it),
// no path of the daemon's (socket, state, host cache), no other view. Then two containers over one shared attachment and one over
// a private attachment, started before chromafsd is SIGKILLed and started
// again, find the new mount stacked on their /docs and read their whole
// view through new lookups, without being restarted; once they have
// exited, detach leaves no mount.
func TestDockerSandbox(t *testing.T) {
	de := requireDocker(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 40, Private: 4, Seed: 44})
	d := startDaemon(t)
	public := filepath.Join(parent, "public")
	visibleCopy(t, src, public, false)
	want, _ := sh(t, public, "find . -type f | sort | xargs md5sum", false)
	if strings.Count(want, "\n") < 30 {
		t.Fatalf("the public view's local copy has %d files", strings.Count(want, "\n"))
	}
	token := ""
	for _, kv := range d.env {
		if v, ok := strings.CutPrefix(kv, "CHROMA_TOKEN="); ok {
			token = v
		}
	}
	if len(token) < 16 {
		t.Fatalf("the daemon's token %q is too short to look for", token)
	}
	// the control of the containers' search: the token is in the running
	// daemon's environment, where a process that could see it would find it
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", d.pid())); err != nil || !bytes.Contains(b, []byte(token)) {
		t.Fatalf("the daemon's environment does not hold its token (%v): the containers' search for it would prove nothing", err)
	}

	shared := d.dirFor(0, "docker-shared")
	if out, code := d.run(0, "attach", "--collection", name, shared); code != 0 {
		t.Fatalf("attach: exit %d %s", code, out)
	}
	private := d.dirFor(0, "docker-private")
	if out, code := d.run(0, "attach", "--private", "--collection", name, private); code != 0 {
		t.Fatalf("attach --private: exit %d %s", code, out)
	}
	other := d.dirFor(0, "docker-team") // another view: the containers must not see it
	if out, code := d.run(0, "attach", "--collection", name, "--groups", "team", other); code != 0 {
		t.Fatalf("attach --groups team: exit %d %s", code, out)
	}

	t.Run("inside", func(t *testing.T) {
		hidden := hiddenPage(t, src)
		dir, base := filepath.Split("/docs/" + hidden)
		inside := fmt.Sprintf(`H=/docs/%s
			test -e "$H" && echo HIDDEN-EXISTS
			cat "$H" 2>&1 | grep -q 'No such file or directory' || echo HIDDEN-NOT-ENOENT
			ls -d "$H" 2>&1 | grep -q 'No such file or directory' || echo HIDDEN-LS-NOT-ENOENT
			ls -a %s | grep -qxF %s && echo HIDDEN-LISTED
			(echo x > /docs/new) 2>&1 | grep -q 'Read-only file system' || echo DOCS-WRITABLE
			test -e /dev/fuse && echo FUSE-DEVICE
			CANARY=c4n4ry grep -q c4n4ry /proc/self/environ || echo ENVIRON-NOT-SEARCHED
			grep -lF '%s' /proc/self/mountinfo /proc/1/mountinfo /proc/[0-9]*/environ
			grep -F '%s' /proc/self/mountinfo
			echo "fuse mounts: $(grep -c ' - fuse' /proc/self/mountinfo)"
			find / \( -path /proc -o -path /sys -o -path /dev -o -path /docs \) -prune -o \( -type f -o -type s \) -print | sort
			echo ---
			cd /docs && find . -type f | sort | xargs md5sum`, hidden, dir, base, token, d.dir)
		out, err := de.container(t, shared, nil, inside).CombinedOutput()
		wantInside := "fuse mounts: 1\n/.dockerenv\n/bin/busybox\n/etc/hostname\n/etc/hosts\n/etc/resolv.conf\n---\n" + want
		if err != nil || string(out) != wantInside {
			t.Errorf("in a container over the attachment: %v, %s", err, firstDiff(string(out), wantInside))
		}
	})

	// Three containers that read their whole view (warming the old
	// mount's kernel caches), wait for a marker, then walk it again: two
	// over the shared attachment, one over the private one. After the
	// restart their /docs must be the new mount stacked on the old one
	// (two FUSE mounts there, and a name never looked up answers ENOENT,
	// not ENOTCONN): the old mount's caches alone could serve a walk
	// already made.
	marker := filepath.Join(parent, "marker")
	must(t, os.Mkdir(marker, 0o777))
	type running struct {
		cmd  *exec.Cmd
		out  *harness.Log // read while the container runs
		docs string
	}
	var ctrs []running
	for i, docs := range []string{shared, shared, private} {
		script := fmt.Sprintf(`atdocs() { echo "mounts at /docs: $(grep -c ' /docs .* - fuse' /proc/self/mountinfo)"; }
			atdocs; cd /docs && find . -type f | sort | xargs md5sum && echo --- && cd / && touch /marker/ready-%d
			while [ ! -e /marker/now ]; do sleep 0.05; done
			atdocs; ls /docs/never-looked-up-%d 2>&1; cd /docs && find . -type f | sort | xargs md5sum`, i, i)
		c := running{cmd: de.container(t, docs, []string{marker + ":/marker"}, script), out: &harness.Log{}, docs: docs}
		c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
		must(t, c.cmd.Start())
		ctrs = append(ctrs, c)
	}
	for i := range ctrs {
		waitFor(t, 60*time.Second, func() bool { _, err := os.Stat(filepath.Join(marker, fmt.Sprintf("ready-%d", i))); return err == nil },
			func() string {
				return fmt.Sprintf("container %d never read its view before the restart: %s", i, ctrs[i].out)
			})
	}
	d.kill(syscall.SIGKILL)
	for _, p := range []string{shared, private} {
		// a new lookup: the root's listing may still come from the kernel's cache
		if _, err := os.Stat(filepath.Join(p, "never-looked-up")); !errors.Is(err, syscall.ENOTCONN) {
			t.Fatalf("%s with chromafsd killed: a new lookup says %v, want ENOTCONN: the restart below would prove nothing", p, err)
		}
	}
	start := time.Now()
	d.start()
	for i, p := range []string{shared, private, other} {
		waitFor(t, 2*time.Second-time.Since(start), func() bool {
			_, err := os.Stat(filepath.Join(p, fmt.Sprintf("never-looked-up-%d", i)))
			return errors.Is(err, fs.ErrNotExist)
		}, func() string { return p + " does not answer a new lookup 2 s after the new daemon started" })
	}
	t.Logf("every attachment answered %v after the new daemon started", time.Since(start).Round(time.Millisecond))
	must(t, os.WriteFile(filepath.Join(marker, "now"), nil, 0o644))
	for i, c := range ctrs {
		wantRestart := fmt.Sprintf("mounts at /docs: 1\n%s---\nmounts at /docs: 2\nls: /docs/never-looked-up-%d: No such file or directory\n%s", want, i, want)
		err := waitCmd(c.cmd, 60*time.Second)
		if got := c.out.String(); err != nil || got != wantRestart {
			t.Errorf("container %d over %s, running across the restart: %v, %s", i, filepath.Base(c.docs), err, firstDiff(got, wantRestart))
		}
	}

	if out, err := de.command("ps", "-aq", "--filter", fmt.Sprintf("label=chromafs-it=%d", os.Getpid())).Output(); err != nil || len(bytes.TrimSpace(out)) != 0 {
		t.Errorf("containers left after they exited (--rm): %v %q", err, out)
	}
	for _, p := range []string{shared, private, other} {
		if out, code := d.run(0, "detach", p); code != 0 {
			t.Errorf("detach %s: exit %d %s", p, code, out)
		}
	}
	if left := leftMounts(d.dir); len(left) > 0 {
		t.Errorf("mounts left after the containers exited and every detach: %v", left)
	}
}
