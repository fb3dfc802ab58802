package mountcmd

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
	"time"

	"github.com/chromafs/chromafs/internal/pidfile"
	"github.com/chromafs/chromafs/internal/proc"
)

// control signals the process serving the mount at o.mountpoint:
// --reload sends SIGHUP (check the collection now), --unmount SIGTERM and
// waits until it has unmounted and exited. The process is found by its
// record (package pidfile), checked against the mount and process tables,
// so nothing else is ever signalled.
func control(o *options) int {
	mp := o.mountpoint
	r, err := pidfile.Find(pidfile.RuntimeDir(o.cacheDir), mp)
	if err != nil {
		hint := ""
		if errors.Is(err, pidfile.ErrNoRecord) || errors.Is(err, pidfile.ErrStale) {
			hint = "; unmount it with: fusermount3 -u " + mp
		}
		fmt.Fprintf(os.Stderr, "chromafs-mount: %v%s\n", err, hint)
		return 1
	}
	sig, what := syscall.SIGHUP, "reload"
	if o.unmount {
		sig, what = syscall.SIGTERM, "unmount"
	}
	if err := syscall.Kill(r.PID, sig); err != nil {
		fmt.Fprintf(os.Stderr, "chromafs-mount: %s %s: signal pid %d: %v\n", what, mp, r.PID, err)
		return 1
	}
	if !o.unmount {
		fmt.Fprintf(os.Stderr, "chromafs-mount: asked pid %d to check the collection of %s now\n", r.PID, mp)
		return 0
	}
	// the process retries a busy mount for 2 s, then detaches it lazily
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if st, err := proc.StartTime(r.PID); err != nil || st != r.Start {
			return 0
		}
		time.Sleep(20 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "chromafs-mount: pid %d serving %s has not exited after 10s (see its log)\n", r.PID, mp)
	return 1
}

// announce records this process as the one serving mp (for --reload and
// --unmount) and writes --pid-file; the returned function undoes both.
func announce(log *slog.Logger, o *options, mp string) func() {
	unregister, err := pidfile.Register(pidfile.RuntimeDir(o.cacheDir), mp)
	if err != nil {
		log.Warn("chromafs-mount --reload/--unmount will not find this mount", "err", err)
	}
	pid := os.Getpid()
	if o.pidFile != "" {
		if err := pidfile.Write(o.pidFile, pid); err != nil {
			log.Warn("--pid-file not written", "err", err)
		}
	}
	return func() {
		unregister()
		if o.pidFile != "" {
			pidfile.Remove(o.pidFile, pid)
		}
	}
}
