package integration_test

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/harness"
)

// maxImageBytes is issue 34's target for chromafsd's image.
const maxImageBytes = 40_000_000

// buildImage builds chromafsd's image with scripts/image.sh and the
// private dockerd, and returns its tag and size.
func buildImage(t *testing.T, e dockerEnv) (string, int64) {
	t.Helper()
	version := fmt.Sprintf("it-%d", os.Getpid())
	cmd := e.imageScript("build", "--version", version)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("image.sh build: %v\n%s", err, stderr.String())
	}
	tag := strings.TrimSpace(string(out))
	if tag != "chromafs/chromafsd:"+version {
		t.Fatalf("image.sh build printed %q, want the tag chromafs/chromafsd:%s\n%s", tag, version, stderr.String())
	}
	t.Cleanup(func() { _ = e.command("rmi", tag).Run() })
	inspect, err := e.command("image", "inspect", "--format",
		`{{.Size}}|{{index .Config.Labels "org.opencontainers.image.version"}}|{{index .Config.Labels "org.opencontainers.image.revision"}}|{{json .Config.Entrypoint}}|{{.Config.User}}`, tag).Output()
	if err != nil {
		t.Fatalf("docker image inspect %s: %v", tag, err)
	}
	f := strings.Split(strings.TrimSpace(string(inspect)), "|")
	size, _ := strconv.ParseInt(f[0], 10, 64)
	if len(f) != 5 || f[1] != version || len(f[2]) != 40 || f[3] != `["/usr/local/bin/chromafsd"]` || f[4] != "0:0" {
		t.Errorf("the image's labels, entrypoint and user: %q", f)
	}
	t.Logf("%s: %.1f MB\n%s", tag, float64(size)/1e6, stderr.String())
	return tag, size
}

// imageScript is scripts/image.sh with args, its docker the private one.
func (e dockerEnv) imageScript(args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(repoRoot(), "scripts", "image.sh"), args...)
	cmd.Env = append(os.Environ(), "DOCKER="+e.bin, "DOCKER_HOST="+e.host, "DOCKER_CONFIG="+e.config)
	return cmd
}

// teamCorpus ingests a corpus and returns its collection and the md5s
// listing of a local copy of what group team may see.
func teamCorpus(t *testing.T, parent string, spec corpus.Spec) (name, want string) {
	t.Helper()
	name, src := ingestCorpus(t, parent, spec)
	team := filepath.Join(parent, "team")
	visibleCopy(t, src, team, true)
	return name, mustSh(t, team, md5s)
}

// md5s lists a tree's files with their digests, the same in busybox's sh.
const md5s = "find . -type f | LC_ALL=C sort | xargs md5sum"

// privileged is how the DaemonSet's privileged container is run here:
// --privileged, unless this machine's capability bounding set lacks some
// capability (runc cannot then give a privileged container every one, and
// fails): then every capability this machine has, no seccomp filter, and
// /dev/fuse, which is what chromafsd uses of privileged.
func privileged(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	must(t, err)
	var bnd uint64
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapBnd:"); ok {
			bnd, _ = strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	last, _ := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	n, _ := strconv.Atoi(strings.TrimSpace(string(last)))
	if all := uint64(1)<<(n+1) - 1; n > 0 && bnd&all == all {
		return []string{"--privileged"}
	}
	args := []string{"--cap-add", "ALL", "--security-opt", "seccomp=unconfined", "--security-opt", "apparmor=unconfined"}
	for c := 0; c <= n; c++ {
		if bnd&(1<<c) == 0 {
			if name, ok := capNames[c]; ok {
				args = append(args, "--cap-drop", name)
			}
		}
	}
	t.Logf("this machine's capability bounding set is %#x: the container runs with %v instead of --privileged", bnd, args)
	return args
}

// capNames are the capabilities docker --cap-drop names, by number.
var capNames = map[int]string{0: "CHOWN", 1: "DAC_OVERRIDE", 2: "DAC_READ_SEARCH", 3: "FOWNER", 4: "FSETID", 5: "KILL", 6: "SETGID",
	7: "SETUID", 8: "SETPCAP", 9: "LINUX_IMMUTABLE", 10: "NET_BIND_SERVICE", 11: "NET_BROADCAST", 12: "NET_ADMIN", 13: "NET_RAW",
	14: "IPC_LOCK", 15: "IPC_OWNER", 16: "SYS_MODULE", 17: "SYS_RAWIO", 18: "SYS_CHROOT", 19: "SYS_PTRACE", 20: "SYS_PACCT",
	21: "SYS_ADMIN", 22: "SYS_BOOT", 23: "SYS_NICE", 24: "SYS_RESOURCE", 25: "SYS_TIME", 26: "SYS_TTY_CONFIG", 27: "MKNOD",
	28: "LEASE", 29: "AUDIT_WRITE", 30: "AUDIT_CONTROL", 31: "SETFCAP", 32: "MAC_OVERRIDE", 33: "MAC_ADMIN", 34: "SYSLOG",
	35: "WAKE_ALARM", 36: "BLOCK_SUSPEND", 37: "AUDIT_READ", 38: "PERFMON", 39: "BPF", 40: "CHECKPOINT_RESTORE"}

// TestImageAsDaemonSet (issue 34): chromafsd's image, built by
// scripts/image.sh with the private dockerd, run as the DaemonSet runs it:
// privileged, /dev/fuse, the state directory and a kubelet-like directory
// from the host shared both ways, the token from a file of mode 0400, the
// CSI socket in a host directory. A volume published through that socket
// from the host reads as the view's local copy on the host and in a second
// container (a HostToContainer-like rslave bind); the chromafsd container
// is killed and started again, and the second container, running across
// it, reads the volume again.
func TestImageAsDaemonSet(t *testing.T) {
	requireServer(t)
	e := requireDocker(t)
	tag, size := buildImage(t, e)
	if size > maxImageBytes {
		t.Errorf("the image is %d bytes; the target is at most %d", size, maxImageBytes)
	}

	parent := t.TempDir()
	name, wantTeam := teamCorpus(t, parent, corpus.Spec{Files: 30, Private: 3, Seed: 34})

	// the node: kubelet's directory is a shared mount, as on a node
	host := t.TempDir()
	kubelet := filepath.Join(host, "kubelet")
	for _, d := range []string{kubelet, "state", "cache", "csi", "run", "etc"} {
		if !filepath.IsAbs(d) {
			d = filepath.Join(host, d)
		}
		must(t, os.MkdirAll(d, 0o755))
	}
	for _, args := range [][]string{{"--bind", kubelet, kubelet}, {"--make-rshared", kubelet}} {
		if out, err := exec.Command("mount", args...).CombinedOutput(); err != nil {
			t.Fatalf("mount %v: %v %s", args, err, out)
		}
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-R", "-l", kubelet).Run() })
	must(t, os.WriteFile(filepath.Join(host, "etc", "policy.yaml"), fmt.Appendf(nil, "- namespaces: [agents]\n  collections: [%s]\n  groups: [team]\n", name), 0o644))
	must(t, os.WriteFile(filepath.Join(host, "etc", "token"), []byte("tok-"+strings.Repeat("s3cr3t", 4)+"\n"), 0o400))

	container := fmt.Sprintf("chromafsd-it-%d", os.Getpid())
	run := []string{"run", "-d", "--name", container, "--label", fmt.Sprintf("chromafs-it=%d", os.Getpid()),
		"--network", "host", "--device", "/dev/fuse",
		"-v", filepath.Join(host, "state") + ":/var/lib/chromafs",
		"-v", filepath.Join(host, "cache") + ":/var/cache/chromafs",
		"-v", filepath.Join(host, "csi") + ":/csi",
		"-v", filepath.Join(host, "run") + ":/run/chromafs",
		"-v", filepath.Join(host, "etc") + ":/etc/chromafs:ro",
		"--mount", "type=bind,src=" + kubelet + ",dst=" + kubelet + ",bind-propagation=rshared",
		tag,
		"--csi-endpoint=unix:///csi/csi.sock", "--node-id=node-1", "--socket=/run/chromafs/chromafsd.sock",
		"--state-dir=/var/lib/chromafs", "--cache-dir=/var/cache/chromafs", "--policy=/etc/chromafs/policy.yaml",
		"--token-file=/etc/chromafs/token", "--chroma-url=" + env.url, "--memory=256MiB", "--refresh=0"}
	run = append(run[:4], append(privileged(t), run[4:]...)...)
	if out, err := e.command(run...).CombinedOutput(); err != nil {
		t.Fatalf("docker run %s: %v\n%s", tag, err, out)
	}
	logs := func() string {
		out, _ := e.command("logs", "--tail", "40", container).CombinedOutput()
		return string(out)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chromafsd's container log:\n%s", logs())
		}
		_ = e.command("rm", "-f", container).Run()
	})
	sock := filepath.Join(host, "csi", "csi.sock")
	csiAnswers := func() bool {
		c, err := net.Dial("unix", sock)
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	waitFor(t, 15*time.Second, csiAnswers, func() string { return "no CSI socket answering from the container:\n" + logs() })
	if strings.Contains(logs(), "s3cr3t") {
		t.Error("the container's log holds the token")
	}

	c := dialCSI(t, sock)
	dir := filepath.Join(kubelet, "pods", "pod-a", "volumes", "kubernetes.io~csi", "docs")
	must(t, os.MkdirAll(dir, 0o750))
	v := volume{id: "csi-image", target: filepath.Join(dir, "mount"), mode: csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER, readonly: true,
		context: podContext("agents", "default", true, "collection", name, "groups", "team")}
	if err := v.publish(c); err != nil {
		t.Fatalf("publish through the container's CSI socket: %v\n%s", err, logs())
	}
	if got := mustSh(t, v.target, md5s); got != wantTeam {
		t.Fatalf("the volume on the host: %s", firstDiff(got, wantTeam))
	}

	// the pod's container: a slave copy of the volume, reading once
	// before the restart and once after it
	marker := filepath.Join(parent, "marker")
	must(t, os.Mkdir(marker, 0o777))
	pod := e.container(t, v.target, []string{marker + ":/marker"},
		`cd /docs && `+md5s+` > /marker/before; while [ ! -e /marker/now ]; do sleep 0.05; done; cd / && cd /docs && `+md5s)
	podOut := &harness.Log{} // written by exec's goroutines while the test reads it
	pod.Stdout, pod.Stderr = podOut, podOut
	must(t, pod.Start())
	waitFor(t, 30*time.Second, func() bool { b, _ := os.ReadFile(filepath.Join(marker, "before")); return len(b) > 0 },
		func() string { return "the pod's container did not read the volume: " + podOut.String() })
	if b, _ := os.ReadFile(filepath.Join(marker, "before")); string(b) != wantTeam {
		t.Errorf("the pod's container before the restart: %s", firstDiff(string(b), wantTeam))
	}

	if out, err := e.command("kill", "--signal", "KILL", container).CombinedOutput(); err != nil {
		t.Fatalf("docker kill: %v %s", err, out)
	}
	start := time.Now()
	if out, err := e.command("start", container).CombinedOutput(); err != nil {
		t.Fatalf("docker start: %v %s", err, out)
	}
	waitFor(t, 15*time.Second, func() bool { return answers(v.target) && csiAnswers() },
		func() string { return "the volume does not answer after the container's restart:\n" + logs() })
	t.Logf("the volume answered %v after the container started again", time.Since(start).Round(time.Millisecond))
	if got := mustSh(t, v.target, md5s); got != wantTeam {
		t.Errorf("the volume on the host after the restart: %s", firstDiff(got, wantTeam))
	}
	must(t, os.WriteFile(filepath.Join(marker, "now"), nil, 0o644))
	if err := waitCmd(pod, 30*time.Second); err != nil || podOut.String() != wantTeam {
		t.Errorf("the pod's container after the restart: %v, %s", err, firstDiff(podOut.String(), wantTeam))
	}
	if err := v.unpublish(c); err != nil {
		t.Errorf("unpublish: %v", err)
	}
	// the new container's mount and the copy of the dead one below it
	// (found by its device in the new mount namespace) are gone, on the
	// host too
	if left := mountsUnder(filepath.Join(kubelet, "pods")); len(left) > 0 {
		t.Errorf("mounts left after unpublish: %v", left)
	}
}

// TestDockerManagedPlugin (issue 34): scripts/image.sh plugin makes
// Docker's managed volume plugin of chromafsd's image (docker plugin
// create, settings, enable) on the private dockerd, with the policy and
// the token as the plugin's own bind mounts; docker volume create -d NAME
// then works with no daemon started by hand; two containers on a volume
// read the view as its local copy; docker plugin disable refuses while a
// container uses a volume; disable -f and enable under a running
// container: the running container loses the volume (its mount was the
// plugin's process, which stopped), a new container reads it again (the
// plugin's state, in its propagated mount, survives); then rm of the
// volume and of the plugin.
func TestDockerManagedPlugin(t *testing.T) {
	requireServer(t)
	e := requireDocker(t)
	parent := t.TempDir()
	name, want := teamCorpus(t, parent, corpus.Spec{Files: 20, Private: 2, Seed: 35})
	pol := filepath.Join(parent, "policy.yaml")
	must(t, os.WriteFile(pol, fmt.Appendf(nil, "- docker: true\n  collections: [%s]\n  groups: [team]\n", name), 0o644))
	tok := filepath.Join(parent, "token")
	must(t, os.WriteFile(tok, []byte("tok-"+strings.Repeat("s3cr3t", 4)+"\n"), 0o600))

	plugin := fmt.Sprintf("chromafs-it-%d", os.Getpid())
	cmd := e.imageScript("plugin", "--name", plugin, "--version", fmt.Sprintf("it-plugin-%d", os.Getpid()),
		"--chroma-url", env.url, "--policy", pol, "--token-file", tok)
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() {
		_ = e.command("plugin", "disable", "-f", plugin).Run()
		_ = e.command("plugin", "rm", "-f", plugin).Run()
		_ = e.command("rmi", fmt.Sprintf("chromafs/chromafsd:it-plugin-%d", os.Getpid())).Run()
	})
	if err != nil {
		t.Fatalf("image.sh plugin: %v\n%s", err, out)
	}
	if o, ok := e.out("plugin", "inspect", "--format", "{{.Enabled}} {{.Config.Interface.Types}}", plugin); !ok || o != "true [docker.volumedriver/1.0]" {
		t.Fatalf("the plugin: %v %q", ok, o)
	}
	// the token never in the plugin's arguments or its environment
	if o, _ := e.out("plugin", "inspect", plugin); strings.Contains(o, "s3cr3t") {
		t.Error("docker plugin inspect shows the token")
	}
	if o, err := e.imageScript("plugin", "--name", plugin, "--chroma-url", env.url, "--policy", pol).CombinedOutput(); err == nil || !strings.Contains(string(o), "exists already") {
		t.Errorf("image.sh plugin over an existing plugin: %v %s", err, o)
	}

	vol := plugin + "-docs"
	t.Cleanup(func() { _ = e.command("volume", "rm", "-f", vol).Run() })
	if o, ok := e.out("volume", "create", "-d", plugin, "-o", "collection="+name, "-o", "groups=billing", vol+"-refused"); ok || !strings.Contains(o, "billing") {
		t.Errorf("a group the policy does not grant: %v %s", ok, o)
	}
	if o, ok := e.out("volume", "create", "-d", plugin, "-o", "collection="+name, "-o", "groups=team", vol); !ok || o != vol {
		t.Fatalf("docker volume create: %v %s", ok, o)
	}
	marker := filepath.Join(parent, "marker")
	must(t, os.Mkdir(marker, 0o777))
	run := func(script string) (*exec.Cmd, *harness.Log) {
		c := e.volumeContainer(t, vol, marker, script)
		b := &harness.Log{} // written by exec's goroutines while the test reads it
		c.Stdout, c.Stderr = b, b
		must(t, c.Start())
		return c, b
	}
	// two containers on the volume; the second stays running
	a, aOut := run("cd /docs && " + md5s)
	b, bOut := run("cd /docs && " + md5s + ` && touch /marker/b-ready; while [ ! -e /marker/b-go ]; do sleep 0.05; done; stat -f /docs >/dev/null 2>&1 && echo statfs-answers || echo statfs-fails; ls /docs/never-looked-up 2>&1 | grep -q "No such file" && echo lookups-answer || echo lookups-fail`)
	if err := waitCmd(a, 60*time.Second); err != nil || aOut.String() != want {
		t.Errorf("container a: %v, %s", err, firstDiff(aOut.String(), want))
	}
	waitFor(t, 60*time.Second, func() bool { _, err := os.Stat(filepath.Join(marker, "b-ready")); return err == nil },
		func() string { return "container b never read the volume: " + bOut.String() })
	if !strings.HasPrefix(bOut.String(), want) {
		t.Errorf("container b: %s", firstDiff(bOut.String(), want))
	}

	if o, ok := e.out("plugin", "disable", plugin); ok || !strings.Contains(o, "in use") {
		t.Errorf("docker plugin disable with a volume in use: %v %q, want a refusal", ok, o)
	}
	if o, ok := e.out("plugin", "disable", "-f", plugin); !ok {
		t.Fatalf("docker plugin disable -f: %s", o)
	}
	if o, ok := e.out("plugin", "enable", plugin); !ok {
		t.Fatalf("docker plugin enable: %s", o)
	}
	// what survives: the volume and the plugin's state; not the running
	// container's mount (the plugin's process served it)
	c, cOut := run("cd /docs && " + md5s)
	if err := waitCmd(c, 60*time.Second); err != nil || cOut.String() != want {
		t.Errorf("a new container after disable -f and enable: %v, %s", err, firstDiff(cOut.String(), want))
	}
	must(t, os.WriteFile(filepath.Join(marker, "b-go"), nil, 0o644))
	_ = waitCmd(b, 60*time.Second)
	// stated in the README: its bind of the volume is Docker's rprivate
	// one, so the view mounted again does not reach it
	if got := strings.TrimPrefix(bOut.String(), want); got != "statfs-fails\nlookups-fail\n" {
		t.Errorf("the container running across disable -f and enable: %q, want the volume lost (as the README says)", got)
	}

	if o, ok := e.out("volume", "rm", vol); !ok {
		t.Errorf("docker volume rm: %s", o)
	}
	if o, ok := e.out("plugin", "disable", plugin); !ok {
		t.Errorf("docker plugin disable with no volume in use: %s", o)
	}
	if o, ok := e.out("plugin", "rm", plugin); !ok {
		t.Errorf("docker plugin rm: %s", o)
	}
}
