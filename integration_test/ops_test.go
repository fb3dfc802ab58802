package integration_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/testenv"
)

// requireRoot skips (or fails, under CI=true) a test that needs a mount
// namespace of its own or runs a command as another user.
func requireRoot(t *testing.T) {
	t.Helper()
	testenv.Require(t, os.Geteuid() == 0, "needs root (a mount namespace, setpriv, /dev/fuse's mode)")
}

// TestFstabAndMountHelper: an fstab line mounts with mount -a -T FILE and
// unmounts with umount; mount -t chromafs and -t fuse.chromafs mount too,
// with the generic options mount(8) and fstab add.
func TestFstabAndMountHelper(t *testing.T) {
	requireFUSE(t)
	requireRoot(t)
	if !withMountHelpers(t) {
		return
	}
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 20, Seed: 12})
	readOnlyTree(t, src)
	mnt := mountDir(t, parent)
	fstab := filepath.Join(parent, "fstab")
	logFile := filepath.Join(parent, "mnt.log") // not in the host's default cache directory
	opts := "_netdev,defaults,nofail,x-systemd.mount-timeout=30,chroma_url=" + env.url + ",disk_cache_size=0,host_requests=0,prefetch=none,log_file=" + logFile
	must(t, os.WriteFile(fstab, []byte(fmt.Sprintf("# chromafs\n%s %s chromafs %s 0 0\n", name, mnt, opts)), 0o644))
	if out, code := sh(t, parent, "mount -a -T "+fstab, true); code != 0 || !isMounted(mnt) {
		t.Fatalf("mount -a -T fstab: exit %d: %s", code, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	sameOutput(t, mnt, src, "find . | sort; cat guides/*.md | md5sum")
	if out, _ := sh(t, parent, "findmnt -n -o FSTYPE "+mnt, false); strings.TrimSpace(out) != "fuse.chromafs" {
		t.Errorf("findmnt FSTYPE %q, want fuse.chromafs", out)
	}
	readOnlyMount(t, mnt, "an fstab line with defaults")
	pid := daemonPid(t, mnt)
	if out, code := sh(t, parent, "umount "+mnt, true); code != 0 {
		t.Fatalf("umount: exit %d: %s", code, out)
	}
	waitExit(t, pid)
	for _, typ := range []string{"chromafs", "fuse.chromafs"} {
		cmd := fmt.Sprintf("mount -t %s %s %s -o rw,nosuid,chroma_url=%s,disk_cache_size=0,host_requests=0,log_file=%s", typ, name, mnt, env.url, logFile)
		if out, code := sh(t, parent, cmd, true); code != 0 {
			t.Fatalf("%s: exit %d: %s", cmd, code, out)
		}
		sameOutput(t, mnt, src, "ls -R | head -20")
		readOnlyMount(t, mnt, "-o rw,nosuid")
		pid := daemonPid(t, mnt)
		if out, code := sh(t, parent, "umount "+mnt, true); code != 0 {
			t.Fatalf("umount: %s", out)
		}
		waitExit(t, pid)
	}
}

// readOnlyMount requires the mount at mnt to carry ro, nosuid and nodev
// (SEMANTICS, "A read-only file system"), whatever it was asked for.
func readOnlyMount(t *testing.T, mnt, asked string) {
	t.Helper()
	out, code := sh(t, mnt, "findmnt -n -o OPTIONS "+mnt, false)
	opts := strings.Split(strings.TrimSpace(out), ",")
	if code != 0 || !slices.Contains(opts, "ro") || slices.Contains(opts, "rw") || !slices.Contains(opts, "nosuid") || !slices.Contains(opts, "nodev") {
		t.Errorf("mount options %q (asked for %s; exit %d), want ro,nosuid,nodev", out, asked, code)
	}
}

// TestDaemonReportsFusermountReason: as a user who may not use
// allow_other, --daemon --allow-other prints fusermount3's own reason,
// not a guess.
func TestDaemonReportsFusermountReason(t *testing.T) {
	requireFUSE(t)
	requireRoot(t)
	if !inMountNS(t, nsNoAllowOther) { // whatever the host's /etc/fuse.conf allows
		return
	}
	parent := t.TempDir()
	name, _ := ingestCorpus(t, parent, corpus.Spec{Files: 5, Seed: 13})
	// a directory the unprivileged user can reach, with the binary in it
	dir, err := os.MkdirTemp("", "chromafs-nobody-")
	must(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "chromafs-mount")
	for _, b := range []string{"chromafs-mount", "chromafs-mount-serve"} { // the launcher and the command
		must(t, exec.Command("cp", filepath.Join(env.bin, b), dir).Run())
	}
	mnt := filepath.Join(dir, "mnt")
	must(t, os.Mkdir(mnt, 0o777))
	must(t, os.Chmod(mnt, 0o777))
	asNobody := func(want string) {
		t.Helper()
		cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", bin, "--daemon", "--allow-other",
			"--chroma-url", env.url, "--collection", name, "--disk-cache-size", "0", "--host-requests", "0", mnt)
		cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + dir}
		out, err := cmd.CombinedOutput()
		line := strings.TrimSpace(string(out))
		if code := exitCode(t, err); code != 1 || !strings.Contains(line, want) || strings.Contains(line, "\n") {
			t.Errorf("--daemon --allow-other as uid 65534: exit %d: %q, want exit 1 and one line with fusermount3's reason (%q)", code, out, want)
		}
	}
	st, err := os.Stat("/dev/fuse")
	must(t, err)
	if st.Mode().Perm()&0o006 != 0o006 { // as on this machine: other users may not open it
		asNobody("failed to open /dev/fuse: Permission denied")
		asNobody("run as root, or let users open it as Debian ships it: chmod 0666 /dev/fuse")
		// Debian's own mode for it, for the rest of the test
		must(t, os.Chmod("/dev/fuse", 0o666))
		t.Cleanup(func() { _ = os.Chmod("/dev/fuse", st.Mode().Perm()) })
	}
	asNobody("option allow_other only allowed if 'user_allow_other' is set in /etc/fuse.conf")
}

// TestBadValuesAreUsageErrors: every bad value gets exit 2 and one line
// that says what is expected.
func TestBadValuesAreUsageErrors(t *testing.T) {
	mnt := t.TempDir()
	for _, c := range []struct {
		bin  string
		args []string
		want string
	}{
		{"chromafs-mount", []string{"--timeout", "0"}, "more than 0"},
		{"chromafs-mount", []string{"--timeout", "-1s"}, "more than 0"},
		{"chromafs-mount", []string{"--timeout", "10"}, "write 10s"},
		{"chromafs-mount", []string{"--refresh", "-5s"}, "0 or more"},
		{"chromafs-mount", []string{"--cache-size", "1"}, "at least 1MiB"},
		{"chromafs-mount", []string{"--cache-size", "NaN"}, "positive size"},
		{"chromafs-mount", []string{"--groups", "sre billing"}, "commas"},
		{"chromafs-mount", []string{"--prefetch", "some"}, "none, dir, all or auto"},
		{"chromafs-mount", []string{"--cache-size", "1XB"}, "TiB"},
		{"chromafs-mount", []string{"--host-requests", "many"}, "want a whole number (default 8"},
		{"chromafs-mount", []string{"--push-pages=maybe"}, "want true or false"},
		{"chromafs-mount", []string{"--metrics-addr", "9464"}, "want HOST:PORT"},
		{"chromafs-mount", []string{"--metrics-addr", "127.0.0.1:http-ish"}, "want a number 0..65535"},
		{"chromafs-mount", []string{"--reload", "--unmount"}, "choose one"},
		{"chromafs-ingest", []string{"--workers", "four"}, "want a whole number"},
		{"chromafs-ingest", []string{"--workers", "0"}, "1 or more"},
		{"chromafs-ingest", []string{"--workers", "-3"}, "1 or more"},
		{"chromafs-ingest", []string{"--timeout", "10"}, "write 10s"},
		{"chromafs-ingest", []string{"--lazy-over", "1MiB"}, "base URL"},
	} {
		args := append([]string{"--collection", "docs"}, c.args...)
		args = append(args, mnt)
		out, err := exec.Command(filepath.Join(env.bin, c.bin), args...).CombinedOutput()
		code := exitCode(t, err)
		line := strings.TrimSpace(string(out))
		if code != 2 || !strings.Contains(line, c.want) || strings.Contains(line, "\n") {
			t.Errorf("%s %s: exit %d %q; want exit 2 and one line saying %q", c.bin, strings.Join(c.args, " "), code, line, c.want)
		}
	}
}

// TestHelpVersionAndDaemonHygiene: --help goes to stdout and lists exit
// codes and the environment; --version names the VCS revision; the daemon
// leaves the caller's directory; df does not read 100% full.
func TestHelpVersionAndDaemonHygiene(t *testing.T) {
	requireFUSE(t)
	head, gitErr := exec.Command("git", "-C", repoRoot(), "rev-parse", "--short=12", "HEAD").Output()
	if gitErr != nil { // a source tree without git: its builds have no revision to name
		if testenv.CI() {
			t.Errorf("git rev-parse HEAD: %v; CI=true needs the revision check", gitErr)
		} else {
			t.Logf("SKIPPED the revision check: git rev-parse HEAD: %v", gitErr)
		}
	}
	for _, b := range []string{"chromafs-mount", "chromafs-ingest"} {
		cmd := exec.Command(filepath.Join(env.bin, b), "--help")
		var stdout strings.Builder
		cmd.Stdout = &stdout
		if err := cmd.Run(); err != nil || !strings.Contains(stdout.String(), "Exit status:") || !strings.Contains(stdout.String(), "CHROMA_TOKEN") {
			t.Errorf("%s --help on stdout: %v, %.200q", b, err, stdout.String())
		}
		out, verr := exec.Command(filepath.Join(env.bin, b), "--version").Output()
		if verr != nil || !strings.HasPrefix(string(out), b+" ") {
			t.Errorf("%s --version: %v %q", b, verr, out)
		}
		if gitErr == nil && !strings.Contains(string(out), strings.TrimSpace(string(head))) {
			t.Errorf("%s --version %q does not name the revision %s", b, out, head)
		}
	}
	parent := t.TempDir()
	name, _ := ingestCorpus(t, parent, corpus.Spec{Files: 10, Seed: 14})
	caller := filepath.Join(parent, "caller")
	must(t, os.Mkdir(caller, 0o755))
	mnt := mountDir(t, parent)
	cacheDir := t.TempDir()
	cmd := exec.Command(filepath.Join(env.bin, "chromafs-mount"), "--daemon", "--chroma-url", env.url, "--collection", name,
		"--cache-dir", cacheDir, "--disk-cache-size", "0", "--host-requests", "0", "../mnt")
	cmd.Dir = caller
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("--daemon with a relative mount point: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("fusermount3", "-u", "-z", mnt).Run() })
	pid := daemonPid(t, "../mnt") // its command line, as given
	if cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid)); err != nil || cwd != "/" {
		t.Errorf("the daemon's working directory is %q (%v), want /", cwd, err)
	}
	if out, code := sh(t, parent, "df --output=pcent mnt | tail -1", false); code != 0 || strings.TrimSpace(out) == "100%" {
		t.Errorf("df: exit %d, %q", code, out)
	}
	var st syscall.Statfs_t
	// a nominal 1 PiB and 1G inodes (the corpus is far smaller), the used
	// part what the tree holds
	if err := syscall.Statfs(mnt, &st); err != nil || uint64(st.Blocks)*uint64(st.Bsize) != 1<<50 || st.Files != 1<<30 ||
		st.Bavail == 0 || st.Bavail >= st.Blocks || st.Ffree >= st.Files || st.Namelen != 255 {
		t.Errorf("statfs: %+v %v; want 1 PiB and 1G inodes, some used, names of 255 bytes", st, err)
	}
	if out, code := sh(t, parent, "fusermount3 -u mnt", true); code != 0 {
		t.Fatalf("fusermount3 -u: %s", out)
	}
	waitExit(t, pid)
	logName := strings.Trim(strings.ReplaceAll(mnt, "/", "-"), "-") + ".log"
	if b, err := os.ReadFile(filepath.Join(cacheDir, "logs", logName)); err != nil || !strings.Contains(string(b), "msg=mounted") {
		t.Errorf("a daemon without --log-file kept no log in its cache dir: %v %.300q", err, b)
	}
}

// TestAccessLog: the access log of a cat + grep -r session names every
// file read, with cat or grep as the command, the tier that served it,
// the listings grep made and a lookup of a missing name.
func TestAccessLog(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 40, Seed: 15})
	mnt := mountDir(t, parent)
	logPath := filepath.Join(parent, "access.jsonl")
	m := startMount(t, name, mnt, "--access-log", logPath, "--prefetch", "none", "--push-pages=false")
	list, _ := sh(t, src, "find . -type f | sort | sed 's|^./||'", false)
	files := strings.Fields(list)
	if len(files) < 40 {
		t.Fatalf("%d source files", len(files))
	}
	first := files[0]
	for _, c := range []struct {
		script, out string
		code        int
	}{
		{"cat " + first + " > /dev/null", "", 0},
		{"cat no-such-page.md", "No such file or directory", 1},
		{"grep -rc zzz . > /dev/null", "", 1},    // 1: nothing matched, and no error
		{"cat " + first + " > /dev/null", "", 0}, // the kernel's page cache: no read event
	} {
		if out, code := sh(t, mnt, c.script, true); code != c.code || !strings.Contains(out, c.out) {
			t.Fatalf("%s: exit %d, %q; want exit %d and %q", c.script, code, out, c.code, c.out)
		}
	}
	type event struct {
		Op, Path, Tier, Comm, Error string
		Bytes                       *int64
		PID                         uint32
	}
	readBy, tierOf := map[string]string{}, map[string]string{}
	var lookups, listings, firstReads int
	m.stop(t) // the log is written in the background: its queue reaches the file at exit
	raw, err := os.ReadFile(logPath)
	must(t, err)
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var e event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		switch e.Op {
		case "read":
			if e.Tier != "chroma" && e.Tier != "memory" && e.Tier != "shared" || e.PID == 0 || e.Bytes == nil {
				t.Errorf("read event %+v", e)
			}
			if _, seen := readBy[e.Path]; !seen {
				readBy[e.Path], tierOf[e.Path] = e.Comm, e.Tier
			}
			if e.Path == first {
				firstReads++
			}
		case "lookup":
			if e.Path == "no-such-page.md" && e.Comm == "cat" && strings.Contains(e.Error, "no such file") {
				lookups++
			}
		case "readdir":
			if e.Comm == "grep" {
				listings++
			}
		}
	}
	for _, f := range files {
		want := "grep"
		if f == first {
			want = "cat"
		}
		if readBy[f] != want {
			t.Errorf("%s: first read by %q in the access log, want %q", f, readBy[f], want)
		}
		// nothing cached it before (--prefetch none, --push-pages=false):
		// its first read came from Chroma, or shared a load that did
		if tierOf[f] != "chroma" && tierOf[f] != "shared" {
			t.Errorf("%s: first read served by %q, want chroma (or shared)", f, tierOf[f])
		}
	}
	if firstReads != 1 {
		t.Errorf("%d read events for %s, read twice by cat; want 1 (the second is the kernel's)", firstReads, first)
	}
	if lookups != 1 || listings == 0 {
		t.Errorf("%d lookups of the missing page by cat (want 1), %d listings by grep", lookups, listings)
	}
}

// TestAccessLogStalled: an access log nobody takes — a pipe whose reader
// never reads, full after its first 64 KiB (a few hundred events), as a
// hung NFS server would be — leaves reads unaffected: a cat of every file
// gives the local copy's output and returns. Once the reader reads, the
// log holds the reads (its 1 MiB queue held them: none dropped).
func TestAccessLogStalled(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 600, Seed: 16})
	fifo := filepath.Join(parent, "access.fifo")
	must(t, syscall.Mkfifo(fifo, 0o600))
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0) // the reader that does not read yet
	must(t, err)
	defer r.Close()
	mnt := mountDir(t, parent)
	m := startMount(t, name, mnt, "--access-log", fifo, "--prefetch", "none", "--push-pages=false")
	const script = "find . -type f | sort | xargs cat | md5sum"
	testenv.Returns(t, "a cat of every file, logged to a pipe nobody reads", func() { sameOutput(t, mnt, src, script) })
	if n := m.metric(t, "chromafs_access_log_dropped_total"); n != 0 {
		t.Errorf("%d events dropped: the queue holds 1 MiB", n)
	}
	read := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); read <- b }() // until the mount's end of the pipe closes
	m.stop(t)                                        // what is queued reaches the pipe, now read, at exit
	b := <-read
	if reads := strings.Count(string(b), `"op":"read"`); reads < 600 || len(b) < 64<<10 {
		t.Errorf("the log holds %d read events in %d bytes once read: want one for each of the 600 files at least, past the pipe's 64 KiB", reads, len(b))
	}
}

// TestRuntimeErrorsTellTheTruth: exit 1 and one line that names the real
// problem: a missing source directory, a server that is not Chroma, a
// mount point holding one entry.
func TestRuntimeErrorsTellTheTruth(t *testing.T) {
	notChroma := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "<!DOCTYPE html><title>404</title>", http.StatusNotFound)
	}))
	defer notChroma.Close()
	busy := t.TempDir()
	must(t, os.WriteFile(filepath.Join(busy, "x"), nil, 0o644))
	for _, c := range []struct {
		bin  string
		args []string
		want string
	}{
		{"chromafs-ingest", []string{"--chroma-url", env.url, "--collection", "col", filepath.Join(busy, "missing")}, "does not exist"},
		{"chromafs-ingest", []string{"--chroma-url", notChroma.URL, "--collection", "col", busy}, "not a Chroma server"},
		{"chromafs-mount", []string{"--chroma-url", notChroma.URL, "--collection", "col", t.TempDir()}, "not a Chroma server"},
		{"chromafs-mount", []string{"--chroma-url", env.url, "--collection", "col", busy}, "(1 entry)"},
	} {
		args := c.args
		if c.bin == "chromafs-mount" {
			args = privateCache(t, args)
		}
		out, err := exec.Command(filepath.Join(env.bin, c.bin), args...).CombinedOutput()
		code := exitCode(t, err)
		line := strings.TrimSpace(string(out))
		if code != 1 || !strings.Contains(line, c.want) || strings.Contains(line, "\n") {
			t.Errorf("%s %s: exit %d %q; want exit 1 and one line saying %q", c.bin, strings.Join(c.args, " "), code, line, c.want)
		}
	}
}
