package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"
	"unicode/utf8"

	"golang.org/x/sync/errgroup"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/tree"
)

// Store is what Run needs of a collection.
type Store interface {
	LoadTree(ctx context.Context) ([]byte, error)
	IDs(ctx context.Context) ([]string, error)
	Upsert(ctx context.Context, recs []chroma.Record) error
	WriteTree(ctx context.Context, doc string) error
	Delete(ctx context.Context, ids []string) error
}

// Options control a run.
type Options struct {
	Src           string
	ChunkSize     int
	DefaultPublic bool
	DryRun        bool
	Workers       int                   // concurrent write requests
	Progress      func(done, total int) // optional
	Log           *slog.Logger          // optional
}

// Summary reports what a run did.
type Summary struct {
	Files, Chunks                       int
	Bytes                               int64
	Written, Unchanged, Deleted, Hidden int
	Skipped                             []Skipped
	Seconds                             float64
}

// String is the one-line summary printed at the end of a run.
func (s Summary) String() string {
	return fmt.Sprintf("%d files, %d bytes, %d chunks; %d written, %d unchanged, %d deleted, %d skipped, %d hidden by frontmatter errors; %.2fs",
		s.Files, s.Bytes, s.Chunks, s.Written, s.Unchanged, s.Deleted, len(s.Skipped), s.Hidden, s.Seconds)
}

// Run ingests opt.Src into st.
func Run(ctx context.Context, st Store, opt Options) (Summary, error) {
	start := time.Now()
	r := &run{st: st, opt: opt, log: opt.Log, entries: map[string]tree.Entry{}}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.opt.ChunkSize <= 0 || r.opt.ChunkSize > chroma.MaxDocument {
		return Summary{}, fmt.Errorf("chunk size %d: want 1..%d bytes", r.opt.ChunkSize, chroma.MaxDocument)
	}
	err := r.do(ctx)
	r.sum.Seconds = time.Since(start).Seconds()
	return r.sum, err
}

type run struct {
	st      Store
	opt     Options
	log     *slog.Logger
	old     map[string]tree.Entry
	have    map[string]bool // record ids present before the run
	entries map[string]tree.Entry
	keep    map[string]bool
	sum     Summary
}

func (r *run) do(ctx context.Context) error {
	files, skipped, err := Scan(r.opt.Src)
	if err != nil {
		return err
	}
	r.sum.Skipped = skipped
	if err := r.loadPrevious(ctx); err != nil {
		return err
	}
	if err := r.writePages(ctx, files); err != nil {
		return err
	}
	return r.commit(ctx)
}

// loadPrevious reads the current tree and record ids, so unchanged pages
// are not rewritten and stale records can be found.
func (r *run) loadPrevious(ctx context.Context) error {
	r.old, r.have = map[string]tree.Entry{}, map[string]bool{}
	doc, err := r.st.LoadTree(ctx)
	switch {
	case errors.Is(err, chroma.ErrNoTree) || errors.Is(err, chroma.ErrNotFound):
		return nil
	case errors.Is(err, chroma.ErrBadTree):
		r.log.Warn("previous path tree unreadable; every page will be rewritten", "err", err)
	case err != nil:
		return err
	default:
		if d, derr := tree.Decode(doc, tree.DefaultLimits); derr == nil {
			r.old = d.Entries
		} else {
			r.log.Warn("previous path tree invalid; every page will be rewritten", "err", derr)
		}
	}
	ids, err := r.st.IDs(ctx)
	if err != nil {
		return err
	}
	for _, id := range ids {
		r.have[id] = true
	}
	return nil
}

// writePages reads, chunks and writes every file, batching records and
// keeping opt.Workers write requests in flight.
func (r *run) writePages(ctx context.Context, files []SourceFile) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(r.opt.Workers, 1) + 1)
	batches := make(chan []chroma.Record)
	g.Go(func() error {
		defer close(batches)
		return r.produce(gctx, files, batches)
	})
	for i := 0; i < max(r.opt.Workers, 1); i++ {
		g.Go(func() error {
			for b := range batches {
				if r.opt.DryRun {
					continue
				}
				if err := r.st.Upsert(gctx, b); err != nil {
					return err
				}
			}
			return nil
		})
	}
	return g.Wait()
}

func (r *run) produce(ctx context.Context, files []SourceFile, out chan<- []chroma.Record) error {
	slugs := Slugs(files)
	r.keep = map[string]bool{}
	var batch []chroma.Record
	for i, f := range files {
		recs, err := r.page(f, slugs[i])
		if err != nil {
			return err
		}
		batch = append(batch, recs...)
		for len(batch) >= chroma.MaxWrite {
			if err := send(ctx, out, batch[:chroma.MaxWrite]); err != nil {
				return err
			}
			batch = batch[chroma.MaxWrite:]
		}
		if r.opt.Progress != nil {
			r.opt.Progress(i+1, len(files))
		}
	}
	if len(batch) > 0 {
		return send(ctx, out, batch)
	}
	return nil
}

func send(ctx context.Context, out chan<- []chroma.Record, b []chroma.Record) error {
	cp := append([]chroma.Record(nil), b...)
	select {
	case out <- cp:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// page builds the tree entry for one file and returns the records to
// write: none when the file is skipped or unchanged.
func (r *run) page(f SourceFile, slug string) ([]chroma.Record, error) {
	data, err := os.ReadFile(f.Abs)
	if err != nil {
		r.sum.Skipped = append(r.sum.Skipped, Skipped{f.Rel, err.Error()})
		return nil, nil
	}
	if !utf8.Valid(data) {
		r.sum.Skipped = append(r.sum.Skipped, Skipped{f.Rel, "not UTF-8 text"})
		return nil, nil
	}
	acc, aerr := ParseAccess(data, r.opt.DefaultPublic)
	if aerr != nil {
		r.sum.Hidden++
		r.log.Warn("hidden: frontmatter", "path", f.Rel, "err", aerr)
	}
	chunks := Split(data, r.opt.ChunkSize)
	e := r.entry(f, data, chunks, acc)
	r.entries[slug] = e
	r.sum.Files++
	r.sum.Bytes += int64(len(data))
	r.sum.Chunks += len(chunks)
	for i := range chunks {
		r.keep[chroma.ChunkID(slug, e.SHA256, i)] = true
	}
	if r.unchanged(slug, e) {
		r.sum.Unchanged++
		return nil, nil
	}
	r.sum.Written++
	recs := make([]chroma.Record, len(chunks))
	for i, c := range chunks {
		recs[i] = chroma.ChunkRecord(slug, e.SHA256, i, string(c))
	}
	return recs, nil
}

func (r *run) entry(f SourceFile, data []byte, chunks [][]byte, acc Access) tree.Entry {
	sum := sha256.Sum256(data)
	size := int64(len(data))
	lens := make([]int64, len(chunks))
	for i, c := range chunks {
		lens[i] = int64(len(c))
	}
	return tree.Entry{
		IsPublic: acc.Public, Groups: acc.Groups, Path: f.Rel, Size: &size,
		Mtime: f.Mtime, Chunks: lens, SHA256: hex.EncodeToString(sum[:]),
	}
}

// unchanged reports whether the collection already holds exactly this
// version of the page.
func (r *run) unchanged(slug string, e tree.Entry) bool {
	old, ok := r.old[slug]
	if !ok || old.SHA256 != e.SHA256 || !equalInts(old.Chunks, e.Chunks) {
		return false
	}
	for i := range e.Chunks {
		if !r.have[chroma.ChunkID(slug, e.SHA256, i)] {
			return false
		}
	}
	return true
}

// commit writes the tree and then removes what it no longer references.
func (r *run) commit(ctx context.Context) error {
	for slug := range r.old {
		if _, ok := r.entries[slug]; !ok {
			r.sum.Deleted++
		}
	}
	raw, err := tree.Encode(r.entries)
	if err != nil {
		return err
	}
	doc, err := tree.Wrap(raw)
	if err != nil {
		return err
	}
	for _, id := range chroma.TreeIDs(doc) {
		r.keep[id] = true
	}
	var stale []string
	for id := range r.have {
		if !r.keep[id] {
			stale = append(stale, id)
		}
	}
	if r.opt.DryRun {
		return nil
	}
	if err := r.st.WriteTree(ctx, doc); err != nil {
		return fmt.Errorf("write path tree: %w", err)
	}
	return r.st.Delete(ctx, stale)
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
