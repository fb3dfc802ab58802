package integration_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/proc"
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
	if missing == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("no FUSE (CI=true makes this a failure): %s", missing)
	}
	t.Skipf("SKIPPED: no FUSE: %s", missing)
}

// mountDir makes parent/mnt, an empty mount point.
func mountDir(t *testing.T, parent string) string {
	t.Helper()
	mnt := filepath.Join(parent, "mnt")
	must(t, os.Mkdir(mnt, 0o755))
	return mnt
}

// mount is a running chromafs-mount in the foreground, as a child process.
type mount struct {
	dir     string
	cmd     *exec.Cmd
	logs    *bytes.Buffer
	metrics string
	exited  chan error
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

// startMountBin mounts with another build of chromafs-mount (e.g. -race).
func startMountBin(t *testing.T, bin, collection, dir, url string, args ...string) *mount {
	t.Helper()
	return startMountWith(t, filepath.Join(bin, "chromafs-mount"), nil, collection, dir, url, args...)
}

func startMountWith(t *testing.T, binary string, extraEnv []string, collection, dir, url string, args ...string) *mount {
	t.Helper()
	port, err := freePort()
	must(t, err)
	m := &mount{dir: dir, logs: &bytes.Buffer{}, metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", port), exited: make(chan error, 1)}
	full := append([]string{"--chroma-url", url, "--collection", collection, "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", port)}, privateCache(t, args)...)
	m.cmd = exec.Command(binary, append(full, dir)...)
	m.cmd.Stdout, m.cmd.Stderr = m.logs, m.logs
	m.cmd.Env = append(os.Environ(), extraEnv...)
	must(t, m.cmd.Start())
	go func() { m.exited <- m.cmd.Wait() }()
	t.Cleanup(func() { m.stop(t) })
	deadline := time.Now().Add(60 * time.Second)
	for !isMounted(dir) {
		select {
		case err := <-m.exited:
			m.exited <- err
			t.Fatalf("chromafs-mount exited (%v) before mounting:\n%s", err, m.logs)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("mount at %s not ready after 60s:\n%s", dir, m.logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return m
}

// stop sends SIGTERM and waits for a clean exit; as a last resort it
// detaches the mount so no test leaves one behind.
func (m *mount) stop(t *testing.T) {
	if m.cmd.ProcessState == nil {
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.exited:
		case <-time.After(15 * time.Second):
			t.Errorf("chromafs-mount did not exit 15s after SIGTERM")
			_ = m.cmd.Process.Kill()
		}
	}
	if isMounted(m.dir) {
		_ = exec.Command("fusermount3", "-u", "-z", m.dir).Run()
	}
}

// requests returns chromafs_chroma_requests_total, or another metric.
func (m *mount) metric(t *testing.T, name string) int64 {
	t.Helper()
	resp, err := http.Get(m.metrics)
	must(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == name {
			v, err := strconv.ParseFloat(f[1], 64)
			must(t, err)
			return int64(v)
		}
	}
	t.Fatalf("metric %s not found", name)
	return 0
}

func isMounted(dir string) bool {
	_, ok := proc.MountedAt(dir)
	return ok
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
