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
// bytes per page, and a cold find.
func benchShapes(c *config, r *report) error {
	for _, s := range shapes {
		if !strings.Contains(","+c.shapeNames+",", ","+s.name+",") {
			continue
		}
		if err := benchShape(c, r, s, c.shapePages); err != nil {
			return err
		}
	}
	return nil
}

func benchShape(c *config, r *report, s shape, n int) error {
	coll := fmt.Sprintf("bench-shape-%s-%d", s.name, time.Now().Unix())
	logf("%s tree of %d pages", s.name, n)
	if err := writeShape(c, coll, s.paths(n)); err != nil {
		return err
	}
	label := fmt.Sprintf("%s, %d pages", s.name, n)
	dir := filepath.Join(c.work, "shapes", s.name)
	var colds, warms, finds []time.Duration
	var rss, rssFind int64
	for i := 0; i < c.reps; i++ {
		cache, err := os.MkdirTemp(c.work, "shape-cache-")
		if err != nil {
			return err
		}
		d, cold, err := mountDaemon(c, coll, filepath.Join(dir, "mnt"), "--cache-dir", cache, "--refresh", "0")
		if err != nil {
			return err
		}
		time.Sleep(time.Second) // settle: the daemon returns its load garbage
		rss = d.rss()
		start := time.Now()
		err = shell(d.dir, "find . | wc -l")
		finds = append(finds, time.Since(start))
		rssFind = d.rss()
		d.unmount()
		if err != nil {
			return err
		}
		time.Sleep(200 * time.Millisecond) // its last host-tier writes
		d, warm, err := mountDaemon(c, coll, filepath.Join(dir, "mnt"), "--cache-dir", cache, "--refresh", "0")
		if err != nil {
			return err
		}
		d.unmount()
		colds, warms = append(colds, cold), append(warms, warm)
	}
	r.value(label, "mount-ready, cold / warm restart (tree snapshot)", fmt.Sprintf("%s / %s", dur(median(colds)), dur(median(warms))),
		pass(median(colds) <= time.Second && median(warms) <= 250*time.Millisecond, "≤ 1 s / ≤ 250 ms"))
	r.value(label, "settled RSS (bytes per page); after a cold find", fmt.Sprintf("%s (%d); %s", mib(rss), rss/int64(n), mib(rssFind)), pass(rss <= 200<<20, "≤ 200 MiB settled"))
	r.value(label, "cold `find . | wc -l`", dur(median(finds)), "—")
	return nil
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
