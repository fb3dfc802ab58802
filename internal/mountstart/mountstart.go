// Package mountstart starts chromafs-mount: it is the small launcher
// cmd/chromafs-mount builds, and the start of a --daemon mount, which both
// that launcher and the command itself run (cmd/chromafs-mount-serve; in
// chromafsd's image, chromafsd's binary called by that name).
//
// Why a launcher. A cold --daemon mount's critical path is the command's
// own start, then its round trips to Chroma (a connection's handshakes,
// the collection, the tree). The command links chroma-go, whose package
// initialisation (regular expressions compiled when it is loaded) and
// size make a process of it reach main in about 8 ms; a program of this
// package alone reaches it in about 2. So chromafs-mount is this package
// (Launch): it reads from its arguments only whether they ask for a
// --daemon mount and which Chroma URL they name, dials that URL at once,
// and starts the command beside it as the mount's serving process, which
// takes the connection (handoff.go). Anything else (a foreground mount, a
// mount helper's call, --help, arguments it does not read for certain) it
// hands to the command by exec, unchanged: same process, same arguments.
//
// Reading wrong costs only speed. The serving process parses its
// arguments itself, refuses to serve a --daemon mount it was not asked
// for, and adopts the connection only for the address the parent says it
// dialed; a usage error it finds, it reports to the launcher, which says
// it and exits with status 2 as the command would have.
//
// Between a --daemon parent and its child: the child's environment names
// a pipe (DaemonEnv) on which it writes one line, "ok" and its mount point
// (quoted) once the mount is made, or the exit status and error that
// stopped it; and, when the parent dialed, a socket pair (ConnEnv)
// carrying the connection. The child's stdio is /dev/null: the parent
// says what it reports.
package mountstart

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Name is the command's name: the launcher's, and the serving process's
// argv[0] (ps, and the records that find a mount's process, show it).
const Name = "chromafs-mount"

// DaemonEnv marks the serving process of a --daemon mount. Its value is
// 3, the file descriptor of the pipe on which the process reports
// readiness (the first of exec's extra files).
const DaemonEnv = "CHROMAFS_DAEMON_FD"

// Start starts the command at self with args as the serving process of a
// --daemon mount, in a new session, dialing the Chroma server at
// chromaURL meanwhile to hand it the connection; it waits until the
// process reports the mount made (then checks the mount answers) or
// failed, and returns the exit status for the caller: 0 once the mount
// answers, else the one the process reported (1 when it said none) with
// its error on stderr.
// The caller is not the serving process, so it may stat the mount.
func Start(self string, args []string, chromaURL string) int {
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", Name, err)
		return 1
	}
	defer r.Close()
	cmd := exec.Command(self, args...)
	// called by its name, not as a helper: a binary that is several
	// commands (chromafsd's, in its image) runs this one again
	cmd.Args[0] = Name
	cmd.Env = append(withoutEnv(os.Environ(), ConnEnv), DaemonEnv+"=3")
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	h := newHandOff(FirstHop(chromaURL))
	if h != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, h.child)
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", ConnEnv, 2+len(cmd.ExtraFiles)))
		go h.send(context.Background()) // while the child starts
	}
	err = cmd.Start()
	h.started()
	w.Close()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: start daemon: %v\n", Name, err)
		return 1
	}
	line, _ := bufio.NewReader(r).ReadString('\n')
	mp, status, err := readReady(line)
	if err != nil {
		if errors.Is(err, errNoWord) {
			err = exited(cmd, 10*time.Second)
		}
		fmt.Fprintf(os.Stderr, "%s: %v\n", Name, err)
		return status
	}
	if err := waitAnswers(mp, 10*time.Second); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", Name, err)
		return 1
	}
	_ = cmd.Process.Release()
	return 0
}

// exited says how a child that closed its pipe without a word ended; one
// that is still running after limit (it closed the pipe and went on) is
// left to itself.
func exited(cmd *exec.Cmd, limit time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return fmt.Errorf("daemon exited before the mount was ready (%v)", cmd.ProcessState)
	case <-time.After(limit):
		return fmt.Errorf("daemon (pid %d) closed its pipe without a word and still runs", cmd.Process.Pid)
	}
}

// ExitError is a failure with the exit status the command gives it (2: a
// usage error); a serving process reports it to its parent, which exits
// with that status.
type ExitError struct {
	Status int
	Err    error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// errNoWord is a child's ready pipe closed without a line.
var errNoWord = errors.New("no word from the daemon")

// readReady reads the child's line: the mount point it made (absolute),
// or the error it reported with its exit status ("STATUS TEXT"; a line
// without one is status 1), or errNoWord.
func readReady(line string) (mp string, status int, err error) {
	line = strings.TrimSuffix(line, "\n")
	switch {
	case line == "":
		return "", 1, errNoWord
	case line == "ok" || strings.HasPrefix(line, "ok "):
		mp, err := strconv.Unquote(strings.TrimPrefix(line, "ok "))
		if err != nil || !strings.HasPrefix(mp, "/") {
			return "", 1, fmt.Errorf("the daemon's word is not a mount point: %q", line)
		}
		return mp, 0, nil
	}
	code, text, ok := strings.Cut(line, " ")
	if n, err := strconv.Atoi(code); ok && err == nil && n > 0 && n < 126 {
		return "", n, errors.New(text)
	}
	return "", 1, errors.New(line)
}

// waitAnswers stats the mount root until it answers.
func waitAnswers(mp string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		_, err := os.Stat(mp)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mount at %s does not answer: %w", mp, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Notifier returns how the serving process of a --daemon mount at
// mountpoint reports its state to its parent: once, nil when the mount is
// made, else the error that stopped it (an *ExitError says its exit
// status; others are 1). In the foreground it does nothing.
// The process's stdio is detached once it reports the mount made.
func Notifier(mountpoint string) func(error) {
	if os.Getenv(DaemonEnv) == "" {
		return func(error) {}
	}
	syscall.CloseOnExec(3) // not for what this process runs (fusermount3): the parent waits for its end
	return notifier(os.NewFile(3, "ready"), mountpoint, detachStdio)
}

// notifier is Notifier's report on pipe; detach runs once the mount is
// said to be made.
func notifier(pipe *os.File, mountpoint string, detach func()) func(error) {
	done := false
	return func(err error) {
		if done || pipe == nil {
			return
		}
		done = true
		if err != nil {
			status := 1
			if ee := (*ExitError)(nil); errors.As(err, &ee) {
				status = ee.Status
			}
			fmt.Fprintf(pipe, "%d %s\n", status, strings.ReplaceAll(err.Error(), "\n", " "))
		} else {
			fmt.Fprintf(pipe, "ok %s\n", strconv.Quote(mountpoint))
			detach()
		}
		pipe.Close()
	}
}

// detachStdio points stdin, stdout and stderr at /dev/null so the daemon
// does not hold the caller's terminal or pipes open.
func detachStdio() {
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		return
	}
	for _, fd := range []int{0, 1, 2} {
		_ = syscall.Dup2(int(null.Fd()), fd)
	}
}

// withoutEnv is env without the variable name (name=...).
func withoutEnv(env []string, name string) []string {
	return slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}
