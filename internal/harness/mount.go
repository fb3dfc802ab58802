package harness

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chromafs/chromafs/internal/proc"
)

// ErrStillRunning is what Mount.Stop returns when the process outlived
// its grace period (it was then killed).
var ErrStillRunning = errors.New("still running after SIGTERM")

// Mount is a chromafs-mount running in the foreground as a child process,
// its output (stdout and stderr) kept in Logs.
type Mount struct {
	Dir     string
	Cmd     *exec.Cmd
	Logs    *Log
	Metrics string // the URL of its /metrics
	// Exited receives the result of Wait once, for callers that wait for
	// the exit themselves; Done and Err do not depend on it.
	Exited chan error
	done   chan struct{}
	err    error // Wait's result, set before done is closed
}

// StartMount runs binary (a chromafs-mount) with args, a --metrics-addr on
// a free port and dir as its mount point, with extraEnv added to the
// environment, and waits up to ready until dir is mounted. When it is not
// mounted by then, or the process exits first, the process is stopped and
// the error holds its output.
func StartMount(binary string, extraEnv, args []string, dir string, ready time.Duration) (*Mount, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	m := &Mount{Dir: dir, Logs: &Log{}, Metrics: "http://" + addr + "/metrics", Exited: make(chan error, 1), done: make(chan struct{})}
	m.Cmd = exec.Command(binary, append(append([]string{"--metrics-addr", addr}, args...), dir)...)
	m.Cmd.Stdout, m.Cmd.Stderr = m.Logs, m.Logs
	m.Cmd.Env = append(os.Environ(), extraEnv...)
	if err := m.Cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", binary, err)
	}
	go func() {
		err := m.Cmd.Wait()
		m.err = err
		close(m.done)
		m.Exited <- err
	}()
	// Ready is the log's "mounted" line, not only the mount table: go-fuse
	// opens a name in its new mount as it finishes mounting (its poll
	// hack), and a process killed in the middle of that cannot exit until
	// its connection is aborted (a thread waits for itself in the kernel).
	// A mount that logs to a file is ready once it is in the mount table.
	logsHere := !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--log-file") })
	isReady := func() bool {
		return Mounted(dir) && (!logsHere || strings.Contains(m.Logs.String(), "msg=mounted"))
	}
	_ = Poll(ready, 5*time.Millisecond, func() bool { return isReady() || m.exited() })
	switch {
	case isReady():
		return m, nil
	case m.exited():
		return nil, fmt.Errorf("chromafs-mount exited (%v) before mounting:\n%s", m.Err(), m.Logs)
	}
	_ = m.Stop(5 * time.Second)
	return nil, fmt.Errorf("mount at %s not ready after %s:\n%s", dir, ready, m.Logs)
}

// Done is closed once the process has exited.
func (m *Mount) Done() <-chan struct{} { return m.done }

// Err is the process's exit error once Done is closed (nil: exit 0), nil
// before.
func (m *Mount) Err() error {
	if !m.exited() {
		return nil
	}
	return m.err
}

func (m *Mount) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM unless the process has exited, waits up to grace for
// it to exit (then kills it and returns ErrStillRunning), detaches the
// mount point if it is still mounted so that nothing is left behind, and
// returns the exit error. It may be called again: it returns the same.
func (m *Mount) Stop(grace time.Duration) error {
	var err error
	if !m.exited() {
		_ = m.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.done:
		case <-time.After(grace):
			_ = m.Cmd.Process.Kill()
			<-m.done
			err = ErrStillRunning
		}
	}
	if Mounted(m.Dir) {
		_ = exec.Command("fusermount3", "-u", "-z", m.Dir).Run()
	}
	if err != nil {
		return err
	}
	return m.err
}

// Metric scrapes the mount's /metrics for name.
func (m *Mount) Metric(name string) (int64, error) { return Metric(m.Metrics, name) }

// ExitCode is the exit code in err, an exit error of a process (0 for
// nil; -1 for a process killed by a signal or an error of another kind).
func ExitCode(err error) int {
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	return -1
}

// Mounted reports whether dir is a mount point.
func Mounted(dir string) bool {
	_, ok := proc.MountedAt(dir)
	return ok
}

// Daemon is a chromafs-mount started with --daemon: not a child of the
// caller, found by its mount point.
type Daemon struct {
	Dir     string
	Pid     int
	Metrics string // the URL of its /metrics
}

// StartDaemon runs binary (a chromafs-mount) with --daemon, args, a
// --metrics-addr on a free port and dir (created if missing) as its mount
// point, and returns the daemon and how long it took until `ls dir`
// answered (mount-ready, as a user sees it).
func StartDaemon(binary string, args []string, dir string) (*Daemon, time.Duration, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, 0, err
	}
	port, err := FreePort()
	if err != nil {
		return nil, 0, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	all := append(append([]string{"--daemon", "--metrics-addr", addr}, args...), dir)
	start := time.Now()
	if out, err := exec.Command(binary, all...).CombinedOutput(); err != nil {
		return nil, 0, fmt.Errorf("chromafs-mount --daemon: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if err := exec.Command("ls", dir).Run(); err != nil {
		return nil, 0, fmt.Errorf("ls of the new mount: %w", err)
	}
	ready := time.Since(start)
	d := &Daemon{Dir: dir, Metrics: "http://" + addr + "/metrics"}
	d.Pid, err = proc.MountDaemon(dir)
	return d, ready, err
}

// Unmount unmounts the daemon's mount point and waits up to 10 s for the
// daemon to exit.
func (d *Daemon) Unmount() error {
	out, err := exec.Command("fusermount3", "-u", d.Dir).CombinedOutput()
	if err != nil {
		err = fmt.Errorf("fusermount3 -u %s: %w: %s", d.Dir, err, strings.TrimSpace(string(out)))
	}
	if perr := Poll(10*time.Second, 10*time.Millisecond, func() bool { return !Alive(d.Pid) }); perr != nil {
		return errors.Join(err, fmt.Errorf("chromafs-mount (pid %d) still running 10 s after its unmount", d.Pid))
	}
	return err
}

// Metric scrapes the daemon's /metrics for name.
func (d *Daemon) Metric(name string) (int64, error) { return Metric(d.Metrics, name) }

// Alive reports whether process pid exists (a zombie counts).
func Alive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// Poll calls cond every interval until it returns true, for at most
// timeout (cond is called at least once, and once more at the end).
func Poll(timeout, interval time.Duration, cond func() bool) error {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			if cond() {
				return nil
			}
			return fmt.Errorf("not so after %s", timeout)
		}
		time.Sleep(interval)
	}
	return nil
}

// Abort ends the FUSE connection of the mount at dir through fusectl
// (root only): a server killed while it waited for its own mount can
// then exit, and the mount answers ENOTCONN until it is detached.
func Abort(dir string) error {
	m, ok := proc.MountAt(dir)
	if !ok {
		return fmt.Errorf("%s: not mounted", dir)
	}
	_, minor, ok := strings.Cut(m.Device, ":")
	if !ok {
		return fmt.Errorf("%s: device %q", dir, m.Device)
	}
	const fusectl = "/sys/fs/fuse/connections"
	if _, ok := proc.MountAt(fusectl); !ok {
		_ = syscall.Mount("fusectl", fusectl, "fusectl", 0, "")
	}
	return os.WriteFile(fusectl+"/"+minor+"/abort", []byte("1"), 0o200)
}
