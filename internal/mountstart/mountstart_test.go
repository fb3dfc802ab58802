package mountstart

import (
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/harness"
)

func TestReadReady(t *testing.T) {
	for _, c := range []struct {
		line, mp string
		status   int
		err      string
	}{
		{"ok \"/mnt/docs\"\n", "/mnt/docs", 0, ""},
		{"ok " + strconv.Quote("/mnt/a\nb") + "\n", "/mnt/a\nb", 0, ""},
		{"ok\n", "", 1, "not a mount point"}, // a mount not checked is no mount
		{"1 collection \"x\" not found\n", "", 1, "collection \"x\" not found"},
		{"2 --cache-size: want at least 1MiB\n", "", 2, "--cache-size: want at least 1MiB"},
		{"collection \"x\" not found\n", "", 1, "collection \"x\" not found"}, // no status: 1
		{"300 out of range\n", "", 1, "300 out of range"},
		{"ok relative\n", "", 1, "not a mount point"},
		{"ok \"relative\"\n", "", 1, "not a mount point"},
		{"", "", 1, errNoWord.Error()},
	} {
		mp, status, err := readReady(c.line)
		if mp != c.mp || status != c.status || (err == nil) != (c.err == "") || err != nil && err.Error() != c.err && !strings.Contains(err.Error(), c.err) {
			t.Errorf("readReady(%q) = %q, %d, %v; want %q, %d and an error with %q", c.line, mp, status, err, c.mp, c.status, c.err)
		}
	}
}

// TestStart runs Start with a shell for the serving process: what it
// writes on the ready pipe, or how it exits without a word, is the
// caller's status.
func TestStart(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, script string
		code         int
	}{
		{"mounted", fmt.Sprintf("printf 'ok %%s\\n' %q >&3", strconv.Quote(dir)), 0},
		{"failed", "echo '1 collection \"docs\" not found' >&3; exit 1", 1},
		{"a usage error", "echo '2 --cache-size: want at least 1MiB' >&3; exit 2", 2},
		{"killed before a word", "kill -9 $$", 1},
		{"exited 2 without a word (a crash)", "exit 2", 1},
		{"exited 0 without a word", "exit 0", 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Start("/bin/sh", []string{"-c", c.script}, ""); got != c.code {
				t.Errorf("Start = %d, want %d", got, c.code)
			}
		})
	}
}

// TestExitedBounded: a child that closed its pipe and goes on running
// does not hold its parent.
func TestExitedBounded(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill() //nolint:errcheck // exited's own Wait reaps it
	err := exited(cmd, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "still runs") {
		t.Fatalf("exited = %v, want the child said to run on", err)
	}
}

// TestLauncherIsSmall: the launcher links none of what makes the command
// slow to start (chroma-go, the command's packages): the reason it exists.
func TestLauncherIsSmall(t *testing.T) {
	cmd := exec.Command("go", "list", "-deps", "./cmd/chromafs-mount")
	cmd.Dir = harness.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/chromafs/chromafs/internal/mountstart") {
		t.Fatalf("go list -deps names no mountstart: %q", deps)
	}
	for _, d := range deps {
		if strings.Contains(d, "amikos-tech") || strings.HasPrefix(d, "github.com/chromafs/chromafs/") && !slices.Contains(launcherOwn, d) {
			t.Errorf("the launcher links %s", d)
		}
	}
}

// launcherOwn are the packages of this module the launcher may link.
var launcherOwn = []string{
	"github.com/chromafs/chromafs/cmd/chromafs-mount",
	"github.com/chromafs/chromafs/internal/mountstart",
	"github.com/chromafs/chromafs/internal/netdial",
}

// TestNotifier: what a daemon child says, as Start reads it: one line,
// once, with its status.
func TestNotifier(t *testing.T) {
	for _, c := range []struct {
		err    error
		mp     string
		status int
	}{
		{nil, "/mnt/my docs", 0},
		{errors.New("collection \"docs\" not found\nat all"), "", 1},
		{fmt.Errorf("parse: %w", &ExitError{Status: 2, Err: errors.New("--cache-size: want at least 1MiB")}), "", 2},
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		detached := 0
		ready := notifier(w, "/mnt/my docs", func() { detached++ })
		ready(c.err)
		ready(errors.New("a second word")) // not said
		line, _ := io.ReadAll(r)
		r.Close()
		mp, status, err := readReady(string(line))
		if mp != c.mp || status != c.status || (c.err == nil) != (err == nil) || strings.Count(string(line), "\n") != 1 {
			t.Errorf("%v: %q read as %q, %d, %v", c.err, line, mp, status, err)
		}
		if want := map[bool]int{true: 1}[c.err == nil]; detached != want {
			t.Errorf("%v: stdio detached %d times, want %d", c.err, detached, want)
		}
	}
}

// TestStartDials: with a Chroma URL, Start dials it while the child
// starts, and passes the child its end of the pair (ConnEnv) beside the
// ready pipe (DaemonEnv).
func TestStartDials(t *testing.T) {
	ln := listen(t)
	dir := t.TempDir()
	script := fmt.Sprintf(`test "$%s" = 3 -a "$%s" = 4 -a -S /dev/fd/4 || exit 1; printf 'ok %%s\n' %q >&3`, DaemonEnv, ConnEnv, strconv.Quote(dir))
	if got := Start("/bin/sh", []string{"-c", script}, "http://"+ln.Addr().String()); got != 0 {
		t.Fatalf("Start = %d: the child did not get the pipe and the pair", got)
	}
	waitAccepted(t, ln, 1)
	// without one, no pair
	script = fmt.Sprintf(`test -z "$%s" -a ! -e /dev/fd/4 || exit 1; printf 'ok %%s\n' %q >&3`, ConnEnv, strconv.Quote(dir))
	t.Setenv(ConnEnv, "4") // not passed on from the caller's environment
	if got := Start("/bin/sh", []string{"-c", script}, ""); got != 0 {
		t.Fatalf("Start = %d: the child got a pair without a URL", got)
	}
}

// TestLaunch builds the launcher beside a stand-in for the command (a
// script that says how it was run): a --daemon mount is started by the
// launcher (the stand-in is its child, with the ready pipe), and the
// status the child reports is the launcher's; anything else, and any call
// by a mount helper's name, is the command by exec (the same process);
// the environment passes either way; without the command beside it, the
// launcher says what is missing.
func TestLaunch(t *testing.T) {
	dir := t.TempDir()
	if err := harness.Build(harness.RepoRoot(), dir, false, "./cmd/chromafs-mount"); err != nil {
		t.Fatal(err)
	}
	launcher := filepath.Join(dir, Name)
	if f, err := elf.Open(launcher); err != nil {
		t.Fatal(err)
	} else {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("the launcher is linked dynamically (as harness.Build and scripts/lib.sh build it, it starts without the dynamic loader)")
			}
		}
		f.Close()
	}
	helper := filepath.Join(dir, "mount.chromafs")
	if err := os.Symlink(launcher, helper); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CHROMA_TOKEN", "tok-1")
	run := func(bin string, args ...string) (int, string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		return cmd.Process.Pid, out.String(), cmd.ProcessState.ExitCode()
	}
	if _, out, code := run(launcher, "--version"); code != 1 || !strings.Contains(out, ServeName+" is the command") {
		t.Errorf("without %s: exit %d, %q", ServeName, code, out)
	}
	mnt := t.TempDir()
	said := filepath.Join(dir, "said")
	// the stand-in says its parent, itself, the ready pipe, the token and
	// its arguments; as a daemon child it reports a bad --cache-size as the
	// command does, else the mount made
	script := fmt.Sprintf(`#!/bin/sh
echo "$PPID $$ ${%[1]s:-none} $CHROMA_TOKEN $*" > %[2]s
[ -n "$%[1]s" ] || exit 0
case "$*" in *--cache-size*) echo '2 --cache-size: want at least 1MiB' >&3; exit 2 ;; esac
printf 'ok %%s\n' %[3]q >&3
`, DaemonEnv, said, strconv.Quote(mnt))
	if err := os.WriteFile(filepath.Join(dir, ServeName), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		bin  string
		args []string
		code int
		out  string
		want string // %d: the launcher's pid; *: any
	}{
		{launcher, []string{"--daemon", "--collection", "docs", mnt}, 0, "", "%d * 3 tok-1 --daemon --collection docs " + mnt}, // its child
		{launcher, []string{"--daemon", "--cache-size", "1", mnt}, 2, Name + ": --cache-size: want at least 1MiB\n", "%d * 3 tok-1 --daemon --cache-size 1 " + mnt},
		{launcher, []string{"--collection", "docs", mnt}, 0, "", "* %d none tok-1 --collection docs " + mnt}, // itself
		{launcher, []string{"--daemon", "--help"}, 0, "", "* %d none tok-1 --daemon --help"},
		{helper, []string{"chromafs:docs", mnt, "-o", "daemon"}, 0, "", "* %d none tok-1 chromafs:docs " + mnt + " -o daemon"},
	} {
		os.Remove(said)
		pid, out, code := run(c.bin, c.args...)
		if code != c.code || out != c.out {
			t.Errorf("%s %q: exit %d, %q; want %d, %q", filepath.Base(c.bin), c.args, code, out, c.code, c.out)
		}
		b, _ := os.ReadFile(said)
		got, want := strings.Fields(string(b)), strings.Fields(fmt.Sprintf(c.want, pid))
		match := len(got) == len(want)
		for i := 0; match && i < len(want); i++ {
			match = want[i] == "*" || got[i] == want[i]
		}
		if !match {
			t.Errorf("%s %q: the command was run as %q, want %q", filepath.Base(c.bin), c.args, got, want)
		}
	}
}
