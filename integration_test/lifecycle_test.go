package integration_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/proc"
)

// mountCmd runs chromafs-mount to completion (for --daemon and refusals).
func mountCmd(t *testing.T, args ...string) (string, int, time.Duration) {
	t.Helper()
	start := time.Now()
	cmd := exec.Command(filepath.Join(env.bin, "chromafs-mount"), privateCache(t, args)...)
	out, err := cmd.CombinedOutput()
	code := exitCode(t, err)
	return string(out), code, time.Since(start)
}

// daemonPid finds the chromafs-mount process serving dir.
func daemonPid(t *testing.T, dir string) int {
	t.Helper()
	pid, err := proc.MountDaemon(dir)
	must(t, err)
	return pid
}

func TestMountRefusesToStart(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, _ := ingestCorpus(t, parent, corpus.Spec{Files: 5, Seed: 9})
	empty := filepath.Join(parent, "empty")
	must(t, os.Mkdir(empty, 0o755))
	full := filepath.Join(parent, "src")
	file := filepath.Join(full, "guides/page-0000.mdx")
	port, err := freePort()
	must(t, err)
	openToken := filepath.Join(parent, "token")
	must(t, os.WriteFile(openToken, []byte("tok\n"), 0o644))

	noTree := collectionName(t) + "-notree"
	st, err := chroma.OpenOrCreate(t.Context(), conn(t, noTree), nil)
	must(t, err)
	badTree := collectionName(t) + "-badtree"
	st2, err := chroma.OpenOrCreate(t.Context(), conn(t, badTree), nil)
	must(t, err)
	must(t, st2.Upsert(t.Context(), []chroma.Record{{ID: chroma.TreeID, Text: "H4sIAAAA-not-gzip", Metadata: newMeta(map[string]any{"x": 1})}}))
	st.Close()
	st2.Close()

	tests := []struct {
		name string
		args []string
		want string
		code int // 1 a runtime error, 2 a usage error (--help's "Exit status")
	}{
		{"unreachable", []string{"--chroma-url", fmt.Sprintf("http://127.0.0.1:%d", port), "--collection", name, empty}, "unreachable", 1},
		{"no collection", []string{"--chroma-url", env.url, "--collection", "missing-collection", empty}, "not found", 1},
		{"no tree", []string{"--chroma-url", env.url, "--collection", noTree, empty}, "no path tree", 1},
		{"invalid tree", []string{"--chroma-url", env.url, "--collection", badTree, empty}, "invalid path tree", 1},
		{"not empty", []string{"--chroma-url", env.url, "--collection", name, full}, "not empty", 1},
		{"not a directory", []string{"--chroma-url", env.url, "--collection", name, file}, "not a directory", 1},
		{"missing mountpoint", []string{"--chroma-url", env.url, "--collection", name, filepath.Join(parent, "nope")}, "no such file", 1},
		{"bad cache size", []string{"--chroma-url", env.url, "--collection", name, "--cache-size", "lots", empty}, "cache-size", 2},
		{"token in -o", []string{"--chroma-url", env.url, "-o", "collection=" + name + ",token=abc", empty}, "never taken from the command line", 2},
		{"open token file", []string{"--chroma-url", env.url, "--collection", name, "--token-file", openToken, empty}, "must not be readable", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, daemon := range []bool{false, true} {
				args := tc.args
				if daemon {
					args = append([]string{"--daemon"}, args...)
				}
				out, code, took := mountCmd(t, args...)
				if code != tc.code || !strings.Contains(out, tc.want) || strings.Count(strings.TrimSpace(out), "\n") > 0 {
					t.Errorf("daemon=%v: exit %d, output %q; want exit %d and one line with %q", daemon, code, out, tc.code, tc.want)
				}
				if took > 15*time.Second {
					t.Errorf("daemon=%v: took %s", daemon, took)
				}
				if isMounted(empty) {
					t.Fatalf("a mount was left behind")
				}
			}
		})
	}
}

func TestDaemonAndStaleMount(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 30, Seed: 10})
	mnt := mountDir(t, parent)
	args := []string{"--chroma-url", env.url, "--collection", name, "--daemon", mnt}
	out, code, took := mountCmd(t, args...)
	if code != 0 {
		t.Fatalf("--daemon: exit %d: %s", code, out)
	}
	t.Cleanup(func() { _ = exec.Command("fusermount3", "-u", "-z", mnt).Run() })
	fmt.Printf("BENCH mount-ready (30 files, --daemon until exit): %s\n", took)
	// --daemon returned: the mount must answer now, without waiting.
	if got, code := sh(t, mnt, "ls guides | wc -l", false); code != 0 || strings.TrimSpace(got) != "10" {
		t.Fatalf("ls right after --daemon returned: %q exit %d", got, code)
	}
	// the root listed and stat'ed: after the crash the kernel answers
	// these from its caches, so a probe must ask something else
	if _, code := sh(t, mnt, "ls -la . && ls -lR . && stat .", false); code != 0 {
		t.Fatal("listing the root failed")
	}
	must(t, syscall.Kill(daemonPid(t, mnt), syscall.SIGKILL))
	waitGone(t, mnt)
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); !errors.Is(err, syscall.ENOTCONN) {
		t.Fatalf("statfs of the dead mount: %v, want ENOTCONN", err)
	}
	out, code, _ = mountCmd(t, args...)
	if code != 0 {
		t.Fatalf("mount over a stale mount: exit %d: %s", code, out)
	}
	sameOutput(t, mnt, src, "find . -type f -print0 | sort -z | xargs -0 md5sum")
	pid := daemonPid(t, mnt)
	// the serving process is chromafs-mount-serve's, named as the command
	// where ps -e, pgrep -x and killall read it
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || string(comm) != "chromafs-mount\n" {
		t.Errorf("the serving process is named %q (%v), want chromafs-mount", comm, err)
	}
	if out, code := sh(t, parent, "fusermount3 -u mnt", true); code != 0 {
		t.Fatalf("fusermount3 -u: %s", out)
	}
	if isMounted(mnt) {
		t.Error("still mounted after fusermount3 -u")
	}
	waitExit(t, pid) // it writes what it fetched to its cache dir on the way out
}

// waitExit waits until process pid has exited.
func waitExit(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("chromafs-mount (pid %d) still running 15 s after its unmount", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitGone waits until the process serving dir has died.
//
// Dead is ENOTCONN: a statfs the server had read when it died may end
// with EIO instead, and the next one is ENOTCONN.
func waitGone(t *testing.T, dir string) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var st syscall.Statfs_t // never answered from the kernel's caches
		if err := syscall.Statfs(dir, &st); errors.Is(err, syscall.ENOTCONN) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestBusyUnmountReported: SIGTERM and SIGINT alike unmount a mount that
// a process holds busy: reported, retried for 2 s, then detached lazily,
// and the process exits 0 instead of hanging.
func TestBusyUnmountReported(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, _ := ingestCorpus(t, parent, corpus.Spec{Files: 5, Seed: 11})
	mnt := mountDir(t, parent)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			m := startMount(t, name, mnt)
			busy := exec.Command("sleep", "60")
			busy.Dir = filepath.Join(mnt, "guides")
			must(t, busy.Start())
			defer busy.Process.Kill()
			start := time.Now()
			must(t, m.cmd.Process.Signal(sig))
			select {
			case err := <-m.exited:
				if err != nil {
					t.Errorf("exit: %v", err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("hung on a busy mount")
			}
			logs := m.logs.String()
			for _, want := range []string{"signal=" + sig.String(), "mount busy: close files and leave the directory", "still busy; detaching lazily"} {
				if !strings.Contains(logs, want) {
					t.Errorf("the log lacks %q:\n%s", want, logs)
				}
			}
			// retried: ten unmounts 200 ms apart before the lazy detach
			if took := time.Since(start); took < 2*time.Second {
				t.Errorf("detached lazily after %s, want after 2 s of retries", took)
			}
			if isMounted(mnt) {
				t.Error("busy mount left mounted")
			}
			fmt.Printf("BENCH busy unmount (%s) handled in %s\n", sig, time.Since(start))
		})
	}
}

func TestServerDownDuringSession(t *testing.T) {
	requireFUSE(t)
	if env.script == "" {
		serverCtl(t, "stop") // skips
	}
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 40, Seed: 12})
	mnt := mountDir(t, parent)
	startMount(t, name, mnt, "--prefetch", "none", "--timeout", "2s")
	if _, code := sh(t, mnt, "cat guides/page-0000.mdx > /dev/null", false); code != 0 {
		t.Fatal("cat before the outage failed")
	}
	serverCtl(t, "stop")
	restarted := false
	defer func() {
		if !restarted {
			serverCtl(t, "start")
		}
	}()
	for _, s := range []string{"ls -lR . | wc -l", "find . -type f | wc -l", "stat -c %s guides/page-0001.md", "md5sum <guides/page-0000.mdx"} {
		out, code := sh(t, mnt, s, true)
		if want, _ := sh(t, src, s, true); code != 0 || out != want {
			t.Errorf("%s while the server is down: exit %d, %q; the local copy %q", s, code, out, want)
		}
	}
	start := time.Now()
	out, code := sh(t, mnt, "cat guides/page-0002.mdx", true)
	took := time.Since(start)
	if code == 0 || !strings.Contains(out, "Input/output error") {
		t.Errorf("uncached read with the server down: exit %d %q; want EIO", code, out)
	}
	if took > 3*2*time.Second+500*time.Millisecond+time.Second { // as in TestFaults
		t.Errorf("EIO took %s; want within 3 x 2s + 0.5s of backoff (+1s of slack)", took)
	}
	fmt.Printf("BENCH time to EIO with the server down (connection refused): %s\n", took)
	serverCtl(t, "start")
	restarted = true
	waitRecovered(t, mnt, "guides/page-0002.mdx") // the first read must already work: TestServerRestartFirstRead
	sameOutput(t, mnt, src, "cat guides/page-0002.mdx guides/page-0003.mdx")
}
