package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/tree"
)

// shape is a tree of pages with no content behind them: mount-ready,
// restart and metadata walks depend on the tree alone, so its record is
// written directly (ingesting 100,000 files is not what is measured).
type shape struct {
	name  string
	paths func(n int) []string
}

var shapes = []shape{
	{"flat", func(n int) []string { // one directory of n pages
		return gen(n, func(i int) string { return fmt.Sprintf("all/page-%06d.md", i) })
	}},
	{"wide", func(n int) []string { // 37 sections x 271 topics x ~10 pages
		return gen(n, func(i int) string {
			return fmt.Sprintf("section-%02d/topic-%03d/page-%02d.md", i%37, (i/37)%271, i/(37*271))
		})
	}},
	{"big", func(n int) []string { // wide, and one directory of a tenth of the pages
		return gen(n, func(i int) string {
			if i%10 == 9 {
				return fmt.Sprintf("reference/all/page-%07d.md", i/10)
			}
			return fmt.Sprintf("section-%02d/topic-%03d/page-%02d.md", i%37, (i/37)%271, i/(37*271))
		})
	}},
	{"deep", func(n int) []string { // 16 chains of 24 nested levels, pages at every level
		return gen(n, func(i int) string {
			parts := []string{fmt.Sprintf("b%02d", i%16)}
			for d := 1; d <= (i/16)%24; d++ {
				parts = append(parts, fmt.Sprintf("level-%02d", d))
			}
			return strings.Join(parts, "/") + fmt.Sprintf("/page-%06d.md", i)
		})
	}},
}

func gen(n int, f func(int) string) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// benchShapes measures each shape at c.shapePages pages: cold mount-ready,
// warm restart (the same host cache: the tree snapshot), settled RSS and
// bytes per page, cold and warm find, and ls of the largest directory
// against the same directory on local disk.
func benchShapes(c *config, r *report) error {
	for _, s := range shapes {
		if !strings.Contains(","+c.shapeNames+",", ","+s.name+",") {
			continue
		}
		n := c.shapePages
		if s.name == "big" {
			n = c.bigShapePages
		}
		if err := benchShape(c, r, s, n); err != nil {
			return err
		}
	}
	return nil
}

// shapeRun is what one repetition of a shape measured.
type shapeRun struct {
	cold, warm, lsCold, lsWarm, findCold, findWarm time.Duration
	rss, rssFind                                   int64
}

func benchShape(c *config, r *report, s shape, n int) error {
	coll := fmt.Sprintf("bench-shape-%s-%d", s.name, time.Now().Unix())
	logf("%s tree of %d pages", s.name, n)
	paths := s.paths(n)
	if err := writeShape(c, coll, paths); err != nil {
		return err
	}
	largest, names := largestDir(paths)
	local, err := localDir(c, s.name, names)
	if err != nil {
		return err
	}
	lsCmd := "ls " + largest + " | wc -l"
	lsLocal, err := timeN(c.reps, func() error { return shell(local, "ls . | wc -l") })
	if err != nil {
		return err
	}
	var runs []shapeRun
	for i := 0; i < c.reps; i++ {
		run, err := shapeOnce(c, coll, filepath.Join(c.work, "shapes", s.name, "mnt"), lsCmd)
		if err != nil {
			return err
		}
		runs = append(runs, run)
	}
	pick := func(f func(shapeRun) time.Duration) time.Duration { return medianOf(runs, f) }
	cold, warm := pick(func(x shapeRun) time.Duration { return x.cold }), pick(func(x shapeRun) time.Duration { return x.warm })
	label := fmt.Sprintf("%s, %d pages", s.name, n)
	rss, rssFind := medianOfInt(runs, func(x shapeRun) int64 { return x.rss }), medianOfInt(runs, func(x shapeRun) int64 { return x.rssFind })
	coldT, warmT, rssT := time.Second, 250*time.Millisecond, int64(200<<20)
	if n >= 1_000_000 {
		coldT, warmT, rssT = 8*time.Second, 2*time.Second, 1<<30
	}
	r.value(label, "mount-ready, cold / warm restart (tree snapshot)", fmt.Sprintf("%s / %s", dur(cold), dur(warm)),
		pass(cold <= coldT && warm <= warmT, fmt.Sprintf("≤ %s / ≤ %s", dur(coldT), dur(warmT))))
	r.value(label, "settled RSS (bytes per page); settled again after a cold find", fmt.Sprintf("%s (%d); %s", mib(rss), rss/int64(n), mib(rssFind)),
		pass(rss <= rssT, "≤ "+mib(rssT)+" settled"))
	r.value(label, "`find . | wc -l`, cold / warm", fmt.Sprintf("%s / %s", dur(pick(func(x shapeRun) time.Duration { return x.findCold })),
		dur(pick(func(x shapeRun) time.Duration { return x.findWarm }))), "—")
	lsCold, lsWarm := pick(func(x shapeRun) time.Duration { return x.lsCold }), pick(func(x shapeRun) time.Duration { return x.lsWarm })
	r.value(label, fmt.Sprintf("`ls` of the largest directory (%d entries), cold / warm; local disk", len(names)),
		fmt.Sprintf("%s / %s; %s (%.2fx / %.2fx)", dur(lsCold), dur(lsWarm), dur(lsLocal), lsCold.Seconds()/lsLocal.Seconds(), lsWarm.Seconds()/lsLocal.Seconds()),
		lsTarget(n, len(names), lsCold, lsLocal))
	return nil
}

// lsTarget judges ls of a 100,000-entry directory of a 1,000,000-page tree
// (≤ 2x local disk, cold); other sizes are reported only.
func lsTarget(pages, entries int, ls, local time.Duration) string {
	if pages < 1_000_000 || entries < 100_000 {
		return "—"
	}
	return pass(ls.Seconds() <= 2*local.Seconds(), "≤ 2x local disk, cold")
}

// shapeOnce mounts the tree cold (an empty host cache), measures, and
// mounts it again warm.
func shapeOnce(c *config, coll, mnt, lsCmd string) (shapeRun, error) {
	var run shapeRun
	cache, err := os.MkdirTemp(c.work, "shape-cache-")
	if err != nil {
		return run, err
	}
	d, cold, err := mountDaemon(c, coll, mnt, "--cache-dir", cache, "--refresh", "0")
	if err != nil {
		return run, err
	}
	run.cold = cold
	run.rss = d.settledRSS() // the daemon writes the snapshot, returns its load garbage
	steps := []struct {
		took   *time.Duration
		script string
	}{{&run.lsCold, lsCmd}, {&run.findCold, "find . | wc -l"}, {&run.findWarm, "find . | wc -l"}, {&run.lsWarm, lsCmd}}
	for _, st := range steps {
		start := time.Now()
		if err = shell(d.dir, st.script); err != nil {
			break
		}
		*st.took = time.Since(start)
	}
	if err == nil {
		run.rssFind = d.settledRSS() // as run.rss was read: the find's garbage returned
	}
	d.unmount()
	if err != nil {
		return run, err
	}
	// unmount waited for the daemon's exit: its host-tier writes are done
	d, run.warm, err = mountDaemon(c, coll, mnt, "--cache-dir", cache, "--refresh", "0")
	if err != nil {
		return run, err
	}
	d.unmount()
	return run, os.RemoveAll(cache)
}

// largestDir returns the directory holding the most pages and their names.
func largestDir(paths []string) (string, []string) {
	byDir := map[string][]string{}
	for _, p := range paths {
		dir, name := filepath.Split(p)
		byDir[dir] = append(byDir[dir], name)
	}
	best := ""
	for dir, names := range byDir {
		if len(names) > len(byDir[best]) || len(names) == len(byDir[best]) && dir < best {
			best = dir
		}
	}
	if best == "" {
		return ".", byDir[best]
	}
	return strings.TrimSuffix(best, "/"), byDir[best]
}

// localDir makes the same directory on local disk: empty files of the
// same names (ls reads names, not content).
func localDir(c *config, shape string, names []string) (string, error) {
	dir := filepath.Join(c.work, "shapes", shape, "local")
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, name := range names {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

func writeShape(c *config, coll string, paths []string) error {
	entries := make(map[string]tree.Entry, len(paths))
	for i, p := range paths {
		size := int64(100 + i%900)
		sum := sha256.Sum256([]byte(p))
		entries[strings.TrimSuffix(p, ".md")] = tree.Entry{IsPublic: true, Path: p, Size: &size, Mtime: 1790000000 + int64(i),
			MtimeNsec: int64(i) * 7919 % 1e9, Chunks: []int64{size}, SHA256: hex.EncodeToString(sum[:])}
	}
	raw, err := tree.Encode(entries)
	if err != nil {
		return err
	}
	doc, err := tree.Wrap(raw)
	if err != nil {
		return err
	}
	cfg := chroma.Config{URL: c.url, Collection: coll, Tenant: chroma.DefaultTenant, Database: chroma.DefaultDatabase, Timeout: 5 * time.Minute}
	if err := cfg.Validate(); err != nil {
		return err
	}
	st, err := chroma.OpenOrCreate(context.Background(), cfg, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	return st.WriteTree(context.Background(), doc)
}
