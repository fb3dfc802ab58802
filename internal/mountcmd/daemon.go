package mountcmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

// daemonEnv marks the re-executed child of --daemon; its value is the file
// descriptor on which the child reports readiness.
const daemonEnv = "CHROMAFS_DAEMON_FD"

// startDaemon re-executes the command in a new session and waits until the
// child reports the mount ready (exit 0) or failed (exit 1), then checks the
// mount answers. The parent is not the serving process, so it may stat it.
func startDaemon(o *options, args []string) int {
	r, w, err := os.Pipe()
	if err != nil {
		fmt.Fprintf(os.Stderr, "chromafs-mount: %v\n", err)
		return 1
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "chromafs-mount: %v\n", err)
		return 1
	}
	cmd := exec.Command(self, args...) // the translated arguments of a mount helper too
	// called by its name, not as a helper: a binary that is several
	// commands (chromafsd's, in its image) runs this one again
	cmd.Args[0] = Name
	cmd.Env = append(withoutEnv(os.Environ(), connEnv), daemonEnv+"=3")
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	h := newHandOff(firstHop(o.conn.URL, http.ProxyFromEnvironment))
	if h != nil {
		cmd.ExtraFiles = append(cmd.ExtraFiles, h.child)
		cmd.Env = append(cmd.Env, fmt.Sprintf("%s=%d", connEnv, 2+len(cmd.ExtraFiles)))
		go h.send(context.Background()) // while the child starts
	}
	err = cmd.Start()
	h.started()
	if err != nil {
		fmt.Fprintf(os.Stderr, "chromafs-mount: start daemon: %v\n", err)
		return 1
	}
	w.Close()
	msg, _ := bufio.NewReader(r).ReadString('\n')
	msg = strings.TrimSpace(msg)
	if msg != "ok" {
		if msg == "" {
			msg = "daemon exited before the mount was ready"
			_ = cmd.Wait()
		}
		fmt.Fprintf(os.Stderr, "chromafs-mount: %s\n", msg)
		return 1
	}
	if err := waitAnswers(o.mountpoint, 10*time.Second); err != nil {
		fmt.Fprintf(os.Stderr, "chromafs-mount: %v\n", err)
		return 1
	}
	_ = cmd.Process.Release()
	return 0
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

// readyNotifier returns how a daemon child reports its state to the
// parent; in the foreground it does nothing. The child's stdio is detached
// once ready.
func readyNotifier() func(error) {
	if os.Getenv(daemonEnv) == "" {
		return func(error) {}
	}
	pipe := os.NewFile(3, "ready")
	done := false
	return func(err error) {
		if done || pipe == nil {
			return
		}
		done = true
		if err != nil {
			fmt.Fprintf(pipe, "%s\n", strings.ReplaceAll(err.Error(), "\n", " "))
		} else {
			fmt.Fprintln(pipe, "ok")
			detachStdio()
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

func execQuiet(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return errors.New(strings.TrimSpace(string(out)))
	}
	return nil
}

// withoutEnv is env without the variable name (name=...).
func withoutEnv(env []string, name string) []string {
	return slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
}
