package integration_test

import (
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/harness"
)

// What an operator meets in the first hour (issue 20): fstab sources that
// mount(8) cannot turn into paths, mount -a run twice, signalling one
// mount of several by its mount point, and no litter in the logs.

// TestFstabSourceForm: run from a directory that holds a folder named like
// the collection, an fstab entry "chromafs:NAME" mounts with mount -a, a
// second mount -a skips it (exit 0, still mounted), and mount -t chromafs
// takes the same source; the bare NAME there is refused with that advice,
// and from a directory without such a folder the bare form mounts and a
// second mount -a skips it too.
func TestFstabSourceForm(t *testing.T) {
	requireFUSE(t)
	requireRoot(t)
	if !withMountHelpers(t) {
		return
	}
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 12, Seed: 31})
	work := filepath.Join(parent, "work")
	must(t, os.MkdirAll(filepath.Join(work, name), 0o755)) // the folder mount(8) would take the source for
	mnt := mountDir(t, parent)
	logFile := filepath.Join(parent, "mnt.log") // not in the host's default cache directory
	opts := "_netdev,defaults,chroma_url=" + env.url + ",disk_cache_size=0,host_requests=0,prefetch=none,log_file=" + logFile
	fstab := func(source string) string {
		p := filepath.Join(parent, "fstab")
		must(t, os.WriteFile(p, []byte(fmt.Sprintf("%s %s chromafs %s 0 0\n", source, mnt, opts)), 0o644))
		return p
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	umount := func() {
		t.Helper()
		pid := daemonPid(t, mnt)
		if out, code := sh(t, parent, "umount "+mnt, true); code != 0 {
			t.Fatalf("umount: exit %d: %s", code, out)
		}
		waitExit(t, pid)
	}

	tab := fstab("chromafs:" + name)
	for i := 1; i <= 2; i++ {
		if out, code := sh(t, work, "mount -a -T "+tab, true); code != 0 || !isMounted(mnt) {
			t.Fatalf("mount -a -T fstab (run %d, source chromafs:%s, from a directory holding %s/): exit %d: %s", i, name, name, code, out)
		}
	}
	sameOutput(t, mnt, src, "find . | sort; cat guides/*.md | md5sum")
	if out, _ := sh(t, parent, "findmnt -n -o SOURCE "+mnt, false); strings.TrimSpace(out) != "chromafs:"+name {
		t.Errorf("findmnt SOURCE %q, want chromafs:%s", out, name)
	}
	umount()

	cmd := fmt.Sprintf("mount -t chromafs chromafs:%s %s -o chroma_url=%s,disk_cache_size=0,host_requests=0,log_file=%s", name, mnt, env.url, logFile)
	if out, code := sh(t, work, cmd, true); code != 0 {
		t.Fatalf("%s: exit %d: %s", cmd, code, out)
	}
	sameOutput(t, mnt, src, "ls -R | head -20")
	umount()

	tab = fstab(name)
	out, code := sh(t, work, "mount -a -T "+tab, true)
	if code == 0 || isMounted(mnt) || !strings.Contains(out, "write the source as chromafs:"+name) {
		t.Errorf("bare source from a directory holding %s/: exit %d, %q; want a refusal that gives the chromafs: form", name, code, out)
	}
	for i := 1; i <= 2; i++ {
		if out, code := sh(t, parent, "mount -a -T "+tab, true); code != 0 || !isMounted(mnt) {
			t.Fatalf("mount -a -T fstab (run %d, bare source, no such folder): exit %d: %s", i, code, out)
		}
	}
	umount()
}

// TestSignalMountByMountpoint: of two daemons serving the same collection,
// chromafs-mount --reload MOUNTPOINT makes only that one pick up a
// re-ingest, --unmount MOUNTPOINT stops only that one and returns once it
// has exited; --pid-file holds the pid until exit; the pid is in the log
// and in /metrics; a directory that is not a chromafs mount is refused.
func TestSignalMountByMountpoint(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 8, Seed: 32})
	mntA, mntB := filepath.Join(parent, "a"), filepath.Join(parent, "b")
	must(t, os.Mkdir(mntA, 0o755))
	must(t, os.Mkdir(mntB, 0o755))
	pidFile := filepath.Join(parent, "a.pid")
	logA := filepath.Join(parent, "a.log")
	port, err := freePort()
	must(t, err)
	runtime := t.TempDir() // as XDG_RUNTIME_DIR of a user who is not root; root's is /run/chromafs
	ctl := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(filepath.Join(env.bin, "chromafs-mount"), args...)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtime)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), exitCode(t, err)
	}
	common := []string{"--daemon", "--chroma-url", env.url, "--collection", name, "--refresh", "0", "--disk-cache-size", "0", "--host-requests", "0"}
	if out, code := ctl(append(common, "--pid-file", pidFile, "--log-file", logA, "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", port), mntA)...); code != 0 {
		t.Fatalf("mount a: exit %d: %s", code, out)
	}
	t.Cleanup(func() { _ = exec.Command("fusermount3", "-u", "-z", mntA).Run() })
	portB, err := freePort()
	must(t, err)
	metricsB := fmt.Sprintf("http://127.0.0.1:%d/metrics", portB)
	if out, code := ctl(append(common, "--log-file", filepath.Join(parent, "b.log"), "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", portB), mntB)...); code != 0 {
		t.Fatalf("mount b: exit %d: %s", code, out)
	}
	t.Cleanup(func() { _ = exec.Command("fusermount3", "-u", "-z", mntB).Run() })
	pidA, pidB := daemonPid(t, mntA), daemonPid(t, mntB)

	b, err := os.ReadFile(pidFile)
	must(t, err)
	if strings.TrimSpace(string(b)) != strconv.Itoa(pidA) {
		t.Errorf("--pid-file holds %q, want %d", b, pidA)
	}
	if logged, _ := os.ReadFile(logA); !strings.Contains(string(logged), fmt.Sprintf("pid=%d", pidA)) {
		t.Errorf("the log's mounted line lacks pid=%d:\n%s", pidA, logged)
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	must(t, err)
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := fmt.Sprintf(`chromafs_mount_info{collection=%q,mountpoint=%q,pid="%d"} 1`, name, mntA, pidA); !strings.Contains(string(metrics), want) {
		t.Errorf("/metrics lacks %s", want)
	}

	must(t, os.WriteFile(filepath.Join(src, "reloaded.md"), []byte("# new page\n"), 0o644))
	if _, errOut, code := ingestCmd(t, nil, "--chroma-url", env.url, "--collection", name, "--quiet", src); code != 0 {
		t.Fatalf("re-ingest: exit %d: %s", code, errOut)
	}
	if out, code := ctl("--reload", mntA); code != 0 {
		t.Fatalf("--reload %s: exit %d: %s", mntA, code, out)
	}
	waitFor(t, 10*time.Second, func() bool { _, err := os.Stat(filepath.Join(mntA, "reloaded.md")); return err == nil },
		func() string { return "the page re-ingested never appeared on the reloaded mount" })
	// b has --refresh 0: a SIGHUP is the only thing that makes it ask
	// for the tree's stamp, within microseconds of the signal, long
	// before a has loaded its new tree; none may have come
	if polls, err := harness.Metric(metricsB, "chromafs_tree_polls_total"); err != nil || polls != 0 {
		t.Errorf("--reload of a reached the other mount: b polled %d times (%v), want 0", polls, err)
	}
	if _, err := os.Stat(filepath.Join(mntB, "reloaded.md")); err == nil {
		t.Error("--reload of a reached the other mount: b shows the re-ingested page")
	}

	if out, code := ctl("--unmount", mntB); code != 0 {
		t.Fatalf("--unmount %s: exit %d: %s", mntB, code, out)
	}
	if isMounted(mntB) {
		t.Error("b still mounted after --unmount returned")
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pidB)); err == nil {
		t.Errorf("b's process %d still runs after --unmount returned", pidB)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", pidA)); err != nil || !isMounted(mntA) {
		t.Fatal("--unmount of b stopped a")
	}
	sameOutput(t, mntA, src, "find . | sort")

	for _, dir := range []string{mntB, parent} {
		if out, code := ctl("--reload", dir); code != 1 || !strings.Contains(out, "not a chromafs mount") || strings.Contains(out, "\n") {
			t.Errorf("--reload %s (no chromafs mount there): exit %d %q, want exit 1 and one line", dir, code, out)
		}
	}
	if out, code := ctl("--unmount", mntA); code != 0 || isMounted(mntA) {
		t.Fatalf("--unmount %s: exit %d: %s", mntA, code, out)
	}
	if _, err := os.Stat(pidFile); err == nil {
		t.Error("--pid-file left after the mount exited")
	}
}

// TestFailedDaemonLeavesNoLog: a --daemon that cannot mount says why on
// stderr and leaves no empty log file in its cache directory.
func TestFailedDaemonLeavesNoLog(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	mnt := mountDir(t, parent)
	cacheDir := t.TempDir()
	out, err := exec.Command(filepath.Join(env.bin, "chromafs-mount"), "--daemon", "--chroma-url", env.url, "--collection", collectionName(t)+"-missing",
		"--cache-dir", cacheDir, "--host-requests", "0", mnt).CombinedOutput()
	if code := exitCode(t, err); code != 1 || !strings.Contains(string(out), "not found") {
		t.Fatalf("--daemon of a missing collection: exit %d %q, want exit 1 and why", code, out)
	}
	// nowhere in the cache directory, not only in logs/
	must(t, filepath.WalkDir(cacheDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if info, err := d.Info(); err == nil && d.Type().IsRegular() && info.Size() == 0 {
			t.Errorf("empty file left: %s", p)
		}
		return nil
	}))
}
