// Command chromafs-bench measures chromafs against its baselines in one
// run: local disk and the raw Chroma client (chroma-go). scripts/bench.sh
// is its front; docs/BENCHMARKS.md shows a run. It starts its Chroma
// server, builds and mounts the commands through internal/harness, as the
// integration tests do. Every figure is a median of --reps runs (a row
// measured otherwise says so: one run, or a median over something else),
// printed next to its baseline, measured the same way, as a ratio; absolute
// times are not comparable across runs on a shared machine, ratios
// measured in the same run are.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/chromafs/chromafs/internal/harness"
)

type config struct {
	files     []int
	treeFiles []int
	reps      int
	bigMiB    int
	binaryMiB int
	// foreignChunks is the size of the collection of another tool.
	foreignChunks int
	// shapePages is the size of the trees of the shapes figure, and
	// shapeNames the shapes measured.
	shapePages int
	shapeNames string
	// bigShapePages is the size of the big shape (with a directory of a
	// tenth of them).
	bigShapePages int
	cacheMiB      int
	url           string
	rtt           time.Duration   // Chroma's distance (--rtt): 0 is loopback
	rawURL        string          // the server itself, behind the network proxy url is with --rtt
	network       harness.Network // what the network proxy adds (zero without --rtt)
	root          string
	out           string
	smoke         bool
	session       []string        // extra chromafs-mount flags for the agent-session figures
	corpus        string          // a directory of docs measured instead of generated corpora (--corpus)
	only          map[string]bool // figures to measure; empty = all
	work          string
	bin           string
}

func main() {
	var c config
	var files, treeFiles string
	flag.StringVar(&files, "files", "1000,10000", "corpus sizes measured for every figure")
	flag.StringVar(&treeFiles, "tree-files", "10000,100000", "sizes measured for the tree-bound figures only (tiny pages); empty for none; two or\nmore give the tree memory per entry of like corpora")
	flag.IntVar(&c.reps, "reps", 5, "repetitions per figure (median reported)")
	flag.IntVar(&c.bigMiB, "big-mib", 100, "size of the page for the sequential-read figure; 0 skips it")
	flag.IntVar(&c.binaryMiB, "binary-mib", 16, "size of the binary and text pages compared by the binary figure; 0 skips it")
	flag.IntVar(&c.foreignChunks, "foreign-chunks", 50000, "chunks of the LangChain-layout collection for the index figures; 0 skips them")
	flag.StringVar(&c.shapeNames, "shapes", "flat,wide,deep,big", "tree shapes of the shapes figure (flat, wide, deep; big: wide plus one directory\nof a tenth of the pages)")
	flag.IntVar(&c.shapePages, "shape-pages", 100000, "pages of the flat, wide and deep trees of the shapes figure; 0 skips the figure")
	flag.IntVar(&c.bigShapePages, "big-shape-pages", 1000000, "pages of the big tree of the shapes figure")
	flag.IntVar(&c.cacheMiB, "cache-mib", 64, "--cache-size for the full-cache memory figure")
	flag.StringVar(&c.url, "chroma-url", "", "Chroma server to use (default: start one with scripts/chroma-server.sh)")
	flag.DurationVar(&c.rtt, "rtt", 0, "put Chroma this far away (e.g. 25ms, 80ms, as Chroma Cloud is): every request to it,\ningest's too, through a proxy that adds a round trip, two more to each new connection\n(TCP and TLS handshakes), caps the link at 1 Gbit/s and refuses what Chroma Cloud refuses")
	flag.StringVar(&c.out, "out", "", "also write the markdown report to this file")
	flag.StringVar(&c.corpus, "corpus", "", "measure the figures of --files on a copy of this directory (a docs repository's\ncheckout: its version-control directories left out, as ingest leaves them) in place of\ngenerated pages (--files and --tree-files are then ignored); the agent session picks its\npages among its .md and .mdx files, and the cold cat and refresh figures are left out")
	var session string
	flag.StringVar(&session, "session-mount-flags", "", "extra chromafs-mount flags for the agent-session figures (e.g. \"--prefetch all\")")
	var only string
	flag.StringVar(&only, "only", "", "measure only these figures (comma list of ready,walk,grep,cat,accesslog,session,fullcache,refresh,big,binary,foreign,shapes,fleet,sites,daemon,warm,search); default all; daemon includes warm")
	flag.BoolVar(&c.smoke, "smoke", false, "smoke run: 1,000 files (and 500 and 2,000 tiny ones), 1 repetition, no big page, no targets enforced")
	flag.Usage = func() {
		fmt.Fprint(flag.CommandLine.Output(), `chromafs-bench measures chromafs against local disk and the raw Chroma client
on a real Chroma server and real mounts, and prints a markdown report (docs/BENCHMARKS.md).

usage: scripts/bench.sh [flags]    (or: go run ./cmd/chromafs-bench [flags])

`)
		flag.PrintDefaults()
	}
	flag.Parse()
	if c.smoke {
		files, treeFiles, c.reps, c.bigMiB, c.binaryMiB, c.foreignChunks, c.shapePages, c.bigShapePages = "1000", "500,2000", 1, 0, 2, 600, 2000, 5000
	}
	c.files, c.treeFiles = ints(files), ints(treeFiles)
	c.session = strings.Fields(session)
	c.only = map[string]bool{}
	for _, f := range strings.Split(only, ",") {
		if f = strings.TrimSpace(f); f != "" {
			c.only[f] = true
		}
	}
	c.root = harness.RepoRoot()
	if err := run(&c); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

// wants reports whether the figure is measured in this run.
func (c *config) wants(figure string) bool { return len(c.only) == 0 || c.only[figure] }

// wantsAny reports whether any of the figures is measured in this run.
func (c *config) wantsAny(figures ...string) bool {
	for _, f := range figures {
		if c.wants(f) {
			return true
		}
	}
	return false
}

func ints(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}

// run builds the commands, starts a Chroma server unless --chroma-url
// names one, measures the figures of this run and writes the report.
func run(c *config) error {
	var err error
	if c.work, err = os.MkdirTemp("", "chromafs-bench-"); err != nil {
		return err
	}
	defer os.RemoveAll(c.work)
	c.bin = filepath.Join(c.work, "bin")
	if err := harness.Build(c.root, c.bin, false, "./cmd/chromafs-mount", "./cmd/chromafs-mount-serve", "./cmd/chromafs-ingest"); err != nil {
		return err
	}
	if c.url == "" {
		s, err := harness.StartServer(c.root, filepath.Join(c.work, "chroma"), os.Stderr)
		if err != nil {
			return err
		}
		defer s.Stop()
		c.url = s.URL
	}
	var network *harness.CloudProxy
	c.rawURL = c.url
	if c.rtt > 0 { // everything, ingest too, goes through the network
		c.network = harness.WithRTT(c.rtt)
		p, err := harness.StartCloudProxy(c.url, c.network)
		if err != nil {
			return err
		}
		defer p.Close()
		c.url, network = p.URL, p
		logf("Chroma is %v away: every request through a proxy adding a round trip, two more to each new connection, 1 Gbit/s", c.rtt)
	}
	r := newReport(c)
	if network != nil {
		r.note("Chroma %v away (--rtt): every request, ingest's too, through harness.CloudProxy: a round trip each, two more for each new connection, a 1 Gbit/s link, Chroma Cloud's quotas", c.rtt)
	}
	// a group that fails is noted and the others still run: the figures
	// measured are written either way (a full run takes most of an hour)
	merr := measure(c, r)
	if network != nil {
		r.note("through the network proxy, the whole run but the daemon figures (their own proxy, the same network): %d requests on %d connections, %d Chroma Cloud would refuse", network.Requests.Load(), network.Conns.Load(), network.Violations())
	}
	if err := r.write(c); err != nil {
		return errors.Join(merr, err)
	}
	return merr
}

// measure measures the groups of figures of this run into r, in the
// report's order: the size figures, daemon, search, big, binary, shapes,
// foreign, fleet, sites. A group that fails is noted in the report, and the
// others run; the errors are returned together.
func measure(c *config, r *report) error {
	groups := []struct {
		on    bool
		bench func(*config, *report) error
	}{
		{c.wantsAny(sizeFigureNames()...), benchSizes}, // their corpora are generated and ingested only for them
		{c.wantsAny("daemon", "warm"), benchDaemon},
		{c.wants("search"), benchSearch},
		{c.bigMiB > 0 && c.wants("big"), benchBig},
		{c.binaryMiB > 0 && c.wants("binary"), benchBinary},
		{c.shapePages > 0 && c.wants("shapes"), benchShapes},
		{c.foreignChunks > 0 && c.wants("foreign"), benchForeign},
		{!c.smoke && c.wants("fleet"), benchFleet},
		{!c.smoke && c.wants("sites"), benchSites},
	}
	var errs []error
	for _, g := range groups {
		if !g.on {
			continue
		}
		if err := g.bench(c, r); err != nil {
			logf("FAILED: %v", err)
			r.note("FAILED, its figures are missing: %v", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}
