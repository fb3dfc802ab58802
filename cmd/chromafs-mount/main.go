// Command chromafs-mount mounts a Chroma collection as a read-only file
// system. See --help.
package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/accesslog"
	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/content"
	"github.com/chromafs/chromafs/foreign"
	"github.com/chromafs/chromafs/fusefs"
	"github.com/chromafs/chromafs/hostcache"
	"github.com/chromafs/chromafs/internal/cli"
	"github.com/chromafs/chromafs/lazy"
	"github.com/chromafs/chromafs/redistier"
	"github.com/chromafs/chromafs/tree"
	"github.com/chromafs/chromafs/treeload"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

var logger = slog.New(slog.NewTextHandler(os.Stderr, nil))

func logf(format string, args ...any) { logger.Info(fmt.Sprintf(format, args...)) }

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	if isHelper(os.Args[0]) {
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
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "chromafs-mount: %v\n", err)
		return 2
	}
	if o.version {
		fmt.Println(versionString())
		return 0
	}
	if o.reload || o.unmount {
		return control(o)
	}
	if o.daemon && os.Getenv(daemonEnv) == "" {
		return startDaemon(o, args)
	}
	ready := readyNotifier()
	if os.Getenv(daemonEnv) != "" {
		_ = os.Chdir("/") // every path is absolute by now
	}
	if err := serve(o, ready); err != nil {
		ready(err)
		fmt.Fprintf(os.Stderr, "chromafs-mount: %v\n", err)
		return 1
	}
	return 0
}

func versionString() string { return cli.Version("chromafs-mount", version) }

// setupLogging points the logger at --log-file, a daemon's log, or
// stderr; for stderr it returns the sink captureStderr redirects.
func setupLogging(o *options) (io.Closer, *logSink, error) {
	sink := newLogSink()
	var w io.Writer = sink
	var c io.Closer = io.NopCloser(nil)
	if o.logFile == "" && os.Getenv(daemonEnv) != "" && o.cacheDir != "" {
		// best effort: a daemon that cannot keep its log still mounts
		if p := daemonLogPath(o); os.MkdirAll(filepath.Dir(p), 0o700) == nil {
			o.logFile = p
		}
	}
	if o.logFile != "" {
		_, existed := os.Stat(o.logFile)
		f, err := os.OpenFile(o.logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("--log-file: %w", err)
		}
		w, c, sink = f, &logFile{f, existed != nil}, nil
	}
	level := slog.LevelInfo
	if o.debug {
		level = slog.LevelDebug
	}
	logger = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
	return c, sink, nil
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

// serve mounts and serves until a signal or an external unmount.
func serve(o *options, ready func(error)) error {
	closer, sink, err := setupLogging(o)
	if err != nil {
		return err
	}
	defer closer.Close()
	mp, err := prepareMountpoint(o.mountpoint)
	if err != nil {
		return err
	}
	// Catch SIGINT/SIGTERM from the start: one that arrives while mounting
	// unmounts as soon as the mount exists, instead of killing the process
	// and leaving a dead mount behind.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	hups := make(chan os.Signal, 1)
	signal.Notify(hups, syscall.SIGHUP) // from the start: a SIGHUP while mounting must not kill the process
	defer signal.Stop(hups)
	start := time.Now()
	// Loading the tree only allocates: collect only if the heap passes
	// loadHeap, and let tuneGC set the real policy once the mount answers
	// (it hands the load's garbage back). A lower bound made a 100,000-page
	// tree of deep paths (38 MB of JSON) collect again and again near it:
	// 1.5 s to mount-ready instead of 0.9 s.
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(loadHeap)
	ctx, cancel := context.WithTimeout(context.Background(), 4*o.conn.Timeout)
	defer cancel()
	host := openHostCache(o)
	if host != nil {
		defer host.Close()
	}
	o.conn.Limiter = openBudget(o)
	remote, err := openRedis(o)
	if err != nil {
		return err
	}
	if remote != nil {
		defer remote.Close()
	}
	var tc treeCache
	store, res, err := loadTree(ctx, o, host, &tc)
	if err != nil {
		return err
	}
	t := res.Tree
	defer store.Close()
	loaded := time.Since(start)
	latency := newLatency()
	cfg := content.Config{
		Identity: store.Identity(), CacheBytes: o.cacheBytes, Prefetch: o.prefetch,
		Timeout: o.conn.Timeout, Retries: 2, Log: logger,
		Observe: func(tier string, d time.Duration) { latency.WithLabelValues(tier).Observe(d.Seconds()) },
	}
	if host != nil {
		cfg.Host = host
	}
	if remote != nil {
		cfg.Remote = remote
	}
	uris := lazy.New(o.conn.Timeout, o.lazyPrefixes())
	defer uris.Close()
	cfg.URIs = uriSource{uris}
	engine := content.New(t, chromaSource{store}, cfg)
	defer engine.Close()
	access, err := openAccessLog(o)
	if err != nil {
		return err
	}
	defer access.Close()
	fcfg := fusefs.Config{Collection: o.conn.Collection, UID: uint32(os.Getuid()), GID: uint32(os.Getgid()), NoKernelPush: !o.pushPages}
	if access != nil {
		fcfg.Access = access
	}
	fsys := fusefs.New(t, engine, fcfg)
	defer fsys.Close()
	engine.OnLoaded(fsys.PageLoaded)
	refresher := newRefresher(o, store, host, &tc, fsys, engine, res, access)
	defer refresher.Close()
	stopMetrics, err := serveMetrics(o.metricsAddr, mp, o.conn.Collection, engine, fsys, refresher, store, host, remote, latency)
	if err != nil {
		return err
	}
	defer stopMetrics()
	server, err := mount(mp, fsys, o, sink)
	if err != nil {
		return err
	}
	defer announce(o, mp)()
	ready(nil)
	sdNotify("READY=1\nSTATUS=serving " + o.conn.Collection + " at " + mp)
	logger.Info("mounted", "mountpoint", mp, "collection", o.conn.Collection, "pid", os.Getpid(), "files", t.Files, "dirs", t.Dirs, "links", t.Links,
		"tree", t.Version[:12], "tree_snapshot", res.Snapshot, "tree_load", loaded.Round(time.Millisecond), "ready", time.Since(start).Round(time.Millisecond))
	if t.Lookup(foreign.ReportPath) != nil {
		logger.Warn("some files were reassembled from another tool's chunks and are not byte-exact; see the list",
			"file", filepath.Join(mp, foreign.ReportPath))
	}
	tc.flush()
	tuneGC(o.cacheBytes, t.Files+t.Dirs+t.Links) // after the mount answers: a full GC is not free on a large tree
	engine.Start()
	refresher.Start()
	stopHUP := make(chan struct{})
	defer close(stopHUP)
	go refreshOnSIGHUP(hups, stopHUP, refresher)
	detached := make(chan struct{})
	go unmountOnSignal(sigs, server, mp, detached)
	served := make(chan struct{})
	go func() { server.Wait(); close(served) }()
	select {
	case <-served:
		sdNotify("STOPPING=1")
		logger.Info("unmounted", "mountpoint", mp, "stats", engine.Stats().String())
	case <-detached:
		logger.Warn("detached while busy; exiting (open files there now fail)", "mountpoint", mp, "stats", engine.Stats().String())
	}
	return nil
}

// openAccessLog opens --access-log, or returns nil without one.
func openAccessLog(o *options) (*accesslog.Log, error) {
	if o.accessLog == "" {
		return nil, nil
	}
	return accesslog.Open(o.accessLog)
}

// openHostCache opens the host tier, or returns nil (with a warning when it
// was wanted but cannot be used: the mount works without it).
func openHostCache(o *options) *hostcache.Cache {
	if o.diskBytes == 0 {
		return nil
	}
	c, err := hostcache.Open(o.cacheDir, o.diskBytes, logger)
	if err != nil {
		logger.Warn("running without the host cache", "err", err)
		return nil
	}
	return c
}

// openRedis opens the cross-host tier when --cache-redis names one. A bad
// URL or password file is an error; a Redis that does not answer is not
// (the tier skips it until it does).
func openRedis(o *options) (*redistier.Tier, error) {
	if o.redisURL == "" {
		return nil, nil
	}
	pw, err := cli.Secret("redis password file", o.redisPwFile, "CHROMAFS_REDIS_PASSWORD")
	if err != nil {
		return nil, err
	}
	return redistier.Open(redistier.Config{URL: o.redisURL, Password: pw, TTL: o.redisTTL, Log: logger})
}

// openBudget opens the host-wide request budget of the collection, or
// returns nil (with a warning when it was wanted but cannot be kept).
func openBudget(o *options) chroma.Limiter {
	if o.hostReqs == 0 {
		return nil
	}
	key := strings.Join([]string{o.conn.URL, o.conn.Tenant, o.conn.Database, o.conn.Collection}, "\x00")
	b, err := hostcache.OpenBudget(o.cacheDir, key, o.hostReqs)
	if err != nil {
		logger.Warn("running without the host-wide request budget", "err", err)
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
	debug.SetMemoryLimit(int64(ms.HeapAlloc) + cacheBytes + cacheBytes/8 + 12<<20 + int64(nodes)*kernelNodeBytes)
}

// kernelNodeBytes is the heap a node costs once the kernel knows it
// (measured: RSS after a cold find of 1,100,000 nodes, less before).
const kernelNodeBytes = 512

// loadTree connects and loads the tree pruned to the mount's groups. A
// tree fetched from Chroma is kept for the host tier in tc, written there
// by tc.flush once the mount answers (not while mounting).
func loadTree(ctx context.Context, o *options, host *hostcache.Cache, tc *treeCache) (*chroma.Store, treeload.Result, error) {
	start := time.Now()
	if store, res, err := loadTreeByID(ctx, o, host, tc); err != nil || store != nil {
		return store, treeLoaded(res, 0), err
	}
	var store *chroma.Store
	err := chroma.WhileBusy(ctx, func() (err error) { store, err = chroma.Open(ctx, o.conn, nil); return err })
	if err != nil {
		return nil, treeload.Result{}, err
	}
	opened := time.Since(start)
	res, err := loadVisible(ctx, o, store, host, tc)
	if err != nil {
		store.Close()
		return nil, treeload.Result{}, err
	}
	if host != nil {
		host.SetRef(collectionRef(o), store.ID())
	}
	return store, treeLoaded(res, opened), nil
}

// loadTreeByID loads the tree of the collection whose id the host tier
// remembers for this name, in one request (the tree header; the tree
// itself from the host tier when unchanged). It returns no store and no
// error when there is no such id or the server does not know it any more
// (the caller opens by name), and the error when the server cannot be
// asked (unreachable, busy past the deadline, unauthorized).
func loadTreeByID(ctx context.Context, o *options, host *hostcache.Cache, tc *treeCache) (*chroma.Store, treeload.Result, error) {
	if host == nil {
		return nil, treeload.Result{}, nil
	}
	id, ok := host.Ref(collectionRef(o))
	if !ok {
		return nil, treeload.Result{}, nil
	}
	store, err := chroma.OpenByID(o.conn, id)
	if err != nil {
		return nil, treeload.Result{}, err
	}
	res, err := loadVisible(ctx, o, store, host, tc)
	if err != nil {
		store.Close()
		if chroma.Retryable(err) || errors.Is(err, chroma.ErrUnauthorized) || ctx.Err() != nil {
			return nil, treeload.Result{}, err
		}
		logger.Debug("remembered collection id not usable; opening by name", "id", id, "err", err)
		return nil, treeload.Result{}, nil
	}
	return store, res, nil
}

// loadVisible loads store's tree as this mount sees it (its groups, the
// default limits), through the host tier's tree cache: the one way the
// mount, a restart and a refresh load a tree.
func loadVisible(ctx context.Context, o *options, store *chroma.Store, host *hostcache.Cache, tc *treeCache) (treeload.Result, error) {
	res, err := treeload.Load(ctx, store, tc.forStore(host, store), o.conn.Collection, o.groupList(), tree.DefaultLimits)
	if !errors.Is(err, chroma.ErrNoTree) || !o.layout.Scans() {
		return res, err
	}
	res, rep, err := treeload.Scanned(ctx, store, o.layout, o.scanLimit, o.groupList(), tree.DefaultLimits)
	if err != nil {
		return res, fmt.Errorf("collection %q has no path tree, and scanning it failed: %w", o.conn.Collection, err)
	}
	logger.Info("no path tree: scanned the collection's records", "records", rep.Records, "files", rep.Files,
		"without_path", rep.Skipped, "not_exact", len(rep.Marked), "offsets", rep.Offsets.String())
	if w := rep.Offsets.Warning(); w != "" {
		logger.Warn(w)
	}
	return res, nil
}

// collectionRef names the host-tier ref holding the collection's id.
func collectionRef(o *options) string {
	return "collection-id\x00" + o.conn.URL + "\x00" + o.conn.Tenant + "\x00" + o.conn.Database + "\x00" + o.conn.Collection
}

// treeLoaded logs what loading the tree cost and returns it.
func treeLoaded(res treeload.Result, opened time.Duration) treeload.Result {
	if res.Tree == nil {
		return res
	}
	logger.Debug("tree loaded", "open", opened, "fetch", res.Fetch, "decode_build", res.Build, "bytes", res.Bytes)
	for _, w := range res.Warnings.List {
		logger.Warn("path tree: " + w)
	}
	if res.Warnings.Dropped > 0 {
		logger.Warn("path tree: more warnings not shown", "count", res.Warnings.Dropped)
	}
	return res
}

// treeCache keeps stored trees in the host tier, named like pages by the
// collection's identity and the digest of their text, and verified against
// that digest when read back; and snapshots of built trees
// (treeload.SnapshotCache), named by the tree's stamp and a digest of the
// view, checked against the digest written with them.
type treeCache struct {
	host     *hostcache.Cache
	identity string
	sha      string // a tree to write at flush
	text     []byte
	snap     *tree.Tree // a built tree to keep as a snapshot at flush
	snapKey  hostcache.Key
	snapView string
}

// forStore points c at store's collection and returns it as the tree
// cache to use, or nil without a host tier.
func (c *treeCache) forStore(host *hostcache.Cache, store *chroma.Store) chroma.TreeCache {
	if host == nil {
		return nil
	}
	c.host, c.identity = host, store.Identity()
	return c
}

func (c *treeCache) Get(sha string, size int64) ([]byte, bool) {
	return c.host.Get(hostcache.Key{Collection: c.identity, SHA256: sha}, size)
}

// Put keeps the tree for flush: compressing and writing a large tree while
// mounting would delay the mount (and the garbage collector is off then).
func (c *treeCache) Put(sha string, text []byte) { c.sha, c.text = sha, text }

// discard forgets what flush would write.
func (c *treeCache) discard() { c.text, c.snap = nil, nil }

// flush writes the kept tree and snapshot to the host tier: once the
// mount answers, and after a refresh once the new version is served.
func (c *treeCache) flush() {
	if c.host != nil && c.text != nil {
		c.host.Put(hostcache.Key{Collection: c.identity, SHA256: c.sha}, c.text)
		c.text = nil
	}
	if c.host != nil && c.snap != nil {
		data := c.snap.Snapshot()
		c.host.Put(c.snapKey, data)
		c.host.SetRef(snapshotRef(c.snapKey), strconv.Itoa(len(data)))
		c.host.SetRef(c.viewRef(c.snapView), "1")
		c.snap = nil
	}
}

// snapshotKey names the snapshot of the tree of stamp built for view: the
// collection's identity, the stamp, and a digest of the view (groups and
// limits), so that a mount with other groups never reads it.
func (c *treeCache) snapshotKey(stamp, view string) hostcache.Key {
	sum := sha256.Sum256([]byte(view))
	return hostcache.Key{Collection: c.identity, SHA256: stamp, Part: "tree-snapshot-v2-" + hex.EncodeToString(sum[:16])}
}

func snapshotRef(k hostcache.Key) string { return "snapshot-size\x00" + k.Name() }

// Snapshot returns the kept snapshot of stamp for view (the host tier
// verifies the entry's digest; the size comes from a ref written with it).
func (c *treeCache) Snapshot(stamp, view string) ([]byte, bool) {
	k := c.snapshotKey(stamp, view)
	v, ok := c.host.Ref(snapshotRef(k))
	if !ok {
		return nil, false
	}
	size, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, false
	}
	return c.host.Get(k, size)
}

// KeepSnapshot keeps t for flush: encoding and writing it while mounting
// would delay the mount.
func (c *treeCache) KeepSnapshot(stamp, view string, t *tree.Tree) {
	c.snap, c.snapKey, c.snapView = t, c.snapshotKey(stamp, view), view
}

// viewRef names the ref saying that snapshots of view are kept.
func (c *treeCache) viewRef(view string) string {
	sum := sha256.Sum256([]byte(c.identity + "\x00" + view))
	return "snapshot-view\x00" + hex.EncodeToString(sum[:])
}

// HasSnapshot reports whether a snapshot for view was ever kept here.
func (c *treeCache) HasSnapshot(view string) bool {
	_, ok := c.host.Ref(c.viewRef(view))
	return ok
}

func mount(mp string, fsys *fusefs.FS, o *options, sink *logSink) (*fuse.Server, error) {
	mo := fuse.MountOptions{
		AllowOther: o.allowOther, Debug: o.debug, Options: o.fuseOpts, FsName: o.fsName,
		DirectMount: os.Geteuid() == 0, Logger: slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
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
		logger.Warn("fusermount3: " + oneLine(said))
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
func unmountOnSignal(sigs <-chan os.Signal, server *fuse.Server, mp string, detached chan<- struct{}) {
	sig, ok := <-sigs
	if !ok {
		return
	}
	logger.Info("unmounting", "signal", sig.String())
	for i := 0; i < 10; i++ {
		err := server.Unmount()
		if err == nil {
			return
		}
		if i == 0 {
			logger.Warn("mount busy: close files and leave the directory", "mountpoint", mp, "err", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	logger.Warn("still busy; detaching lazily", "mountpoint", mp)
	if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil {
		if err := execQuiet("fusermount3", "-u", "-z", mp); err != nil {
			logger.Error("lazy unmount failed; still serving", "mountpoint", mp, "err", err)
			return
		}
	}
	close(detached)
}
