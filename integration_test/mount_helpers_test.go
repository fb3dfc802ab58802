package integration_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/harness"
	"github.com/chromafs/chromafs/internal/testenv"
)

// requireFUSE skips (fails under CI=true) when FUSE cannot be used here.
func requireFUSE(t *testing.T) {
	t.Helper()
	requireServer(t)
	missing := ""
	if _, err := os.Stat("/dev/fuse"); err != nil {
		missing = "/dev/fuse: " + err.Error()
	} else if _, err := exec.LookPath("fusermount3"); err != nil && os.Geteuid() != 0 {
		missing = "fusermount3 not installed (apt-get install fuse3)"
	}
	testenv.Require(t, missing == "", "no FUSE: %s", missing)
}

// mountDir makes parent/mnt, an empty mount point.
func mountDir(t *testing.T, parent string) string {
	t.Helper()
	mnt := filepath.Join(parent, "mnt")
	must(t, os.Mkdir(mnt, 0o755))
	return mnt
}

// mount is a running chromafs-mount in the foreground, as a child process
// (harness.Mount: its output in logs, safe to read while it runs). Its
// stop, called at the test's cleanup if not before, waits for the exit and
// fails the test on an exit code the test does not expect (0 unless
// expectExit says otherwise) or a DATA RACE report in the log.
type mount struct {
	*harness.Mount
	dir      string
	cmd      *exec.Cmd
	logs     *harness.Log
	metrics  string
	exited   chan error // receives the exit once (for tests that wait themselves)
	wantExit func(code int) bool
	stopped  bool
}

// startMount mounts collection at dir and waits until the mount answers.
func startMount(t *testing.T, collection, dir string, args ...string) *mount {
	t.Helper()
	return startMountEnv(t, nil, collection, dir, env.url, args...)
}

// startMountEnv is startMount with extra environment and another server URL.
func startMountEnv(t *testing.T, extraEnv []string, collection, dir, url string, args ...string) *mount {
	t.Helper()
	return startMountWith(t, filepath.Join(env.bin, "chromafs-mount"), extraEnv, collection, dir, url, args...)
}

// startMountPlain is startMountEnv with chromafs-mount built without -race,
// for tests that measure its memory.
func startMountPlain(t *testing.T, extraEnv []string, collection, dir, url string, args ...string) *mount {
	t.Helper()
	return startMountWith(t, filepath.Join(env.plainBin, "chromafs-mount"), extraEnv, collection, dir, url, args...)
}

// startMountBin mounts with another build of chromafs-mount (e.g. -race).
func startMountBin(t *testing.T, bin, collection, dir, url string, args ...string) *mount {
	t.Helper()
	return startMountWith(t, filepath.Join(bin, "chromafs-mount"), nil, collection, dir, url, args...)
}

func startMountWith(t *testing.T, binary string, extraEnv []string, collection, dir, url string, args ...string) *mount {
	t.Helper()
	full := append([]string{"--chroma-url", url, "--collection", collection}, privateCache(t, args)...)
	hm, err := harness.StartMount(binary, extraEnv, full, dir, 60*time.Second)
	must(t, err)
	m := &mount{Mount: hm, dir: hm.Dir, cmd: hm.Cmd, logs: hm.Logs, metrics: hm.Metrics, exited: hm.Exited}
	t.Cleanup(func() { m.stop(t) })
	return m
}

// expectExit says which exit codes of the mount the test expects (a
// signal's death is -1); stop then reports no other.
func (m *mount) expectExit(codes ...int) {
	m.wantExit = func(code int) bool { return slices.Contains(codes, code) }
}

// stop sends SIGTERM and waits for the exit; as a last resort it kills the
// process and detaches the mount so no test leaves one behind. An exit
// other than 0 (or what expectExit allows), or a DATA RACE report in the
// log, fails the test; each is reported once, however often stop is
// called.
func (m *mount) stop(t *testing.T) {
	t.Helper()
	err := m.Stop(15 * time.Second)
	if m.stopped {
		return
	}
	m.stopped = true
	for _, p := range exitProblems(err, m.logs.String(), m.wantExit) {
		t.Errorf("%s:\n%s", p, m.logs)
	}
}

// exitProblems judges a mount's end: its exit error (from harness's Stop),
// its whole log, and the exit codes the test expects (nil: 0 only).
func exitProblems(err error, logs string, wantExit func(code int) bool) []string {
	var out []string
	code := harness.ExitCode(err)
	switch {
	case errors.Is(err, harness.ErrStillRunning):
		out = append(out, "chromafs-mount did not exit 15s after SIGTERM (killed)")
	case wantExit != nil && !wantExit(code):
		out = append(out, fmt.Sprintf("chromafs-mount exited with code %d (%v), not one the test expects", code, err))
	case wantExit == nil && err != nil:
		out = append(out, fmt.Sprintf("chromafs-mount exited with %v (code %d), want 0 (66: the race detector)", err, code))
	}
	if strings.Contains(logs, "DATA RACE") {
		out = append(out, "the race detector fired in chromafs-mount")
	}
	return out
}

// metric returns the mount's counter or gauge name (e.g.
// chromafs_chroma_requests_total); a failed scrape fails the test.
func (m *mount) metric(t *testing.T, name string) int64 {
	t.Helper()
	v, err := m.Metric(name)
	must(t, err)
	return v
}

// waitMetric waits up to 30 s until the mount's metric name reaches want.
func waitMetric(t *testing.T, m *mount, name string, want int64) {
	t.Helper()
	got := int64(0)
	waitFor(t, 30*time.Second, func() bool { got = m.metric(t, name); return got >= want },
		func() string { return fmt.Sprintf("%s = %d, want %d\n%s", name, got, want, m.logs) })
}

func isMounted(dir string) bool { return harness.Mounted(dir) }

// must fails the test at once on an error.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// waitFor polls cond (every 20 ms) until it holds, for at most timeout;
// then it fails the test with what says (called once, at the failure).
func waitFor(t *testing.T, timeout time.Duration, cond func() bool, what func() string) {
	t.Helper()
	if err := harness.Poll(timeout, 20*time.Millisecond, cond); err != nil {
		t.Fatalf("%s after %s", what(), timeout)
	}
}

// eachFile calls fn with every file of src and the same file on the mount
// (a file missing there is an error).
func eachFile(t *testing.T, mnt, src string, fn func(rel string, got, want []byte)) {
	t.Helper()
	must(t, harness.EachFile(mnt, src, func(rel string, got, want []byte, readErr error) {
		if readErr != nil {
			t.Errorf("%s: %v", rel, readErr)
			return
		}
		fn(rel, got, want)
	}))
}

// sourcePages lists the pages of a generated corpus, sorted.
func sourcePages(t *testing.T, src string) []string {
	t.Helper()
	pages, err := harness.Pages(src)
	must(t, err)
	return pages
}

// sh runs a bash script in dir with a fixed locale; it returns stdout and
// the exit code (stderr is folded in when combined is set).
func sh(t *testing.T, dir, script string, combined bool) (string, int) {
	t.Helper()
	cmd := exec.Command("bash", "-o", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C.UTF-8", "TZ=UTC")
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	if combined {
		cmd.Stderr = &out
	}
	err := cmd.Run()
	code := exitCode(t, err)
	return out.String(), code
}

// sameOutput runs script on the mount and on the local copy and requires
// identical output and exit codes.
func sameOutput(t *testing.T, mnt, local, script string) {
	t.Helper()
	got, gotCode := sh(t, mnt, script, false)
	want, wantCode := sh(t, local, script, false)
	if gotCode != wantCode {
		t.Errorf("%s: exit %d on the mount, %d on local disk", script, gotCode, wantCode)
	}
	if got != want {
		t.Errorf("%s: output differs (%d vs %d bytes): %s", script, len(got), len(want), firstDiff(got, want))
	}
	if strings.TrimSpace(want) == "" {
		t.Errorf("%s: empty output on local disk; the comparison proves nothing", script)
	}
}

func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) && i < len(bl); i++ {
		if al[i] != bl[i] {
			return fmt.Sprintf("line %d:\n  mount: %q\n  local: %q", i+1, al[i], bl[i])
		}
	}
	return fmt.Sprintf("one output is a prefix of the other (%d vs %d lines)", len(al), len(bl))
}

// fromKernelCache tells whether reads reaching the daemon are the few a
// page cache that answers leaves: one, or at most 5% of control, the same
// reading where the kernel held nothing. Not 0: the kernel may reclaim a
// cached page at any moment (these machines run DAMON pageout, which
// reclaims a page just read when it lies in a long cold region), and that
// page's next read reaches the daemon; a cache that does not answer leaves
// all of them. control must be well above 1 for the check to mean anything.
func fromKernelCache(reads, control int64) bool {
	return reads <= 1 || reads*20 <= control
}

// readOnlyTree makes a local tree's modes match the mount's (files 0444,
// directories 0555) and restores write access at cleanup.
func readOnlyTree(t *testing.T, dir string) {
	t.Helper()
	must(t, filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if info.IsDir() {
			return os.Chmod(p, 0o555)
		}
		return os.Chmod(p, 0o444)
	}))
	t.Cleanup(func() { _ = exec.Command("chmod", "-R", "u+w", dir).Run() })
}

func copyFile(t *testing.T, dst string, r io.Reader) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	f, err := os.Create(dst)
	must(t, err)
	_, err = io.Copy(f, r)
	must(t, err)
	must(t, f.Close())
}

// privateCache gives a mount its own empty host cache, unless the test
// chose one: a test sees only the cache state it made.
func privateCache(t *testing.T, args []string) []string {
	for _, a := range args {
		if strings.HasPrefix(a, "--cache-dir") || strings.HasPrefix(a, "--disk-cache-size") {
			return args
		}
	}
	return append([]string{"--cache-dir", t.TempDir()}, args...)
}
