package mountcmd

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/chromafs/chromafs/backend"
	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/content"
	"github.com/chromafs/chromafs/hostcache"
	"github.com/chromafs/chromafs/internal/cli"
	"github.com/chromafs/chromafs/lazy"
	"github.com/chromafs/chromafs/treeload"
)

const usage = `Usage: chromafs-mount [flags] MOUNTPOINT
       chromafs-mount --reload MOUNTPOINT | --unmount MOUNTPOINT

Mounts a Chroma collection written by chromafs-ingest (or Mintlify's
ChromaFs layout) as a read-only file system at MOUNTPOINT, an empty
directory. Directories and sizes come from the collection's path tree and
live in memory; file contents are fetched on first read and cached.

Runs in the foreground until SIGINT/SIGTERM or "fusermount3 -u MOUNTPOINT";
--daemon returns once the mount answers. The mount follows the collection:
every --refresh it checks for a new tree (after a re-ingest) and swaps it
in without a remount; SIGHUP checks at once. The token is read from env
CHROMA_TOKEN or --token-file, never from a flag.

--reload MOUNTPOINT and --unmount MOUNTPOINT signal the one process that
serves that mount (found by its record in /run/chromafs, or
$XDG_RUNTIME_DIR/chromafs, checked against the mount and process tables):
reload checks the collection now, unmount unmounts and waits until the
process has exited. The pid is also in the log ("mounted ... pid=") and in
--pid-file.

As a mount helper (mount.chromafs, see scripts/install.sh), the source is
chromafs:COLLECTION, in fstab and with mount -t:
    chromafs:docs /mnt/docs chromafs _netdev,chroma_url=http://chroma:8000 0 0
    mount -t chromafs chromafs:docs /mnt/docs -o chroma_url=http://chroma:8000
(a bare "docs" works too, unless a file named docs is in mount's working
directory: mount(8) then makes it a path).

Examples:
    chromafs-mount --collection docs /mnt/docs
    chromafs-mount --collection docs --groups admin,sre --daemon /mnt/docs-admin
    chromafs-mount -o collection=docs,groups=admin,cache_size=1GiB /mnt/docs
    chromafs-mount --reload /mnt/docs     # pick up a re-ingest now
    chromafs-mount --unmount /mnt/docs    # unmount, wait for the process to exit
    fusermount3 -u /mnt/docs              # unmount (as root: umount /mnt/docs)

Exit status: 0 unmounted cleanly (or --help, --version); 1 a runtime error
(the server, the collection, the tree or the mount failed: one line says
which); 2 a usage error (a bad flag or value).

Environment: CHROMA_URL, CHROMAFS_COLLECTION, CHROMA_TENANT, CHROMA_DATABASE
(defaults of the flags of the same names), CHROMA_TOKEN (the API token),
CHROMAFS_REDIS_PASSWORD (the --cache-redis password), XDG_CACHE_HOME or
HOME (the default --cache-dir).

Flags:
`

// options are the parsed command line.
type options struct {
	conn         chroma.Config
	groups       string
	cacheSize    string
	cacheDir     string
	diskSize     string
	hostReqs     int
	redisURL     string
	redisPwFile  string
	redisTTL     time.Duration
	redisTimeout time.Duration
	prefetch     string
	refresh      time.Duration
	pushPages    bool
	lazyAllow    string
	search       backend.SearchOptions
	allowOther   bool
	daemon       bool
	pidFile      string
	reload       bool // --reload MOUNTPOINT: signal that mount's process
	unmount      bool // --unmount MOUNTPOINT
	debug        bool
	version      bool
	metricsAddr  string
	logFile      string
	accessLog    string
	layout       treeload.Layout
	scanLimit    int
	fsName       string
	fuseOpts     []string // -o options that are not ours, passed to FUSE
	mountpoint   string

	cacheBytes int64
	diskBytes  int64 // 0: no host tier
}

func newFlagSet(o *options, stderr io.Writer) *cli.FlagSet {
	fs := cli.New("chromafs-mount", usage, stderr)
	o.conn.RegisterFlags(fs.FlagSet)
	cli.Duration(fs.FlagSet, &o.conn.Timeout, "timeout", 10*time.Second, false, "deadline for each request to Chroma (a failed read returns EIO\nafter this plus 2 retries with backoff)")
	fs.StringVar(&o.groups, "groups", "", "comma-separated access groups of this mount (default: none, public pages only)")
	fs.StringVar(&o.cacheSize, "cache-size", "256MiB", "content cache size, with a unit: KiB, MiB, GiB (or K, M, G)")
	fs.StringVar(&o.cacheDir, "cache-dir", hostcache.DefaultDir(), "host cache directory, shared by every chromafs mount of this user on\nthis host: pages fetched once are read from here by the next mount\n(entries in a 0700 subdirectory; it holds private pages)")
	fs.StringVar(&o.diskSize, "disk-cache-size", "1GiB", "bound of the host cache on disk (oldest entries go first); 0 turns it off")
	fs.IntVar(&o.hostReqs, "host-requests", 8, "requests in flight to the collection from every chromafs mount of this\nuser on this host together (slots locked in --cache-dir); Chroma Cloud\nallows 10 concurrent reads per collection; 0 turns the bound off")
	fs.StringVar(&o.redisURL, "cache-redis", "", "redis://HOST:PORT/DB: a cache shared by the hosts of a fleet, below the\nhost cache (password from env CHROMAFS_REDIS_PASSWORD or\n--cache-redis-password-file, never in the URL); skipped when it fails")
	fs.StringVar(&o.redisPwFile, "cache-redis-password-file", "", "file holding the Redis password, mode 0600 or stricter")
	cli.Duration(fs.FlagSet, &o.redisTTL, "cache-redis-ttl", 24*time.Hour, false, "how long Redis keeps an entry")
	cli.Duration(fs.FlagSet, &o.redisTimeout, "cache-redis-timeout", 50*time.Millisecond, false, "deadline of a read from Redis; a read that fails or runs past it is\nserved by the next tier, and reads then skip Redis for a second")
	fs.StringVar(&o.prefetch, "prefetch", content.PrefetchAuto, "none; dir (the first read in a directory loads its walk-order group of\nfiles and the next ones in batches, in the background; a grep -r's\nlistings move it on); all (also warm the whole collection after\nmounting, up to the cache size); auto: dir, and all when the collection\nis small (at most 64 MiB and a quarter of --cache-size), or when the\nhost cache holds its pages already and they fit half of --cache-size")
	cli.Duration(fs.FlagSet, &o.refresh, "refresh", 30*time.Second, true, "how often to check the collection for a new tree (one small request);\na new tree is swapped in without a remount, and SIGHUP checks at once;\n0 checks only on SIGHUP. On a host that served this view before, the\nmount answers with the version it served last and checks it at once")
	o.layout.RegisterFlags(fs.FlagSet, "how the collection maps to files: chromafs or mintlify (a path tree is\nrequired); langchain, llamaindex, custom (--path-key...): collections of\nother tools; auto: the path tree if there is one (chromafs-ingest's, or\nchromafs-ingest index's), else the records' layout, detected. A collection\nwithout a tree is scanned at mount time up to --scan-limit records")
	fs.IntVar(&o.scanLimit, "scan-limit", 20000, "most records a collection without a path tree may have to be scanned at\nmount time (larger ones: run chromafs-ingest index once)")
	fs.StringVar(&o.lazyAllow, "lazy-allow", "", "comma-separated URL prefixes that lazy pointers (pages whose content is\npublished at an http(s) URL, see docs/FORMAT.md) may be fetched from,\nredirects included (default: any http:// or https:// URL); none: read no\nlazy pointer (reading one is EIO)")
	fs.BoolVar(&o.pushPages, "push-pages", true, "hand pages held in memory to the kernel's page cache (FUSE notify-store):\nprefetched ones for files the kernel has looked up, and, while a grep -r\nreads the tree, those of each directory it lists, so that their first\nread is answered without a request to this process; =false turns it off")
	o.search.RegisterFlags(fs.FlagSet)
	fs.BoolVar(&o.allowOther, "allow-other", false, "let other users access the mount (needs user_allow_other in\n/etc/fuse.conf when not root)")
	fs.BoolVar(&o.daemon, "daemon", false, "run in the background; return once the mount answers")
	fs.StringVar(&o.pidFile, "pid-file", "", "write the serving process's pid to FILE once the mount answers\n(removed at exit)")
	fs.BoolVar(&o.reload, "reload", false, "signal the process serving MOUNTPOINT to check the collection now\n(SIGHUP), then exit")
	fs.BoolVar(&o.unmount, "unmount", false, "signal the process serving MOUNTPOINT to unmount (SIGTERM) and wait\nuntil it has exited")
	fs.BoolVar(&o.debug, "debug", false, "log every FUSE request and debug messages")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (e.g. 127.0.0.1:9464)")
	fs.StringVar(&o.accessLog, "access-log", "", "append one JSON line per operation that reaches this process to FILE\n(- is stdout, foreground only): lookups of missing names, listings, reads\n(offset, bytes, the tier that served them), readlinks and refreshes, each\nwith its latency and the calling process (pid, uid, command). The kernel\nanswers repeated lookups and cached pages itself: those never appear. Lines\nare written in the background: a FILE that stalls never stalls a read (past\n1 MiB unwritten, events are dropped, counted by a line of the log and by\nchromafs_access_log_dropped_total)")
	fs.StringVar(&o.logFile, "log-file", "", "append logs to this file (default: stderr; with --daemon,\nCACHE_DIR/logs/MOUNTPOINT.log, MOUNTPOINT with - for /, when it can be made)")
	fs.StringVar(&o.fsName, "fsname", "", "the mount's source in /proc/self/mountinfo and df (default\nchromafs:COLLECTION; the mount helper passes the source fstab names)")
	fs.Func("o", "mount options in mount-helper form: opt[,opt=val]... (the long flags\nwith _ for -, e.g. collection=docs,groups=a,cache_size=1GiB; others go to FUSE)", o.mountOpts(fs.FlagSet))
	return fs
}

// mountOpts handles -o: each known key sets the flag of the same name,
// ro/rw-style generic options are accepted, the rest go to FUSE.
func (o *options) mountOpts(fs *flag.FlagSet) func(string) error {
	return func(s string) error {
		for _, kv := range strings.Split(s, ",") {
			if kv == "" {
				continue
			}
			key, val, hasVal := strings.Cut(kv, "=")
			name := strings.ReplaceAll(key, "_", "-")
			switch {
			case name == "ro" || name == "nosuid" || name == "nodev" || name == "noexec" || name == "noatime":
				continue // always in force, or harmless
			case name == "rw":
				return errors.New("-o rw: chromafs is read-only")
			case name == "token" || name == "chroma-token":
				return errors.New("-o token: tokens are never taken from the command line; use CHROMA_TOKEN or token_file")
			case fs.Lookup(name) != nil && name != "o":
				if !hasVal {
					val = "true"
				}
				if err := fs.Set(name, val); err != nil {
					return fmt.Errorf("-o %s: %w", kv, err)
				}
			default:
				o.fuseOpts = append(o.fuseOpts, kv)
			}
		}
		return nil
	}
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := newFlagSet(o, stderr)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.version {
		return o, nil
	}
	// mount(8) helpers put options after the mount point: allow both orders.
	rest := fs.Args()
	if len(rest) > 1 {
		if err := fs.Parse(rest[1:]); err != nil {
			return nil, err
		}
		rest = append(rest[:1], fs.Args()...)
	}
	if len(rest) != 1 {
		return nil, fmt.Errorf("want exactly one MOUNTPOINT, got %d arguments (see --help)", len(rest))
	}
	o.mountpoint = rest[0]
	if o.reload || o.unmount {
		if o.reload && o.unmount {
			return nil, errors.New("--reload and --unmount: choose one")
		}
		return o, o.absolute()
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	return o, o.absolute()
}

// absolute makes every path of o absolute, so that a daemon can leave the
// caller's working directory (it runs in /: it must not keep a directory
// busy that someone may want to unmount or remove).
func (o *options) absolute() error {
	for _, p := range []*string{&o.mountpoint, &o.logFile, &o.accessLog, &o.cacheDir, &o.conn.TokenFile, &o.redisPwFile, &o.pidFile} {
		if *p == "" || *p == "-" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	return nil
}

// minCache is the smallest cache size accepted: below it nothing useful
// fits (a window of chunks is 1 MiB).
const minCache = 1 << 20

func (o *options) validate() error {
	n, err := parseSize(o.cacheSize)
	if err != nil {
		return fmt.Errorf("--cache-size: %w", err)
	}
	if n < minCache {
		return fmt.Errorf("--cache-size %s is %d bytes: want at least 1MiB (a size with a unit, like 256MiB)", o.cacheSize, n)
	}
	o.cacheBytes = n
	o.conn.Collection = strings.TrimPrefix(o.conn.Collection, SourcePrefix) // the helper's form, also taken here
	if strings.ContainsAny(o.fsName, ", \t\n\\") {
		return fmt.Errorf("--fsname %q: no commas, spaces or backslashes (it is a mount option)", o.fsName)
	}
	if _, err := cli.Groups(o.groups); err != nil {
		return fmt.Errorf("--groups: %w", err)
	}
	if strings.TrimSpace(o.diskSize) != "0" {
		if o.diskBytes, err = parseSize(o.diskSize); err != nil {
			return fmt.Errorf("--disk-cache-size: %w (or 0 for no host cache)", err)
		}
		if o.diskBytes < minCache {
			return fmt.Errorf("--disk-cache-size %s is %d bytes: want at least 1MiB, or 0 for no host cache", o.diskSize, o.diskBytes)
		}
		if o.cacheDir == "" {
			return errors.New("--cache-dir: no default (set HOME or XDG_CACHE_HOME); pass a directory, or --disk-cache-size 0")
		}
	}
	if o.hostReqs < 0 {
		return fmt.Errorf("--host-requests %d: want 1 or more, or 0 for no host-wide bound", o.hostReqs)
	}
	if o.hostReqs > 0 && o.cacheDir == "" {
		return errors.New("--cache-dir: no default (set HOME or XDG_CACHE_HOME); pass a directory, or --host-requests 0")
	}
	switch o.prefetch {
	case content.PrefetchNone, content.PrefetchDir, content.PrefetchAll, content.PrefetchAuto:
	default:
		return fmt.Errorf("--prefetch %q: want none, dir, all or auto", o.prefetch)
	}
	if err := o.layout.Validate(); err != nil {
		return err
	}
	if o.scanLimit < 1 {
		return fmt.Errorf("--scan-limit %d: want 1 or more records", o.scanLimit)
	}
	if err := checkListenAddr(o.metricsAddr); err != nil {
		return fmt.Errorf("--metrics-addr %q: %w", o.metricsAddr, err)
	}
	if _, err := lazy.ParseAllow(o.lazyAllow); err != nil {
		return fmt.Errorf("--lazy-allow %w", err)
	}
	if err := o.search.Validate(); err != nil {
		return err
	}
	return o.conn.Validate()
}

// lazyPrefixes is --lazy-allow as the lazy client takes it (validate
// has checked it): nil allows every http(s) URL, an empty list none.
func (o *options) lazyPrefixes() []string {
	p, _ := lazy.ParseAllow(o.lazyAllow)
	return p
}

// groupList is --groups as a list (validate has checked it).
func (o *options) groupList() []string {
	g, _ := cli.Groups(o.groups)
	return g
}

// parseSize reads a positive byte size (cli.ParseSize).
func parseSize(s string) (int64, error) { return cli.ParseSize(s) }

// checkListenAddr checks a HOST:PORT to listen on ("" is none): a bad
// one is a usage error, found before anything is mounted.
func checkListenAddr(addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want HOST:PORT, like 127.0.0.1:9464 (%w)", err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || (n == 0 && port != "0") {
		return fmt.Errorf("port %q: want a number 0..65535, like 127.0.0.1:9464", port)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("host %q: want an address or a name, like 127.0.0.1:9464", host)
	}
	return nil
}
