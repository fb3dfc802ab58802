package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/chromafs/chromafs/chroma"
	ingestpkg "github.com/chromafs/chromafs/ingest"
	"github.com/chromafs/chromafs/internal/corpus"
)

const grepCmd = "grep -rc chromafs . >/dev/null"

// grepScript runs grepCmd, taking its exit status 1 (no line matched, as
// in a docs repository that never names chromafs) as success.
const grepScript = grepCmd + "; [ $? -le 1 ]"

var walks = []string{"find . -type f | wc -l >/dev/null", "ls -lR >/dev/null", "du -sb . >/dev/null"}

// largeSizes adds a few big pages (100 KiB - 5 MiB), one per 250 pages.
func largeSizes(n int) []int64 {
	sizes := []int64{100 << 10, 300 << 10, 1 << 20, 5 << 20}
	var out []int64
	for i := 0; i < n/250; i++ {
		out = append(out, sizes[i%len(sizes)])
	}
	return out
}

func ingest(c *config, collection, src string, extra ...string) (time.Duration, error) {
	start := time.Now()
	args := append([]string{"--quiet", "--chroma-url", c.url, "--collection", collection}, extra...)
	out, err := exec.Command(filepath.Join(c.bin, "chromafs-ingest"), append(args, src)...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("ingest: %v: %s", err, out)
	}
	logf("%s", out)
	return time.Since(start), nil
}

// sizeCorpus is one corpus of benchSize, generated and ingested, and what
// its figures share.
type sizeCorpus struct {
	n        int  // the size asked for (--files or --tree-files)
	treeOnly bool // tiny pages, for the tree-bound figures only
	label    string
	coll     string
	dir, src string
	files    int   // files generated
	entries  int   // entries of its tree: files and directories
	bytes    int64 // their bytes
	rw       *raw
}

// kind names the generator and shape of the corpus's pages: the tree
// memory line compares corpora of one kind only.
func (s *sizeCorpus) kind() string {
	if s.treeOnly {
		return "tiny pages (--tree-files)"
	}
	return "docs-like pages (--files)"
}

// sizeFigure is one figure measured on the corpora of benchSize; only
// those of treeToo on the tree-bound corpora of --tree-files.
type sizeFigure struct {
	name    string
	treeToo bool
	measure func(c *config, r *report, s *sizeCorpus) error
}

// sizeFigures are the figures measured on the corpora of --files and
// --tree-files (benchSize), in their order.
var sizeFigures = []sizeFigure{
	{"ready", true, benchReady},
	{"walk", true, func(c *config, r *report, s *sizeCorpus) error { return benchWalk(c, r, s.label, s.coll, s.dir, s.src) }},
	{"grep", false, func(c *config, r *report, s *sizeCorpus) error {
		return benchGrep(c, r, s.rw, s.label, s.coll, s.dir, s.src)
	}},
	{"cat", false, func(c *config, r *report, s *sizeCorpus) error {
		if c.corpus != "" {
			logf("%s: the cold cat figure reads a generated corpus's page: not measured on --corpus", s.label)
			return nil
		}
		return benchCat(c, r, s.rw, s.label, s.coll, s.dir, "guides/page-0000")
	}},
	{"accesslog", false, func(c *config, r *report, s *sizeCorpus) error { return benchAccessLog(c, r, s.label, s.coll, s.dir) }},
	{"session", false, func(c *config, r *report, s *sizeCorpus) error {
		return benchSession(c, r, s.label, s.coll, s.dir, s.src, s.bytes)
	}},
	{"fullcache", false, func(c *config, r *report, s *sizeCorpus) error {
		return benchFullCache(c, r, s.label, s.coll, s.dir, s.bytes)
	}},
	{"refresh", false, func(c *config, r *report, s *sizeCorpus) error { // last: it edits the source
		if s.n < 10000 {
			return nil
		}
		return benchRefresh(c, r, s.label, s.coll, s.dir, s.src)
	}},
}

// sizeFigureNames are the names of sizeFigures.
func sizeFigureNames() []string {
	var names []string
	for _, f := range sizeFigures {
		names = append(names, f.name)
	}
	return names
}

// benchSizes measures the size figures on a corpus of each --files size,
// then (the tree-bound ones) on one of each --tree-files size.
func benchSizes(c *config, r *report) error {
	if c.corpus != "" {
		return benchSize(c, r, 0, false)
	}
	for _, n := range c.files {
		if err := benchSize(c, r, n, false); err != nil {
			return err
		}
	}
	for _, n := range c.treeFiles {
		if err := benchSize(c, r, n, true); err != nil {
			return err
		}
	}
	return nil
}

// benchSize measures the wanted size figures on a new corpus of n pages;
// treeOnly: tiny pages, and the tree-bound figures only.
func benchSize(c *config, r *report, n int, treeOnly bool) error {
	s, err := newSizeCorpus(c, r, n, treeOnly)
	if err != nil {
		return err
	}
	defer s.rw.close()
	for _, f := range sizeFigures {
		if (f.treeToo || !treeOnly) && c.wants(f.name) {
			if err := f.measure(c, r, s); err != nil {
				return err
			}
		}
	}
	return nil
}

// newSizeCorpus generates a corpus of n pages, ingests it into a new
// collection, notes its size and ingest time, and opens the raw client on
// it.
func newSizeCorpus(c *config, r *report, n int, treeOnly bool) (*sizeCorpus, error) {
	name := fmt.Sprintf("%d", n)
	if treeOnly { // a size may be in --files and --tree-files both
		name = fmt.Sprintf("tiny-%d", n)
	}
	s := &sizeCorpus{n: n, treeOnly: treeOnly, dir: filepath.Join(c.work, "n"+name)}
	s.src = filepath.Join(s.dir, "src")
	spec := corpus.Spec{Files: n, PerDir: 10, MaxDepth: 5, Seed: uint64(n)}
	if treeOnly {
		spec.MinSize, spec.MaxSize = 100, 300
	} else {
		spec.Large = largeSizes(n)
	}
	var st corpus.Stats
	var err error
	if c.corpus != "" {
		s.dir = filepath.Join(c.work, "docs")
		s.src = filepath.Join(s.dir, "src")
		logf("copying %s", filepath.Base(c.corpus))
		st, err = corpus.Copy(s.src, c.corpus, ingestpkg.VCSDir)
		name = "docs"
	} else {
		if err := os.MkdirAll(s.src, 0o755); err != nil {
			return nil, err
		}
		logf("generating %d files", n)
		st, err = corpus.Generate(s.src, spec)
	}
	if err != nil {
		return nil, err
	}
	s.files, s.entries, s.bytes = st.Files, st.Files+st.Dirs, st.Bytes
	s.coll = fmt.Sprintf("bench-%s-%d", name, time.Now().Unix())
	took, err := ingest(c, s.coll, s.src)
	if err != nil {
		return nil, err
	}
	s.label = fmt.Sprintf("%d files", st.Files)
	switch {
	case c.corpus != "":
		s.label = fmt.Sprintf("%d files of docs", st.Files)
	case treeOnly:
		s.label = fmt.Sprintf("%d tiny files", st.Files)
	}
	r.note("%s: %.1f MiB, ingested in %s (%.0f files/s)", s.label, float64(st.Bytes)/(1<<20), took.Round(time.Millisecond), float64(st.Files)/took.Seconds())
	if s.rw, err = mustRaw(context.Background(), c, s.coll); err != nil {
		return nil, err
	}
	return s, nil
}

// benchReady measures mount-ready against materializing the corpus with
// the raw client, and the settled RSS of the mount (empty cache): medians
// of --reps mounts.
func benchReady(c *config, r *report, s *sizeCorpus) error {
	logf("%s: mount-ready", s.label)
	var readies []time.Duration
	var rsss []int64
	for i := 0; i < c.reps; i++ {
		d, ready, err := mountDaemon(c, s.coll, filepath.Join(s.dir, "mnt-ready"))
		if err != nil {
			return err
		}
		rss := d.settledRSS() // the daemon frees the tree's load garbage after answering
		d.unmount()
		if rss < 0 {
			return fmt.Errorf("%s: the mount's daemon was gone before its RSS was read", s.label)
		}
		readies = append(readies, ready)
		rsss = append(rsss, rss)
	}
	matReps, baseline := c.reps, "materialize with the raw client"
	if s.treeOnly && c.reps > 1 {
		matReps, baseline = 1, baseline+" (one run)" // materializing 100,000 pages takes minutes; one run shows the scale
	}
	mat, err := timeN(matReps, func() error {
		out := filepath.Join(s.dir, "materialized")
		os.RemoveAll(out)
		return s.rw.materialize(context.Background(), c, s.coll, out)
	})
	if err != nil {
		return err
	}
	r.ratio(s.label, "mount-ready (exec --daemon until ls of the root)", median(readies), baseline, mat, readyTarget(s.files))
	rss := med(rsss)
	r.value(s.label, "daemon RSS after mount, settled (RSS and CPU still), empty cache", mib(rss), rssTarget(s.files, rss))
	r.treeRSS(s.kind(), s.entries, rss)
	return nil
}

// benchWalk times the metadata walks on one mount against the local copy,
// both warm, and counts the Chroma requests of all of them.
func benchWalk(c *config, r *report, label, coll, dir, src string) error {
	logf("%s: metadata walk", label)
	d, _, err := mountDaemon(c, coll, filepath.Join(dir, "mnt-walk"))
	if err != nil {
		return err
	}
	defer d.unmount()
	before := d.requests()
	for _, w := range walks {
		// one untimed walk on each side: the local page cache, and the
		// kernel's entries of the mount, warm alike (its requests count)
		_ = shell(src, w)
		if err := shell(d.dir, w); err != nil {
			return err
		}
		tm, err := timeN(c.reps, func() error { return shell(d.dir, w) })
		if err != nil {
			return err
		}
		tl, err := timeN(c.reps, func() error { return shell(src, w) })
		if err != nil {
			return err
		}
		r.ratio(label, "walk (warm): "+w, tm, "same on the local copy", tl, maxRatio(2.0))
	}
	reqs := d.requests() - before
	r.value(label, "Chroma requests made by the walks (the first, cold ones included)", fmt.Sprint(reqs), pass(reqs == 0, "0"))
	return nil
}

func benchGrep(c *config, r *report, rw *raw, label, coll, dir, src string) error {
	logf("%s: cold grep -r", label)
	var colds []time.Duration
	var reqs []int64
	for i := 0; i < c.reps; i++ {
		d, _, err := mountDaemon(c, coll, filepath.Join(dir, "mnt-cold"))
		if err != nil {
			return err
		}
		before := d.requests()
		start := time.Now()
		err = shell(d.dir, grepScript)
		colds = append(colds, time.Since(start))
		reqs = append(reqs, d.requests()-before)
		d.unmount()
		if err != nil {
			return err
		}
	}
	floor, err := timeN(c.reps, func() error { _, err := rw.floor(context.Background()); return err })
	if err != nil {
		return err
	}
	r.ratio(label, fmt.Sprintf("cold `%s` (%s)", grepCmd, countOf(reqs, "request")), median(colds), "floor: raw client fetching every chunk", floor, maxRatio(2.0))

	logf("%s: warm grep -r", label)
	d, _, err := mountDaemon(c, coll, filepath.Join(dir, "mnt-warm"))
	if err != nil {
		return err
	}
	defer d.unmount()
	if err := shell(d.dir, grepScript); err != nil {
		return err
	}
	_ = shell(src, grepScript)
	tw, err := timeN(c.reps, func() error { return shell(d.dir, grepScript) })
	if err != nil {
		return err
	}
	tl, err := timeN(c.reps, func() error { return shell(src, grepScript) })
	if err != nil {
		return err
	}
	r.ratio(label, "warm `"+grepCmd+"`", tw, "same on the local copy", tl, maxRatio(1.5))
	return nil
}

// benchCat measures a cold read of one page (slug) on fresh mounts
// without prefetch, against the raw client getting that page's chunks by
// id, as the mount does.
func benchCat(c *config, r *report, rw *raw, label, coll, dir, slug string) error {
	logf("%s: cold cat", label)
	ctx := context.Background()
	e, err := rw.entry(ctx, c, coll, slug)
	if err != nil {
		return err
	}
	var cats []time.Duration
	var reqs []int64
	for i := 0; i < c.reps; i++ {
		d, _, err := mountDaemon(c, coll, filepath.Join(dir, "mnt-cat"), "--prefetch", "none")
		if err != nil {
			return err
		}
		before := d.requests()
		start := time.Now()
		_, err = os.ReadFile(filepath.Join(d.dir, e.DisplayPath(slug)))
		cats = append(cats, time.Since(start))
		reqs = append(reqs, d.requests()-before)
		d.unmount()
		if err != nil {
			return err
		}
	}
	var gets int
	tr, err := timeN(c.reps, func() (err error) { _, gets, err = rw.pageByID(ctx, slug, e); return err })
	if err != nil {
		return err
	}
	r.ratio(label, fmt.Sprintf("cold cat of one page, in-process read (%s)", countOf(reqs, "request")), median(cats),
		fmt.Sprintf("the raw client's get of that page by id (%d %s)", gets, plural(int64(gets), "get")), tr, catTarget(reqs))
	return nil
}

// benchFullCache measures what a full cache adds to the daemon's RSS: per
// repetition, the settled RSS of a mount whose cache --prefetch all filled
// and of a mount with the same --cache-size that read nothing, both
// settled the same way (harness.SettledRSS); the repetition of the median
// growth is shown.
func benchFullCache(c *config, r *report, label, coll, dir string, corpusBytes int64) error {
	cacheMiB := min(int64(c.cacheMiB), corpusBytes/2>>20)
	if cacheMiB < 4 {
		return nil
	}
	logf("%s: full cache (%d MiB)", label, cacheMiB)
	var reps []fullCacheRep
	for i := 0; i < c.reps; i++ {
		rep, err := fullCacheOnce(c, coll, filepath.Join(dir, "mnt-full"), cacheMiB<<20)
		if err != nil {
			return err
		}
		reps = append(reps, rep)
	}
	m := reps[medianIndex(reps, func(x fullCacheRep) float64 { return x.growth(cacheMiB << 20) })]
	value, target := fullCacheFigure(m.full, m.empty, cacheMiB<<20)
	r.value(label, fmt.Sprintf("daemon RSS with a full %d MiB cache (cache holds %s): what the full cache added to the RSS of an empty mount with the same flags, ÷ --cache-size (both settled; median of %d; lower is better)",
		cacheMiB, mib(m.cached), len(reps)), value, target)
	return nil
}

// fullCacheRep is one repetition of the full-cache figure: the settled RSS
// of an empty mount and of a full one, and what the full one's cache held.
type fullCacheRep struct{ empty, full, cached int64 }

func (x fullCacheRep) growth(cacheBytes int64) float64 {
	return float64(x.full-x.empty) / float64(cacheBytes)
}

// fullCacheOnce mounts the collection with a cache of cacheBytes and
// --prefetch none, reads its settled RSS and unmounts; then mounts it with
// --prefetch all, waits until the cache is nearly full or stops growing,
// and reads its settled RSS.
func fullCacheOnce(c *config, coll, mnt string, cacheBytes int64) (fullCacheRep, error) {
	var rep fullCacheRep
	size := fmt.Sprintf("%dMiB", cacheBytes>>20)
	for _, prefetch := range []string{"none", "all"} {
		d, _, err := mountDaemon(c, coll, mnt, "--prefetch", prefetch, "--cache-size", size)
		if err != nil {
			return rep, err
		}
		if prefetch == "all" {
			waitCacheFull(d, cacheBytes)
		}
		rss := d.settledRSS()
		if prefetch == "all" {
			rep.full, rep.cached = rss, d.metric("chromafs_cache_bytes")
		} else {
			rep.empty = rss
		}
		d.unmount()
		if rss < 0 {
			return rep, fmt.Errorf("full cache: the --prefetch %s mount's daemon was gone before its RSS was read", prefetch)
		}
	}
	return rep, nil
}

// waitCacheFull waits until d's cache holds 95% of cacheBytes, or has not
// grown for 2 s (5 minutes at most).
func waitCacheFull(d *daemon, cacheBytes int64) {
	deadline := time.Now().Add(5 * time.Minute)
	for last, still := int64(-1), 0; time.Now().Before(deadline) && still < 10; {
		cur := d.metric("chromafs_cache_bytes")
		if cur >= cacheBytes*95/100 {
			return
		}
		if cur == last {
			still++
		} else {
			still = 0
		}
		last = cur
		time.Sleep(200 * time.Millisecond)
	}
}

// fullCacheFigure is the full-cache row's value and target: what a full
// cache added to the daemon's settled RSS over an empty mount's, as a
// ratio to the cache size (lower is better), within 1.25x: the RSS may be
// at most the empty mount's plus 1.25x --cache-size.
func fullCacheFigure(full, empty, cacheBytes int64) (string, string) {
	growth := float64(full-empty) / float64(cacheBytes)
	return fmt.Sprintf("%.2fx (settled RSS %s empty → %s full: +%s)", growth, mib(empty), mib(full), mib(full-empty)),
		pass(growth <= 1.25, "≤ 1.25x (RSS ≤ empty + 1.25x cache-size)")
}

func benchBig(c *config, r *report) error {
	ctx := context.Background()
	dir := filepath.Join(c.work, "big")
	src := filepath.Join(dir, "src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	logf("generating a %d MiB page", c.bigMiB)
	if _, err := corpus.Generate(src, corpus.Spec{Large: []int64{int64(c.bigMiB) << 20}, Seed: 99}); err != nil {
		return err
	}
	coll := fmt.Sprintf("bench-big-%d", time.Now().Unix())
	if _, err := ingest(c, coll, src, "--chunk-size", "16384"); err != nil {
		return err
	}
	rw, err := mustRaw(ctx, c, coll)
	if err != nil {
		return err
	}
	defer rw.close()
	label := fmt.Sprintf("%d MiB page", c.bigMiB)
	read, err := coldRead(c, coll, filepath.Join(dir, "mnt"), "large/big-0.md")
	if err != nil {
		return err
	}
	e, err := rw.entry(ctx, c, coll, "large/big-0")
	if err != nil {
		return err
	}
	var gets int
	tr, err := timeN(c.reps, func() (err error) { _, gets, err = rw.pageByID(ctx, "large/big-0", e); return err })
	if err != nil {
		return err
	}
	mibs := func(d time.Duration) float64 { return float64(c.bigMiB) / d.Seconds() }
	m, b := mibs(read), mibs(tr)
	r.value(label, fmt.Sprintf("sequential read, cold (MiB/s), against the raw client's gets of its chunks by id (%d gets of up to %d, %d in flight)", gets, chroma.MaxGet, rawConcurrency),
		fmt.Sprintf("%.1f vs %.1f raw client = %.2fx", m, b, m/b), pass(m >= 0.5*b, "≥ 0.5x raw client"))
	return nil
}

func readAll(p string) error {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.CopyBuffer(io.Discard, f, make([]byte, 1<<20))
	return err
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
