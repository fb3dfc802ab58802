package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"

	"github.com/chromafs/chromafs/chroma"
)

// benchForeign measures a collection of another tool at scale: records in
// LangChain's layout (source, start_index; random-looking ids; chunks of
// 400 characters overlapping by 100), written directly (writing 50,000
// chunks through LangChain.js is not the point; the integration tests use
// the real clients), then the time chromafs-ingest index takes and the
// mount-ready time with its tree, against scanning at mount time.
func benchForeign(c *config, r *report) error {
	ctx := context.Background()
	n := c.foreignChunks
	coll := fmt.Sprintf("bench-foreign-%d", time.Now().Unix())
	logf("writing %d chunks in LangChain's layout", n)
	if err := writeForeign(ctx, c, coll, n); err != nil {
		return err
	}
	label := fmt.Sprintf("%d chunks", n)
	// each run does the same work: it reads every record and writes the
	// tree (a later run also reads the few records of the tree before)
	var out []byte
	took, err := timeN(c.reps, func() (err error) {
		// a generous deadline: right after 50,000 writes (and the bigger
		// trees before) the server is still compacting, and listing
		// every record waited past the default 30 s in a full run
		out, err = exec.Command(filepath.Join(c.bin, "chromafs-ingest"), "index", "--chroma-url", c.url, "--collection", coll, "--timeout", "5m").CombinedOutput()
		if err != nil {
			return fmt.Errorf("index: %v: %s", err, out)
		}
		return nil
	})
	if err != nil {
		return err
	}
	logf("%s", strings.TrimSpace(string(out)))
	r.value(label, "chromafs-ingest index (reads every record once, writes the tree)", dur(took), "—")
	dir := filepath.Join(c.work, "foreign")
	var indexed, scanned []time.Duration
	var reqs []int64
	for i := 0; i < c.reps; i++ {
		d, ready, err := mountDaemon(c, coll, filepath.Join(dir, "mnt"), "--refresh", "0")
		if err != nil {
			return err
		}
		reqs = append(reqs, d.requests())
		d.unmount()
		indexed = append(indexed, ready)
	}
	// the same records in a collection that was never indexed: the mount
	// scans them (a tree, where there is one, is always used)
	scanColl := coll + "-scan"
	if err := writeForeign(ctx, c, scanColl, n); err != nil {
		return err
	}
	for i := 0; i < c.reps; i++ {
		d, ready, err := mountDaemon(c, scanColl, filepath.Join(dir, "mnt"), "--refresh", "0", "--scan-limit", fmt.Sprint(n+1))
		if err != nil {
			return err
		}
		d.unmount()
		scanned = append(scanned, ready)
	}
	r.ratio(label, fmt.Sprintf("mount-ready with the index (%s)", countOf(reqs, "request")), median(indexed), "scanned at mount time", median(scanned), maxRatio(0.5))
	return nil
}

// writeForeign writes n chunks of 400 characters, overlapping by 100, in
// files of 20 chunks cut from one text each (so overlaps agree), with
// LangChain's metadata.
func writeForeign(ctx context.Context, c *config, coll string, n int) error {
	cfg := chroma.Config{URL: c.url, Collection: coll, Tenant: chroma.DefaultTenant, Database: chroma.DefaultDatabase, Timeout: time.Minute}
	if err := cfg.Validate(); err != nil {
		return err
	}
	st, err := chroma.OpenOrCreate(ctx, cfg, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	var recs []chroma.Record
	var text string // the current file's: its chunks are cut from it, so overlaps agree
	for i := 0; i < n; i++ {
		file, k := i/20, i%20
		if k == 0 {
			var words []string
			for w := 0; len(words) == 0 || len(strings.Join(words, " ")) < 20*300+100; w++ {
				words = append(words, fmt.Sprintf("w%d-%d", file, w))
			}
			text = strings.Join(words, " ")
		}
		recs = append(recs, chroma.Record{
			ID:   fmt.Sprintf("%08x-%04x", uint32(i*2654435761), i%65536),
			Text: text[k*300 : k*300+400],
			Metadata: v2.NewDocumentMetadata(v2.NewStringAttribute("source", fmt.Sprintf("docs/section-%03d/page-%05d.md", file/50, file)),
				v2.NewIntAttribute("start_index", int64(k*300))),
		})
	}
	return st.Upsert(ctx, recs)
}
