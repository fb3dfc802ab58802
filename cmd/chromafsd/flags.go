package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/backend"
	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/content"
	"github.com/chromafs/chromafs/daemon"
	"github.com/chromafs/chromafs/dockerplugin"
	"github.com/chromafs/chromafs/hostcache"
	"github.com/chromafs/chromafs/internal/cli"
	"github.com/chromafs/chromafs/internal/proc"
	"github.com/chromafs/chromafs/lazy"
	"github.com/chromafs/chromafs/treeload"
)

const usage = `Usage: chromafsd [flags]

The host daemon: one process per host (per user when not root) serving
every view of every collection it is asked for. Clients (chromafs attach,
or an orchestrator over the API, docs/API.md) ask on a unix socket for a
view of a collection, as a set of groups sees it, at a path; the daemon
holds the token, the caches and the request budget, and places the view
there for a sandbox to bind:

    chromafs attach --collection docs --groups billing /run/conv/42/docs
    bwrap --ro-bind /run/conv/42/docs /docs ...
    docker run --mount type=bind,src=/run/conv/42/docs,dst=/docs,readonly,bind-propagation=rslave ...

Each collection is opened and its tree loaded once; the views of a
collection share one read engine (memory, host tier, Redis, the request
budget); as root, the conversations of a view share one FUSE mount and
its kernel page cache whoever they run as (each user's copy idmapped to
show the view as theirs, Linux 6.12; --private attachments and those with
an access log get a mount of their own, or their user's).
Who asks comes from the socket's peer credentials; root may attach
anything, other users what --policy grants (no policy: root only).

Attachments survive the daemon: SIGTERM, a crash or an upgrade leave them
recorded in --state-dir, and the next chromafsd places them again, on the
old mounts, so that running sandboxes see their view again. SIGHUP reads
--policy again. --detach-on-exit makes a stop leave no mount behind.
A view's shared mount outlives its last attachment for --linger, so that
the next conversation of the view, minutes later, is as fast as the last.

Exit status: 0 stopped; 1 a runtime error (the socket, the state
directory, the policy: one line says which); 2 a usage error.

Environment: CHROMA_URL, CHROMA_TENANT, CHROMA_DATABASE (defaults of the
flags of the same names), CHROMA_TOKEN (the API token; or --token-file),
CHROMAFS_REDIS_PASSWORD, XDG_RUNTIME_DIR, XDG_STATE_HOME, XDG_CACHE_HOME.

Flags:
`

// options are the parsed command line.
type options struct {
	conn         chroma.Config
	cacheSize    string
	memory       string
	memoryLimit  string
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
	search       backend.SearchOptions
	lazyAllow    string
	layout       treeload.Layout
	scanLimit    int
	socket       string
	socketGroup  string
	stateDir     string
	policyFile   string
	metricsAddr  string
	maxMounts    int
	maxAttach    int
	apiIdle      time.Duration
	detachOnExit bool
	linger       time.Duration
	dockerPlugin bool
	dockerSocket string
	csiEndpoint  string
	nodeID       string
	logFile      string
	debug        bool
	version      bool

	cacheBytes, budgetBytes, memoryBytes, diskBytes int64
	socketGID                                       int
}

func newFlagSet(o *options, out io.Writer) *cli.FlagSet {
	fs := cli.New("chromafsd", usage, out)
	fs.StringVar(&o.conn.URL, "chroma-url", envOr("CHROMA_URL", chroma.DefaultURL), "Chroma server URL (env CHROMA_URL)")
	fs.StringVar(&o.conn.Tenant, "tenant", envOr("CHROMA_TENANT", chroma.DefaultTenant), "Chroma tenant (env CHROMA_TENANT)")
	fs.StringVar(&o.conn.Database, "database", envOr("CHROMA_DATABASE", chroma.DefaultDatabase), "Chroma database (env CHROMA_DATABASE)")
	fs.StringVar(&o.conn.TokenFile, "token-file", os.Getenv("CHROMA_TOKEN_FILE"), "file holding the API token, mode 0600 or stricter (env CHROMA_TOKEN_FILE;\ndefault: env CHROMA_TOKEN)")
	cli.Duration(fs.FlagSet, &o.conn.Timeout, "timeout", 10*time.Second, false, "deadline for each request to Chroma")
	fs.StringVar(&o.memory, "memory", "auto", "the host's memory budget, shared by every collection: their pages,\ndecoded trees, views (720KiB a mount) and search indexes, and what else\nthe daemon's heap holds beyond what it held serving nothing and 16MiB\n(measured after garbage collections). Pages unused longest go first,\nbut a collection in use within its share of the budget loses none to\nanother's growth; an idle view (a lingering mount) goes whole once pages\nused after it went idle are evicted, or when trees, indexes and mounts\npass half of what the rest of the heap leaves, and loads again from the\nhost cache when attached. auto: a quarter of the memory of the host (or\nthe daemon's cgroup), at least 64MiB, below an explicit --memory-limit.\nRSS stays within --memory + 15% + 64MiB (docs/BENCHMARKS.md)")
	fs.StringVar(&o.cacheSize, "cache-size", "0", "bound on one collection's pages within --memory; 0: its fair share of\nthe budget is its only bound")
	fs.StringVar(&o.memoryLimit, "memory-limit", "auto", "Go's soft memory limit, above --memory: the collector works harder\nnear it, so it bounds the garbage between two collections; auto:\n--memory plus 15% plus 64MiB; 0 leaves Go's default (the heap may grow\nto twice what it holds)")
	fs.StringVar(&o.cacheDir, "cache-dir", hostcache.DefaultDir(), "host cache directory, shared with chromafs-mount processes of this user")
	fs.StringVar(&o.diskSize, "disk-cache-size", "1GiB", "bound of the host cache on disk; 0 turns it off")
	fs.IntVar(&o.hostReqs, "host-requests", 8, "requests in flight per collection from every chromafs process of this\nuser on this host together; 0 turns the bound off")
	fs.StringVar(&o.redisURL, "cache-redis", "", "redis://HOST:PORT/DB: a cache shared by the hosts of a fleet")
	fs.StringVar(&o.redisPwFile, "cache-redis-password-file", "", "file holding the Redis password, mode 0600 or stricter")
	cli.Duration(fs.FlagSet, &o.redisTTL, "cache-redis-ttl", 24*time.Hour, false, "how long Redis keeps an entry")
	cli.Duration(fs.FlagSet, &o.redisTimeout, "cache-redis-timeout", 50*time.Millisecond, false, "deadline of a read from Redis; a read that fails or runs past it is\nserved by the next tier, and reads then skip Redis for a second")
	fs.StringVar(&o.prefetch, "prefetch", content.PrefetchAuto, "none, dir, all or auto (see chromafs-mount --help; a daemon's collections share its memory,\nso auto warms only a small collection, never one because the host cache holds it);\nthe warming starts once the attach that placed the collection's first view is done")
	cli.Duration(fs.FlagSet, &o.refresh, "refresh", 30*time.Second, true, "how often each view checks its collection for a new tree; 0: only on\nchromafs refresh")
	fs.BoolVar(&o.pushPages, "push-pages", true, "hand pages held in memory to the kernel's page cache (FUSE notify-store):\nprefetched ones once a mount is idle, and, while a grep -r reads a view,\nthose of each directory it lists; =false turns it off")
	o.search.RegisterFlags(fs.FlagSet)
	fs.StringVar(&o.lazyAllow, "lazy-allow", "", "URL prefixes lazy pointers may be fetched from (default any; none: none)")
	o.layout.RegisterFlags(fs.FlagSet, "the default layout of collections (a client may ask for another):\nauto, chromafs, mintlify, langchain, llamaindex, custom")
	fs.IntVar(&o.scanLimit, "scan-limit", 20000, "most records a collection without a path tree may have to be scanned")
	fs.StringVar(&o.socket, "socket", api.DefaultSocket(), "the API's unix socket (mode 0660)")
	fs.StringVar(&o.socketGroup, "socket-group", "", "group (name or gid) of the socket: its members may call the daemon;\nthe policy still decides what they may attach")
	fs.StringVar(&o.stateDir, "state-dir", defaultStateDir(), "where attachments are kept across restarts, and the daemon's own mounts")
	fs.StringVar(&o.policyFile, "policy", "", "YAML policy: who (users, unix_groups, namespaces, service_accounts,\ndocker) may attach which collections with which groups (default: root\nonly; see README, The host daemon); SIGHUP reads it again; it must not be\nwritable by others")
	fs.StringVar(&o.metricsAddr, "metrics", "", "serve Prometheus metrics at http://ADDR/metrics, per collection and view,\nand Go's profiles at /debug/pprof/ (bind it to loopback)")
	fs.IntVar(&o.maxMounts, "max-mounts", 1000, "most FUSE mounts (a view's per user, and private attachments); a\nsixteenth is kept for root")
	fs.IntVar(&o.maxAttach, "max-attachments", 10000, "most attachments (each a mount in the host's mount table, which\nfs.mount-max bounds for every program of the host); a sixteenth is kept\nfor root. Each subject's share is the policy's limits (default 256\nattachments, 16 FUSE mounts, 8 private, 2 layouts of their own)")
	cli.Duration(fs.FlagSet, &o.apiIdle, "api-idle-timeout", 30*time.Second, false, "close an API connection idle this long (each user but root may hold 32\nconnections, all of them together 512)")
	cli.Duration(fs.FlagSet, &o.linger, "linger", 10*time.Minute, true, "keep a view's shared mount this long after its last attachment goes (as\nroot): the view's next conversation finds its page cache and memory warm;\nevicted sooner when --max-mounts is reached; 0: it goes with its last\nattachment")
	fs.BoolVar(&o.detachOnExit, "detach-on-exit", false, "detach every attachment at SIGTERM (default: keep them for the next start)")
	fs.BoolVar(&o.dockerPlugin, "docker-plugin", false, "serve Docker's volume plugin protocol (docker volume create -d chromafs\n-o collection=docs [-o groups=billing] NAME), volumes in STATE_DIR/docker")
	fs.StringVar(&o.dockerSocket, "docker-plugin-socket", dockerplugin.DefaultSocket, "the Docker volume plugin's socket (dockerd finds NAME.sock in\n/run/docker/plugins, or a NAME.spec naming it in /etc/docker/plugins)")
	fs.StringVar(&o.csiEndpoint, "csi-endpoint", "", "also serve the CSI node plugin (Identity, Node) at unix:///PATH, for\nkubelet (see deploy/kubernetes)")
	fs.StringVar(&o.nodeID, "node-id", "", "the CSI plugin's node id (the Kubernetes node's name); needed with\n--csi-endpoint")
	fs.StringVar(&o.logFile, "log-file", "", "append logs to this file (default: stderr)")
	fs.BoolVar(&o.debug, "debug", false, "log every API call with its peer")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	return fs
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// defaultStateDir is /var/lib/chromafs for root, else
// $XDG_STATE_HOME/chromafs (~/.local/state/chromafs).
func defaultStateDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/chromafs"
	}
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "chromafs")
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "state", "chromafs")
	}
	return ""
}

func parseFlags(args []string, out io.Writer) (*options, error) {
	o := &options{socketGID: -1}
	fs := newFlagSet(o, out)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.version {
		return o, nil
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q (see --help)", fs.Args())
	}
	return o, o.validate()
}

// limitSlack is the fixed part of --memory-limit auto above the budget
// and its 15%: what the daemon holds serving nothing and the heap it
// leaves uncounted (16 MiB: the daemon package's heapAllowance), its
// goroutines' stacks and the runtime's own, with room for garbage
// (docs/BENCHMARKS.md, "Many sites on one host").
const limitSlack = 64 << 20

func (o *options) validate() error {
	var err error
	if strings.TrimSpace(o.cacheSize) != "0" {
		if o.cacheBytes, err = cli.ParseSize(o.cacheSize); err != nil {
			return fmt.Errorf("--cache-size: %w (or 0)", err)
		}
		if o.cacheBytes < 1<<20 {
			return fmt.Errorf("--cache-size %s is %d bytes: want at least 1MiB, or 0 for no bound but --memory", o.cacheSize, o.cacheBytes)
		}
	}
	if o.budgetBytes, err = memoryBudget(o.memory, proc.Memory); err != nil {
		return err
	}
	switch strings.TrimSpace(o.memoryLimit) {
	case "0":
	case "auto":
		o.memoryBytes = o.budgetBytes + o.budgetBytes*15/100 + limitSlack
	default:
		if o.memoryBytes, err = cli.ParseSize(o.memoryLimit); err != nil {
			return fmt.Errorf("--memory-limit: %w (or auto, or 0)", err)
		}
		switch {
		case strings.TrimSpace(o.memory) == "auto":
			// the limit given, the budget auto: it fits below the limit
			// as auto's limit would be above it
			o.budgetBytes = max(min(o.budgetBytes, (o.memoryBytes-limitSlack)*100/115), 4<<20)
		case o.memoryBytes < o.budgetBytes:
			return fmt.Errorf("--memory-limit %s is below --memory %s: the soft limit must be above the budget (auto: --memory + 15%% + 64MiB)", o.memoryLimit, o.memory)
		}
	}
	if strings.TrimSpace(o.diskSize) != "0" {
		if o.diskBytes, err = cli.ParseSize(o.diskSize); err != nil {
			return fmt.Errorf("--disk-cache-size: %w (or 0 for no host cache)", err)
		}
	}
	if o.hostReqs < 0 || o.scanLimit < 1 || o.maxMounts < 1 || o.maxAttach < 1 {
		return errors.New("--host-requests wants 0 or more, --scan-limit, --max-mounts and --max-attachments 1 or more")
	}
	switch o.prefetch {
	case content.PrefetchNone, content.PrefetchDir, content.PrefetchAll, content.PrefetchAuto:
	default:
		return fmt.Errorf("--prefetch %q: want none, dir, all or auto", o.prefetch)
	}
	if err := o.layout.Validate(); err != nil {
		return err
	}
	if _, err := lazy.ParseAllow(o.lazyAllow); err != nil {
		return fmt.Errorf("--lazy-allow %w", err)
	}
	if err := o.search.Validate(); err != nil {
		return err
	}
	if o.socket == "" {
		return errors.New("--socket: no default without XDG_RUNTIME_DIR; pass a path")
	}
	if o.stateDir == "" {
		return errors.New("--state-dir: no default (set HOME or XDG_STATE_HOME); pass a directory")
	}
	if (o.csiEndpoint == "") != (o.nodeID == "") {
		return errors.New("--csi-endpoint and --node-id go together")
	}
	if o.socketGroup != "" {
		if o.socketGID, err = daemon.LookupGroup(o.socketGroup); err != nil {
			return fmt.Errorf("--socket-group %q: %w", o.socketGroup, err)
		}
	}
	for _, p := range []*string{&o.dockerSocket, &o.socket, &o.stateDir, &o.policyFile, &o.logFile, &o.cacheDir, &o.conn.TokenFile, &o.redisPwFile} {
		if *p != "" {
			if *p, err = filepath.Abs(*p); err != nil {
				return err
			}
		}
	}
	// the token is checked once here (and read by each collection); the
	// names of collections come with each attach
	probe := o.conn
	if err := probe.ValidateServer(); err != nil {
		return err
	}
	o.conn.Timeout = probe.Timeout
	return nil
}

// lazyPrefixes is --lazy-allow as the lazy client takes it (validate
// has checked it): nil allows every http(s) URL, an empty list none.
func (o *options) lazyPrefixes() []string {
	p, _ := lazy.ParseAllow(o.lazyAllow)
	return p
}

// memoryBudget is --memory in bytes: a size of at least 4MiB, or auto (a
// quarter of what machine says the process may use, at least 64MiB).
func memoryBudget(flag string, machine func() (int64, error)) (int64, error) {
	const least = 4 << 20
	if strings.TrimSpace(flag) == "auto" {
		m, err := machine()
		if err != nil {
			return 0, fmt.Errorf("--memory auto: the host's memory: %w (give a size, like 1GiB)", err)
		}
		return max(m/4, 64<<20), nil
	}
	n, err := cli.ParseSize(flag)
	if err != nil {
		return 0, fmt.Errorf("--memory: %w (or auto)", err)
	}
	if n < least {
		return 0, fmt.Errorf("--memory %s is %d bytes: want at least 4MiB", flag, n)
	}
	return n, nil
}
