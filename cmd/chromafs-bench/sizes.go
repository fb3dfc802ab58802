package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/chromafs/chromafs/internal/corpus"
)

const grepCmd = "grep -rc chromafs . >/dev/null"

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
	bytes    int64 // their bytes
	rw       *raw
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
	{"ready", true, func(c *config, r *report, s *sizeCorpus) error {
		return benchReady(c, r, s.rw, s.label, s.coll, s.dir, s.files, s.treeOnly)
	}},
	{"walk", true, func(c *config, r *report, s *sizeCorpus) error { return benchWalk(c, r, s.label, s.coll, s.dir, s.src) }},
	{"grep", false, func(c *config, r *report, s *sizeCorpus) error {
		return benchGrep(c, r, s.rw, s.label, s.coll, s.dir, s.src)
	}},
	{"cat", false, func(c *config, r *report, s *sizeCorpus) error { return benchCat(c, r, s.rw, s.label, s.coll, s.dir) }},
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
	s := &sizeCorpus{n: n, treeOnly: treeOnly, dir: filepath.Join(c.work, fmt.Sprintf("n%d", n))}
	s.src = filepath.Join(s.dir, "src")
	spec := corpus.Spec{Files: n, PerDir: 10, MaxDepth: 5, Seed: uint64(n)}
	if treeOnly {
		spec.MinSize, spec.MaxSize = 100, 300
	} else {
		spec.Large = largeSizes(n)
	}
	if err := os.MkdirAll(s.src, 0o755); err != nil {
		return nil, err
	}
	logf("generating %d files", n)
	st, err := corpus.Generate(s.src, spec)
	if err != nil {
		return nil, err
	}
	s.files, s.bytes = st.Files, st.Bytes
	s.coll = fmt.Sprintf("bench-%d-%d", n, time.Now().Unix())
	took, err := ingest(c, s.coll, s.src)
	if err != nil {
		return nil, err
	}
	s.label = fmt.Sprintf("%d files", st.Files)
	r.note("%s: %.1f MiB, ingested in %s (%.0f files/s)", s.label, float64(st.Bytes)/(1<<20), took.Round(time.Millisecond), float64(st.Files)/took.Seconds())
	if s.rw, err = mustRaw(context.Background(), c, s.coll); err != nil {
		return nil, err
	}
	return s, nil
}

func benchReady(c *config, r *report, rw *raw, label, coll, dir string, files int, treeOnly bool) error {
	logf("%s: mount-ready", label)
	var readies []time.Duration
	var rss int64
	for i := 0; i < c.reps; i++ {
		d, ready, err := mountDaemon(c, coll, filepath.Join(dir, "mnt-ready"))
		if err != nil {
			return err
		}
		time.Sleep(time.Second) // let the daemon settle: it frees the tree's load garbage after answering
		rss = d.rss()
		d.unmount()
		readies = append(readies, ready)
	}
	matReps := c.reps
	if treeOnly {
		matReps = 1 // materializing 100,000 pages takes minutes; one run shows the scale
	}
	mat, err := timeN(matReps, func() error {
		out := filepath.Join(dir, "materialized")
		os.RemoveAll(out)
		return rw.materialize(context.Background(), c, coll, out)
	})
	if err != nil {
		return err
	}
	r.ratio(label, "mount-ready (exec --daemon until ls of the root)", median(readies), "materialize with the raw client", mat, readyTarget(files))
	r.value(label, "daemon RSS after mount (settled 1 s), empty cache", mib(rss), rssTarget(files, rss))
	r.rss[files] = rss
	return nil
}

func benchWalk(c *config, r *report, label, coll, dir, src string) error {
	logf("%s: metadata walk", label)
	d, _, err := mountDaemon(c, coll, filepath.Join(dir, "mnt-walk"))
	if err != nil {
		return err
	}
	defer d.unmount()
	before := d.requests()
	for _, w := range walks {
		_ = shell(src, w) // warm the local page cache
		tm, err := timeN(c.reps, func() error { return shell(d.dir, w) })
		if err != nil {
			return err
		}
		tl, err := timeN(c.reps, func() error { return shell(src, w) })
		if err != nil {
			return err
		}
		r.ratio(label, "walk: "+w, tm, "same on the local copy", tl, maxRatio(2.0))
	}
	reqs := d.requests() - before
	r.value(label, "Chroma requests made by the walks", fmt.Sprint(reqs), pass(reqs == 0, "0"))
	return nil
}

func benchGrep(c *config, r *report, rw *raw, label, coll, dir, src string) error {
	logf("%s: cold grep -r", label)
	var colds []time.Duration
	var reqs int64
	for i := 0; i < c.reps; i++ {
		d, _, err := mountDaemon(c, coll, filepath.Join(dir, "mnt-cold"))
		if err != nil {
			return err
		}
		before := d.requests()
		start := time.Now()
		err = shell(d.dir, grepCmd)
		colds = append(colds, time.Since(start))
		reqs = d.requests() - before
		d.unmount()
		if err != nil {
			return err
		}
	}
	floor, err := timeN(c.reps, func() error { _, err := rw.floor(context.Background()); return err })
	if err != nil {
		return err
	}
	r.ratio(label, fmt.Sprintf("cold `%s` (%d requests)", grepCmd, reqs), median(colds), "floor: raw client fetching every chunk", floor, maxRatio(2.0))

	logf("%s: warm grep -r", label)
	d, _, err := mountDaemon(c, coll, filepath.Join(dir, "mnt-warm"))
	if err != nil {
		return err
	}
	defer d.unmount()
	if err := shell(d.dir, grepCmd); err != nil {
		return err
	}
	_ = shell(src, grepCmd)
	tw, err := timeN(c.reps, func() error { return shell(d.dir, grepCmd) })
	if err != nil {
		return err
	}
	tl, err := timeN(c.reps, func() error { return shell(src, grepCmd) })
	if err != nil {
		return err
	}
	r.ratio(label, "warm `"+grepCmd+"`", tw, "same on the local copy", tl, maxRatio(1.5))
	return nil
}

func benchCat(c *config, r *report, rw *raw, label, coll, dir string) error {
	logf("%s: cold cat", label)
	const rel, slug = "guides/page-0000.mdx", "guides/page-0000"
	var cats []time.Duration
	var reqs int64
	for i := 0; i < c.reps; i++ {
		d, _, err := mountDaemon(c, coll, filepath.Join(dir, "mnt-cat"), "--prefetch", "none")
		if err != nil {
			return err
		}
		before := d.requests()
		start := time.Now()
		_, err = os.ReadFile(filepath.Join(d.dir, rel))
		cats = append(cats, time.Since(start))
		reqs = d.requests() - before
		d.unmount()
		if err != nil {
			return err
		}
	}
	tr, err := timeN(c.reps, func() error { _, _, err := rw.page(context.Background(), slug); return err })
	if err != nil {
		return err
	}
	r.ratio(label, fmt.Sprintf("cold cat of one page, in-process read (%d request)", reqs), median(cats), "one raw client get of that page", tr, catTarget(reqs))
	return nil
}

func benchFullCache(c *config, r *report, label, coll, dir string, corpusBytes int64) error {
	cacheMiB := min(int64(c.cacheMiB), corpusBytes/2>>20)
	if cacheMiB < 4 {
		return nil
	}
	logf("%s: full cache (%d MiB)", label, cacheMiB)
	d, _, err := mountDaemon(c, coll, filepath.Join(dir, "mnt-full"), "--prefetch", "all", "--cache-size", fmt.Sprintf("%dMiB", cacheMiB))
	if err != nil {
		return err
	}
	defer d.unmount()
	empty := d.rss()
	// Wait until the cache is nearly full or stops growing.
	deadline := time.Now().Add(5 * time.Minute)
	for last, still := int64(-1), 0; time.Now().Before(deadline) && still < 10; {
		cur := d.metric("chromafs_cache_bytes")
		if cur >= cacheMiB<<20*95/100 {
			break
		}
		if cur == last {
			still++
		} else {
			still = 0
		}
		last = cur
		time.Sleep(200 * time.Millisecond)
	}
	value, target := fullCacheFigure(d.rss(), empty, cacheMiB<<20)
	r.value(label, fmt.Sprintf("daemon RSS with a full %d MiB cache (cache holds %s)", cacheMiB, mib(d.metric("chromafs_cache_bytes"))), value, target)
	return nil
}

// fullCacheFigure says what a full cache added to the daemon's RSS, as a
// ratio to the cache size (lower is better), and whether that growth is
// within 1.25x the cache size: the RSS may be at most the empty mount's
// plus 1.25x --cache-size. It returns the figure and the target cells.
func fullCacheFigure(full, empty, cacheBytes int64) (string, string) {
	growth := float64(full-empty) / float64(cacheBytes)
	return fmt.Sprintf("%s: +%s over the empty mount's %s = %.2fx the cache size", mib(full), mib(full-empty), mib(empty), growth),
		pass(growth <= 1.25, "growth ÷ cache-size ≤ 1.25x")
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
	tr, err := timeN(c.reps, func() error { _, _, err := rw.page(ctx, "large/big-0"); return err })
	if err != nil {
		return err
	}
	mibs := func(d time.Duration) float64 { return float64(c.bigMiB) / d.Seconds() }
	m, b := mibs(read), mibs(tr)
	r.value(label, "sequential read, cold (MiB/s)", fmt.Sprintf("%.1f vs %.1f raw client = %.2fx", m, b, m/b), pass(m >= 0.5*b, "≥ 0.5x raw client"))
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
