package integration_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/harness"
)

// chromafsd --docker-plugin (issue 23, point 4) with a real dockerd
// (scripts/dockerd.sh's private one). The plugin is announced to dockerd
// under a name of this run's own (chromafs-it-PID) by a spec file in
// /etc/docker/plugins naming the daemon's socket in its temporary
// directory; the test removes that file (and the directories it made for
// it) at its cleanup.

// announcePlugin writes /etc/docker/plugins/NAME.spec pointing at sock
// and removes it, and the directories it had to make, at the cleanup;
// the specs of this test that killed runs left are removed first.
func announcePlugin(t *testing.T, name, sock string) {
	t.Helper()
	var made []string
	for _, d := range []string{"/etc/docker", "/etc/docker/plugins"} {
		if _, err := os.Stat(d); errors.Is(err, fs.ErrNotExist) {
			must(t, os.Mkdir(d, 0o755))
			made = append(made, d)
		}
	}
	// a run killed before its cleanup left its spec: drop those of dead pids
	old, _ := filepath.Glob("/etc/docker/plugins/chromafs-it-*.spec")
	for _, f := range old {
		pid := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "chromafs-it-"), ".spec")
		if _, err := strconv.Atoi(pid); err == nil {
			if _, err := os.Stat("/proc/" + pid); errors.Is(err, fs.ErrNotExist) {
				_ = os.Remove(f)
			}
		}
	}
	spec := filepath.Join("/etc/docker/plugins", name+".spec")
	t.Cleanup(func() {
		_ = os.Remove(spec)
		for i := len(made) - 1; i >= 0; i-- {
			_ = os.Remove(made[i]) // only when empty: another spec stays
		}
	})
	must(t, os.WriteFile(spec, []byte("unix://"+sock+"\n"), 0o644))
}

// out runs the docker client and returns its trimmed combined
// output and whether it exited 0.
func (e dockerEnv) out(args ...string) (string, bool) {
	b, err := e.command(args...).CombinedOutput()
	return strings.TrimSpace(string(b)), err == nil
}

// volumeContainer is `docker run --rm -v VOL:/docs:ro` running script,
// with the marker directory bound at /marker; removed at the cleanup.
func (e dockerEnv) volumeContainer(t *testing.T, vol, marker, script string) *exec.Cmd {
	t.Helper()
	name := fmt.Sprintf("chromafs-it-%d-%d", os.Getpid(), containerSeq.Add(1))
	t.Cleanup(func() { _ = e.command("rm", "-f", name).Run() })
	return e.command("run", "--rm", "--name", name, "--network", "none", "--label", fmt.Sprintf("chromafs-it=%d", os.Getpid()),
		"-v", vol+":/docs:ro", "--mount", "type=bind,src="+marker+",dst=/marker", e.image, "sh", "-c", script)
}

// TestDockerVolumePlugin: docker volume create -d chromafs-it-PID makes
// volumes the policy's docker: true rule allows and refuses the rest at
// create with the policy's message (and unknown options with theirs);
// two containers on one volume read the view byte for byte; the first
// one stops and the second keeps reading; docker volume ls and inspect
// show the volume (its mountpoint while mounted); the last container's
// exit detaches the view; the volume outlives a restart of chromafsd; a
// container running across a SIGKILL and restart of chromafsd reads on
// through new lookups; a mount the policy no longer grants (SIGHUP) is
// refused; docker volume rm leaves no mount and no volume.
func TestDockerVolumePlugin(t *testing.T) {
	de := requireDocker(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 30, Private: 3, Seed: 47})
	pol := filepath.Join(parent, "policy.yaml")
	must(t, os.WriteFile(pol, []byte(fmt.Sprintf("- docker: true\n  collections: [%s]\n  groups: [team]\n", name)), 0o600))
	plugin := fmt.Sprintf("chromafs-it-%d", os.Getpid())
	sockDir, err := os.MkdirTemp("", "chromafs-docker-")
	must(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })
	sock := filepath.Join(sockDir, "plugin.sock")
	d := startDaemon(t, "--policy", pol, "--docker-plugin", "--docker-plugin-socket", sock)
	waitSocket := func() {
		waitFor(t, 10*time.Second, func() bool { fi, err := os.Stat(sock); return err == nil && fi.Mode().Type() == fs.ModeSocket },
			func() string { b, _ := os.ReadFile(d.logFile); return "no plugin socket:\n" + string(b) })
	}
	waitSocket()
	announcePlugin(t, plugin, sock)
	public := filepath.Join(parent, "public")
	visibleCopy(t, src, public, false)
	want, _ := sh(t, public, "find . -type f | sort | xargs md5sum", false)
	if strings.Count(want, "\n") < 20 {
		t.Fatalf("the public view's local copy has %d files", strings.Count(want, "\n"))
	}
	vol := plugin + "-docs"
	volPath := filepath.Join(d.stateDir, "docker", "volumes", vol)
	t.Cleanup(func() { _ = de.command("volume", "rm", "-f", vol).Run() })

	t.Run("create", func(t *testing.T) {
		for _, c := range []struct {
			opts []string
			says string
		}{
			{[]string{"collection=" + name, "groups=billing"}, `docker may not ask for group(s) billing of collection "` + name + `" (granted: groups team)`},
			{[]string{"collection=not-granted"}, `docker may not attach collection "not-granted"`},
			{[]string{"collection=" + name, "colour=red"}, `unknown option "colour"`},
			{[]string{"groups=team"}, "no collection: -o collection=NAME is needed"},
			{[]string{"collection=" + name, "layout=nope"}, `--layout "nope"`},
		} {
			args := []string{"volume", "create", "-d", plugin}
			for _, o := range c.opts {
				args = append(args, "-o", o)
			}
			out, ok := de.out(append(args, plugin+"-refused")...)
			if ok || !strings.Contains(out, c.says) {
				t.Errorf("docker volume create %v: ok=%v %q, want a refusal saying %q", c.opts, ok, out, c.says)
			}
		}
		if out, ok := de.out("volume", "inspect", plugin+"-refused"); ok {
			t.Errorf("a refused volume exists: %s", out)
		}
		if out, ok := de.out("volume", "create", "-d", plugin, "-o", "collection="+name, vol); !ok || out != vol {
			t.Fatalf("docker volume create: %v %s", ok, out)
		}
		if out, ok := de.out("volume", "ls", "--format", "{{.Driver}} {{.Name}}"); !ok || !strings.Contains("\n"+out+"\n", "\n"+plugin+" "+vol+"\n") {
			t.Errorf("docker volume ls does not list %s of %s: %v %s", vol, plugin, ok, out)
		}
		if out, ok := de.out("volume", "inspect", "--format", `{{.Driver}} [{{.Mountpoint}}] {{index .Status "collection"}}`, vol); !ok || out != plugin+" [] "+name {
			t.Errorf("docker volume inspect before any mount: %v %q", ok, out)
		}
	})
	if t.Failed() {
		return
	}

	marker := filepath.Join(parent, "marker")
	must(t, os.Mkdir(marker, 0o777))
	type running struct {
		cmd *exec.Cmd
		out *harness.Log
	}
	// a reads the view and waits for a-go; b counts its files, waits for
	// b-go (given after a has exited), then looks up a name never looked
	// up and reads every file: what the kernel cached of a's reads is not
	// b's, so b needs the view still served
	scripts := []string{
		`cd /docs && find . -type f | sort | xargs md5sum && touch /marker/a-ready
		while [ ! -e /marker/a-go ]; do sleep 0.05; done`,
		`cd /docs && find . -type f | wc -l && echo --- && touch /marker/b-ready
		while [ ! -e /marker/b-go ]; do sleep 0.05; done
		ls /docs/never-looked-up 2>&1; cd /docs && find . -type f | sort | xargs md5sum`,
	}
	var ctrs []running
	for _, s := range scripts {
		c := running{cmd: de.volumeContainer(t, vol, marker, s), out: &harness.Log{}}
		c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
		must(t, c.cmd.Start())
		ctrs = append(ctrs, c)
	}
	for i, r := range []string{"a-ready", "b-ready"} {
		waitFor(t, 60*time.Second, func() bool { _, err := os.Stat(filepath.Join(marker, r)); return err == nil },
			func() string { return fmt.Sprintf("container %d never read the volume: %s", i, ctrs[i].out) })
	}
	if out, ok := de.out("volume", "inspect", "--format", `{{.Mountpoint}} {{index .Status "containers"}}`, vol); !ok || out != volPath+" 2" {
		t.Errorf("docker volume inspect with two containers: %v %q, want %q", ok, out, volPath+" 2")
	}
	if len(mountsUnder(volPath)) == 0 {
		t.Errorf("no mount at %s with two containers running", volPath)
	}
	if out, ok := de.out("volume", "rm", vol); ok {
		t.Errorf("docker volume rm of a volume in use: ok: %s", out)
	}
	must(t, os.WriteFile(filepath.Join(marker, "a-go"), nil, 0o644))
	if err := waitCmd(ctrs[0].cmd, 60*time.Second); err != nil || ctrs[0].out.String() != want {
		t.Errorf("container a: %v, %s", err, firstDiff(ctrs[0].out.String(), want))
	}
	// a's Unmount is done once docker run returned; b holds the volume
	if len(mountsUnder(volPath)) == 0 {
		t.Errorf("the volume was detached when the first of two containers stopped")
	}
	must(t, os.WriteFile(filepath.Join(marker, "b-go"), nil, 0o644))
	wantB := fmt.Sprintf("%d\n---\nls: /docs/never-looked-up: No such file or directory\n%s", strings.Count(want, "\n"), want)
	if err := waitCmd(ctrs[1].cmd, 60*time.Second); err != nil || ctrs[1].out.String() != wantB {
		t.Errorf("container b, reading on after a stopped: %v, %s", err, firstDiff(ctrs[1].out.String(), wantB))
	}
	waitFor(t, 10*time.Second, func() bool { return len(mountsUnder(volPath)) == 0 },
		func() string {
			return fmt.Sprintf("mounts left at %s after the last container exited: %v", volPath, mountsUnder(volPath))
		})
	if out, ok := de.out("volume", "inspect", "--format", `[{{.Mountpoint}}] {{index .Status "containers"}}`, vol); !ok || out != "[] 0" {
		t.Errorf("docker volume inspect after the containers exited: %v %q", ok, out)
	}

	// the volume outlives the daemon: a new chromafsd knows it and mounts it
	d.kill(syscall.SIGTERM)
	d.start()
	waitSocket()
	out, err := de.volumeContainer(t, vol, marker, "cd /docs && find . -type f | sort | xargs md5sum").CombinedOutput()
	if err != nil || string(out) != want {
		t.Errorf("a container on the volume after chromafsd restarted: %v, %s", err, firstDiff(string(out), want))
	}

	// a container running across a SIGKILL and a restart of chromafsd
	c := running{cmd: de.volumeContainer(t, vol, marker, `cd /docs && find . -type f | wc -l && cd / && touch /marker/c-ready
		while [ ! -e /marker/c-go ]; do sleep 0.05; done
		ls /docs/never-looked-up-c 2>&1; cd /docs && find . -type f | sort | xargs md5sum`), out: &harness.Log{}}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	must(t, c.cmd.Start())
	waitFor(t, 60*time.Second, func() bool { _, err := os.Stat(filepath.Join(marker, "c-ready")); return err == nil },
		func() string { return "container c never read the volume: " + c.out.String() })
	d.kill(syscall.SIGKILL)
	if _, err := os.Stat(filepath.Join(volPath, "never-looked-up")); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("%s with chromafsd killed: a new lookup says %v, want ENOTCONN: the restart below would prove nothing", volPath, err)
	}
	d.start()
	waitSocket()
	waitFor(t, 5*time.Second, func() bool {
		_, err := os.Stat(filepath.Join(volPath, "never-looked-up"))
		return errors.Is(err, fs.ErrNotExist)
	}, func() string { return volPath + " does not answer after the restart" })
	must(t, os.WriteFile(filepath.Join(marker, "c-go"), nil, 0o644))
	wantC := fmt.Sprintf("%d\nls: /docs/never-looked-up-c: No such file or directory\n%s", strings.Count(want, "\n"), want)
	if err := waitCmd(c.cmd, 60*time.Second); err != nil || c.out.String() != wantC {
		t.Errorf("container c, running across a SIGKILL and restart of chromafsd: %v, %s", err, firstDiff(c.out.String(), wantC))
	}
	waitFor(t, 10*time.Second, func() bool { return len(mountsUnder(volPath)) == 0 },
		func() string {
			return fmt.Sprintf("mounts left at %s after container c exited: %v", volPath, mountsUnder(volPath))
		})

	// the policy is checked again at mount: a volume of group team, made
	// while the policy granted it, is refused once SIGHUP took it back
	team := plugin + "-team"
	t.Cleanup(func() { _ = de.command("volume", "rm", "-f", team).Run() })
	if out, ok := de.out("volume", "create", "-d", plugin, "-o", "collection="+name, "-o", "groups=team", team); !ok {
		t.Fatalf("docker volume create -o groups=team: %s", out)
	}
	must(t, os.WriteFile(pol, []byte(fmt.Sprintf("- docker: true\n  collections: [%s]\n  groups: []\n", name)), 0o600))
	d.mu.Lock()
	must(t, d.cmd.Process.Signal(syscall.SIGHUP))
	d.mu.Unlock()
	waitFor(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(d.logFile)
		return strings.Contains(string(b), "SIGHUP: policy read again")
	},
		func() string { return "chromafsd never read the policy again" })
	out, err = de.volumeContainer(t, team, marker, "ls /docs").CombinedOutput()
	if says := `docker may not ask for group(s) team of collection "` + name + `" (granted: public pages only)`; err == nil || !strings.Contains(string(out), says) {
		t.Errorf("a container on a volume the policy no longer grants: %v %s, want a refusal saying %q", err, out, says)
	}
	t.Logf("docker run on a volume the policy no longer grants: %s", lastLine(out))
	if left := leftMounts(d.dir); len(left) > 0 {
		t.Errorf("mounts left after a refused mount: %v", left)
	}

	if out, ok := de.out("volume", "rm", vol, team); !ok || out != vol+"\n"+team {
		t.Errorf("docker volume rm: %v %s", ok, out)
	}
	if out, ok := de.out("volume", "ls", "-q"); !ok || strings.Contains("\n"+out+"\n", "\n"+vol+"\n") {
		t.Errorf("docker volume ls after rm: %v %s", ok, out)
	}
	if left := leftMounts(d.dir); len(left) > 0 {
		t.Errorf("mounts left after docker volume rm: %v", left)
	}
	if _, err := os.Stat(volPath); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the volume's directory after rm: %v", err)
	}
}
