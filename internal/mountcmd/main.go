// Package mountcmd is the command chromafs-mount, which mounts a Chroma
// collection as a read-only file system (see --help):
// cmd/chromafs-mount-serve runs it (started by chromafs-mount, a small
// launcher: package mountstart), and so does chromafsd's binary when it is
// called by that name (one binary for chromafsd's image; see
// cmd/chromafsd).
package mountcmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/accesslog"
	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/fusefs"
	"github.com/chromafs/chromafs/hostcache"
	"github.com/chromafs/chromafs/internal/cli"
	"github.com/chromafs/chromafs/internal/mountstart"
	"github.com/chromafs/chromafs/internal/tiers"
	"github.com/chromafs/chromafs/redistier"
)

// version is the command's version, Main's.
var version = "dev"

// Name is the command's name: chromafsd's binary runs Main when it is
// called by it (or as a mount helper).
const Name = mountstart.Name

// CalledAs reports whether a binary called argv0 is this command: by its
// name, or as its mount helper.
func CalledAs(argv0 string) bool {
	return filepath.Base(argv0) == Name || isHelper(argv0)
}

// Main runs the command with argv (argv[0] the name it was called by:
// mount.chromafs and mount.fuse.chromafs make it a mount helper) and
// returns its exit status. v is the binary's version.
func Main(v string, argv []string) int {
	version = v
	if CalledAs(argv[0]) { // not when run by its binary's own name
		nameProcess()
	}
	return run(argv[0], argv[1:])
}

// nameProcess gives this process the command's name where ps -e, pgrep
// -x, killall and top read it (/proc/self/comm): the kernel named it after
// its binary, chromafs-mount-serve (or chromafsd), also when it runs as
// the launcher's exec or as a mount helper.
func nameProcess() {
	f, err := os.OpenFile("/proc/self/comm", os.O_WRONLY, 0)
	if err != nil {
		return
	}
	_, _ = f.WriteString(Name)
	f.Close()
}

func run(argv0 string, args []string) int {
	if isHelper(argv0) {
		translated, fake, err := helperArgs(args)
		if err != nil {
			fmt.Fprintf(os.Stderr, "chromafs-mount: %v\n", err)
			return 2
		}
		if fake {
			return 0
		}
		args = translated
	}
	o, err := parseFlags(args, os.Stdout)
	if daemonChild() && (errors.Is(err, flag.ErrHelp) || err == nil && (!o.daemon || o.version || o.reload || o.unmount)) {
		// a serving process serves a mount: its stdio is /dev/null, and
		// anything else would be done unseen
		err = fmt.Errorf("started as a --daemon mount's serving process (%s is set) for another command", mountstart.DaemonEnv)
	}
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return usageError(err)
	}
	if o.version {
		fmt.Println(versionString())
		return 0
	}
	if o.reload || o.unmount {
		return control(o)
	}
	if o.daemon && !daemonChild() {
		return startDaemon(o, args)
	}
	ready := mountstart.Notifier(o.mountpoint)
	if daemonChild() {
		_ = os.Chdir("/") // every path is absolute by now
	}
	if err := serve(o, ready); err != nil {
		ready(err)
		fmt.Fprintf(os.Stderr, "chromafs-mount: %v\n", err)
		return 1
	}
	return 0
}

// usageError says err, a usage error, and returns its exit status; a
// daemon child says it to its parent (chromafs-mount's launcher leaves the
// arguments to it), which exits with that status.
func usageError(err error) int {
	fmt.Fprintf(os.Stderr, "chromafs-mount: %v\n", err)
	mountstart.Notifier("")(&mountstart.ExitError{Status: 2, Err: err})
	return 2
}

func versionString() string { return cli.Version("chromafs-mount", version) }

// setupLogging returns the mount's logger, writing to --log-file, a
// daemon's log, or stderr; for stderr it also returns the sink
// captureStderr redirects. Close the closer at exit.
func setupLogging(o *options) (*slog.Logger, *logSink, io.Closer, error) {
	sink := newLogSink()
	var w io.Writer = sink
	var c io.Closer = io.NopCloser(nil)
	if o.logFile == "" && daemonChild() && o.cacheDir != "" {
		// best effort: a daemon that cannot keep its log still mounts
		if p := daemonLogPath(o); os.MkdirAll(filepath.Dir(p), 0o700) == nil {
			o.logFile = p
		}
	}
	if o.logFile != "" {
		_, existed := os.Stat(o.logFile)
		f, err := os.OpenFile(o.logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--log-file: %w", err)
		}
		w, c, sink = f, &logFile{f, existed != nil}, nil
	}
	level := slog.LevelInfo
	if o.debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), sink, c, nil
}

// logFile closes a log, and removes it if this process made it and wrote
// nothing (a --daemon that failed says why on the caller's stderr: an
// empty log of it would only clutter the logs directory).
type logFile struct {
	*os.File
	made bool
}

func (l *logFile) Close() error {
	st, err := l.Stat()
	if cerr := l.File.Close(); cerr != nil {
		return cerr
	}
	if err == nil && l.made && st.Size() == 0 {
		return os.Remove(l.Name())
	}
	return nil
}

// daemonLogPath is where a daemon without --log-file logs: its stderr
// leads nowhere, and the cause of an EIO must not be lost.
func daemonLogPath(o *options) string {
	name := strings.Trim(strings.ReplaceAll(o.mountpoint, "/", "-"), "-")
	if name == "" {
		name = "root"
	}
	return filepath.Join(o.cacheDir, "logs", name+".log")
}

// accessLogQueue bounds the access log's lines not yet written (a few
// thousand events): past it, events are dropped and counted, so that a
// log on a stalled file never stalls a FUSE request.
const accessLogQueue = 1 << 20

// openAccessLog opens --access-log, or returns nil without one.
func openAccessLog(o *options) (*accesslog.Log, error) {
	if o.accessLog == "" {
		return nil, nil
	}
	return accesslog.Open(o.accessLog, accessLogQueue)
}

// openHostCache opens the host tier (package tiers), or returns nil.
func openHostCache(log *slog.Logger, o *options) *hostcache.Cache {
	return tiers.Host(log, o.cacheDir, o.diskBytes)
}

// openRedis opens the cross-host tier when --cache-redis names one.
func openRedis(log *slog.Logger, o *options) (*redistier.Tier, error) {
	return tiers.Redis(log, o.redisURL, o.redisPwFile, o.redisTTL, o.redisTimeout)
}

// openBudget opens the host-wide request budget of the collection, or
// returns nil (with a warning when it was wanted but cannot be kept).
func openBudget(log *slog.Logger, o *options) chroma.Limiter {
	if o.hostReqs == 0 {
		return nil
	}
	key := strings.Join([]string{o.conn.URL, o.conn.Tenant, o.conn.Database, o.conn.Collection}, "\x00")
	b, err := hostcache.OpenBudget(o.cacheDir, key, o.hostReqs)
	if err != nil {
		log.Warn("running without the host-wide request budget", "err", err)
		return nil
	}
	return b
}

// loadHeap is the heap a mount may reach while it loads the tree before
// the garbage collector runs: trees of a few 100,000 pages decode in one
// go; a larger one collects past it (and the process settles near what is
// live once tuneGC runs).
const loadHeap = 1 << 30

// tuneGC keeps the heap close to what is live: the cache is long-lived
// and large, the garbage (decoded responses) short-lived. Collecting at 50%
// growth, under a soft limit of the heap holding the tree plus the cache
// plus room for requests in flight and for the nodes the kernel may come
// to know (each costs go-fuse's inode and ours: a find of a 1,000,000-page
// tree adds ~500 MB), keeps RSS near --cache-size plus the tree without
// the collector running back to back once the kernel knows every node.
// Call it once the tree is built.
func tuneGC(cacheBytes int64, nodes int) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if ms.HeapInuse > 64<<20 { // a large tree: give its load garbage back to the OS
		debug.FreeOSMemory()
		runtime.ReadMemStats(&ms)
	}
	debug.SetGCPercent(50)
	debug.SetMemoryLimit(heapLimit(ms.HeapAlloc, cacheBytes, nodes))
}

// boundHeap sets tuneGC's soft limit on the heap as it is (the load's
// garbage still in it, the collector still off), with no collection: the
// bound holds while the mount's first commands are served, until tuneGC
// sets the real policy.
func boundHeap(cacheBytes int64, nodes int) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	debug.SetMemoryLimit(heapLimit(ms.HeapAlloc, cacheBytes, nodes))
}

// heapLimit is the soft limit on a heap holding heapAlloc bytes now: the
// cache, room for requests in flight and the nodes the kernel may come to
// know (see tuneGC).
func heapLimit(heapAlloc uint64, cacheBytes int64, nodes int) int64 {
	return int64(heapAlloc) + cacheBytes + cacheBytes/8 + 12<<20 + int64(nodes)*kernelNodeBytes
}

// kernelNodeBytes is the heap a node costs once the kernel knows it
// (measured: RSS after a cold find of 1,100,000 nodes, less before).
const kernelNodeBytes = 512

// mount mounts fsys at mp; what fusermount3 said is in the error, or
// logged when the mount succeeded.
func mount(log *slog.Logger, mp string, fsys *fusefs.FS, o *options, sink *logSink) (*fuse.Server, error) {
	mo := fuse.MountOptions{
		AllowOther: o.allowOther, Debug: o.debug, Options: o.fuseOpts, FsName: o.fsName,
		DirectMount: os.Geteuid() == 0, Logger: slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
	var server *fuse.Server
	said, err := captureStderr(sink, func() (err error) { server, err = fsys.Mount(mp, mo); return err })
	switch {
	case err != nil && said != "":
		return nil, fmt.Errorf("mount %s: %s%s", mp, oneLine(said), fuseDeviceHint(said))
	case err != nil && mountHint() != "":
		return nil, fmt.Errorf("mount %s: %w (%s)", mp, err, mountHint())
	case err != nil:
		return nil, fmt.Errorf("mount %s: %w", mp, err)
	case said != "":
		log.Warn("fusermount3: " + oneLine(said))
	}
	return server, nil
}

// oneLine joins the lines of a helper's message.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", "; ")), " ")
}

// mountHint says what is missing when a mount failed without a word from
// fusermount3: the helper itself, or (for root, who mounts directly)
// /dev/fuse. "" when neither is.
func mountHint() string {
	_, err3 := exec.LookPath("fusermount3")
	_, err2 := exec.LookPath("fusermount")
	if err3 != nil && err2 != nil {
		return "fusermount3 not found: install fuse3"
	}
	if os.Geteuid() != 0 {
		return ""
	}
	f, err := os.OpenFile("/dev/fuse", os.O_RDWR, 0)
	if err != nil {
		return fmt.Sprintf("/dev/fuse: %v: load the fuse module (modprobe fuse); in a container, give it the device", err)
	}
	f.Close()
	return ""
}

// fuseDeviceHint says how to mend fusermount3's "failed to open
// /dev/fuse: Permission denied", the first error a user who is not root
// meets where the device is 0600 (some images and containers): "" for
// other messages.
func fuseDeviceHint(said string) string {
	if !strings.Contains(said, "/dev/fuse: Permission denied") {
		return ""
	}
	mode := "not readable by this user"
	if st, err := os.Stat("/dev/fuse"); err == nil {
		mode = fmt.Sprintf("mode %04o", st.Mode().Perm())
	}
	return fmt.Sprintf(" (/dev/fuse is %s: run as root, or let users open it as Debian ships it: chmod 0666 /dev/fuse; in a container, pass the device: --device /dev/fuse)", mode)
}

// unmountOnSignal unmounts on SIGINT or SIGTERM. A busy mount is reported
// and retried briefly, then detached lazily (closing detached) so the
// process never hangs on it.
func unmountOnSignal(log *slog.Logger, sigs <-chan os.Signal, server *fuse.Server, mp string, detached chan<- struct{}) {
	sig, ok := <-sigs
	if !ok {
		return
	}
	log.Info("unmounting", "signal", sig.String())
	for i := 0; i < 10; i++ {
		err := server.Unmount()
		if err == nil {
			return
		}
		if i == 0 {
			log.Warn("mount busy: close files and leave the directory", "mountpoint", mp, "err", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	log.Warn("still busy; detaching lazily", "mountpoint", mp)
	if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil {
		if err := execQuiet("fusermount3", "-u", "-z", mp); err != nil {
			log.Error("lazy unmount failed; still serving", "mountpoint", mp, "err", err)
			return
		}
	}
	close(detached)
}
