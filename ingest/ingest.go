package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/amikos-tech/chroma-go/pkg/embeddings"
	"golang.org/x/sync/errgroup"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/embed"
	"github.com/chromafs/chromafs/tree"
)

// Store is what Run needs of a collection. Run overwrites and deletes only
// records that carry chromafs-ingest's ownership mark (chroma.KeyOwner);
// the collection may hold records of other writers, which it never touches.
type Store interface {
	LoadTree(ctx context.Context) ([]byte, error)
	Inventory(ctx context.Context) (chroma.Inventory, error)
	NotOwned(ctx context.Context, ids []string) ([]string, error)
	CheckDimension(ctx context.Context) error
	// Dimension is the collection's embedding dimension, 0 without one.
	Dimension(ctx context.Context) (int, error)
	Upsert(ctx context.Context, recs []chroma.Record) error
	WriteTree(ctx context.Context, doc string) error
	DeleteOwned(ctx context.Context, ids []string) error
}

// Embedder is the embedding stage (embed.Stage).
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([]embeddings.Embedding, error)
	// Check fails when one text is over the model's limit for an input.
	Check(text string) error
	// Truncate cuts a text over that limit to it, and says whether it did.
	Truncate(text string) (string, bool)
	Stats() embed.Stats
}

// ErrUnreadable is returned when a source file or directory exists but
// cannot be read. The run stops before it changes the tree, so no page is
// deleted because of a read error.
var ErrUnreadable = errors.New("cannot read")

// Options control a run.
type Options struct {
	Src           string
	ChunkSize     int
	DefaultPublic bool
	DryRun        bool
	// KeepPrevious keeps the chunks of the page versions this run replaces
	// or deletes until the next run, so that a mount serving the previous
	// tree (a reader with a file open across a live refresh) can still read
	// them; without it they are deleted at once.
	KeepPrevious bool
	// Lazy makes some files lazy pointers instead of chunks.
	Lazy Lazy
	// Embed, when set, embeds each write's records before it is sent
	// (the embedding stage: the provider's limits, its own deadline and
	// retries); without it the Store's write embeds them.
	Embed Embedder
	// EmbedTruncate embeds a chunk over the model's per-input limit from
	// its first tokens (the summary names its files) instead of stopping
	// the run.
	EmbedTruncate bool
	Workers       int // concurrent write requests
	// Progress, when set, is told how many files of the total have all
	// their records written (unchanged ones count as they are passed);
	// calls are serialized.
	Progress func(done, total int)
	Log      *slog.Logger // optional
}

// Summary reports what a run did (or, in a dry run, would do). Pages are
// counted as Written, Unchanged and Deleted; Removed counts the records
// deleted (chunks of deleted and replaced pages, old tree parts, leftovers
// of an interrupted run); Foreign counts records of other writers.
type Summary struct {
	Files, Chunks                       int
	Bytes                               int64
	Written, Unchanged, Deleted, Hidden int
	Removed, Foreign                    int
	Kept                                int // records of the replaced version kept until the next run
	Dirs, Links, Lazy                   int // directories, symbolic links and lazy pointers in the tree
	Skipped                             []Skipped
	DryRun                              bool
	Seconds                             float64
	// Embedded is what the embedding stage sent (Options.Embed).
	Embedded *embed.Stats
	// Truncated are the files with a chunk embedded from its first tokens
	// only (Options.EmbedTruncate), sorted.
	Truncated []string
}

// String is the one-line summary printed at the end of a run.
func (s Summary) String() string {
	written, deleted, removed := "written", "deleted", "removed"
	if s.DryRun {
		written, deleted, removed = "would be written", "would be deleted", "would be removed"
	}
	kept := ""
	if s.Kept > 0 {
		kept = fmt.Sprintf("; %s of the replaced version kept for open readers until the next run", count(s.Kept, "record"))
	}
	embedded := ""
	if e := s.Embedded; e != nil {
		embedded = fmt.Sprintf("; %s embedded (%s) in %s, %s", count(int(e.Tokens), "token"), e.Counter,
			count(int(e.Requests), "request"), count(int(e.Retries), "retry"))
	}
	if n := len(s.Truncated); n > 0 {
		names := strings.Join(s.Truncated[:min(n, 5)], ", ")
		if n > 5 {
			names += fmt.Sprintf(" and %d more", n-5)
		}
		embedded += fmt.Sprintf("; %s embedded from the first tokens of a chunk over the model's input limit (--embed-truncate): %s", count(n, "file"), names)
	}
	return fmt.Sprintf("%s, %s, %s; %d %s, %d unchanged, %d %s, %d skipped, %d hidden by frontmatter errors; %s %s, %s of other writers left untouched%s; %s, %s, %s%s; %.2fs",
		count(s.Files, "file"), count(int(s.Bytes), "byte"), count(s.Chunks, "chunk"),
		s.Written, written, s.Unchanged, s.Deleted, deleted, len(s.Skipped), s.Hidden,
		count(s.Removed, "stale record"), removed, count(s.Foreign, "record"), kept,
		count(s.Dirs, "directory"), count(s.Links, "symbolic link"), count(s.Lazy, "lazy pointer"), embedded, s.Seconds)
}

func count(n int, word string) string {
	switch {
	case n == 1:
		return "1 " + word
	case strings.HasSuffix(word, "y"):
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(word, "y"))
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// Run ingests opt.Src into st.
func Run(ctx context.Context, st Store, opt Options) (Summary, error) {
	start := time.Now()
	if opt.ChunkSize <= 0 || opt.ChunkSize > chroma.MaxDocument {
		return Summary{}, fmt.Errorf("chunk size %d: want 1..%d bytes", opt.ChunkSize, chroma.MaxDocument)
	}
	if err := opt.Lazy.Check(); err != nil {
		return Summary{}, err
	}
	r := newRun(st, opt)
	err := r.do(ctx)
	r.sum.Seconds = time.Since(start).Seconds()
	if opt.Embed != nil {
		st := opt.Embed.Stats()
		r.sum.Embedded = &st
	}
	return r.sum, err
}

func newRun(st Store, opt Options) *run {
	r := &run{st: st, opt: opt, log: opt.Log, read: os.ReadFile, entries: map[string]tree.Entry{}}
	r.sum.DryRun = opt.DryRun
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r
}

type run struct {
	st      Store
	opt     Options
	log     *slog.Logger
	read    func(string) ([]byte, error)
	old     map[string]tree.Entry
	owned   map[string]bool // ids of chromafs-ingest's records before the run
	entries map[string]tree.Entry
	dirs    []dirSlug // the source's directories, given entries at commit
	keep    map[string]bool
	sum     Summary
	// progressed counts the files whose records are written (Progress)
	progressMu sync.Mutex
	progressed int
}

type dirSlug struct {
	f    SourceFile
	slug string
}

func (r *run) do(ctx context.Context) error {
	files, skipped, err := Scan(r.opt.Src)
	if err != nil {
		return err
	}
	r.sum.Skipped = skipped
	if err := r.checkDimension(ctx); err != nil {
		return err
	}
	if err := r.loadPrevious(ctx); err != nil {
		return err
	}
	if err := r.checkInputs(files); err != nil {
		return err
	}
	if err := r.writePages(ctx, files); err != nil {
		return err
	}
	return r.commit(ctx)
}

// loadPrevious reads what chromafs-ingest wrote before (its records and
// its tree), so unchanged pages are not rewritten and stale records can be
// found. A path tree written by another tool is never replaced.
func (r *run) loadPrevious(ctx context.Context) error {
	inv, err := r.st.Inventory(ctx)
	if err != nil {
		return err
	}
	r.sum.Foreign = inv.Foreign
	r.owned = make(map[string]bool, len(inv.Owned))
	for _, id := range inv.Owned {
		r.owned[id] = true
	}
	r.old = map[string]tree.Entry{}
	doc, err := r.st.LoadTree(ctx)
	switch {
	case errors.Is(err, chroma.ErrNoTree) || errors.Is(err, chroma.ErrNotFound):
		return nil
	case err != nil && !errors.Is(err, chroma.ErrBadTree):
		return err
	case !r.owned[chroma.TreeID]:
		return fmt.Errorf("the collection's path tree (record %q) was written by another tool, not chromafs-ingest (%w); "+
			"chromafs-ingest never replaces it: ingest into another collection", chroma.TreeID, chroma.ErrForeign)
	case err != nil:
		r.log.Warn("previous path tree unreadable; every page will be rewritten", "err", err)
		return nil
	}
	d, err := tree.Decode(doc, tree.DefaultLimits)
	if err != nil {
		r.log.Warn("previous path tree invalid; every page will be rewritten", "err", err)
		return nil
	}
	r.old = d.Entries()
	return nil
}

// writePages reads, chunks and writes every file, batching records and
// keeping opt.Workers write requests in flight.
func (r *run) writePages(ctx context.Context, files []SourceFile) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(r.opt.Workers, 1) + 1)
	batches := make(chan batch)
	g.Go(func() error {
		defer close(batches)
		return r.produce(gctx, files, batches)
	})
	for i := 0; i < max(r.opt.Workers, 1); i++ {
		g.Go(func() error {
			for b := range batches {
				if len(b.recs) > 0 {
					if err := r.write(gctx, b.recs); err != nil {
						return err
					}
				}
				r.advance(b.files, len(files))
			}
			return nil
		})
	}
	return g.Wait()
}

// write upserts one batch, after making sure it overwrites no record of
// another writer. A dry run checks and writes nothing.
func (r *run) write(ctx context.Context, recs []chroma.Record) error {
	ids := make([]string, len(recs))
	for i, rec := range recs {
		ids[i] = rec.ID
	}
	if err := r.refuseForeign(ctx, ids); err != nil || r.opt.DryRun {
		return err
	}
	if r.opt.Embed != nil {
		texts := make([]string, len(recs))
		for i, rec := range recs {
			texts[i] = rec.EmbedSource()
			if r.opt.EmbedTruncate {
				texts[i], _ = r.opt.Embed.Truncate(texts[i])
			}
		}
		embs, err := r.opt.Embed.Embed(ctx, texts)
		if err != nil {
			return fmt.Errorf("%w (nothing of this batch, first %q, was written to Chroma)", err, recs[0].ID)
		}
		for i := range recs {
			recs[i].Embedding = embs[i]
		}
	}
	return r.st.Upsert(ctx, recs)
}

// checkDimension fails with chroma.ErrDimension when the collection holds
// embeddings of another dimension than the run would write. With an
// embedding stage, its probe goes through the stage (its deadline, its
// retries, its errors); else the Store asks its own function.
func (r *run) checkDimension(ctx context.Context) error {
	if r.opt.Embed == nil {
		return r.st.CheckDimension(ctx)
	}
	have, err := r.st.Dimension(ctx)
	if err != nil || have == 0 {
		return err
	}
	embs, err := r.opt.Embed.Embed(ctx, []string{"chromafs embedding dimension probe"})
	if err != nil {
		return err
	}
	if got := embs[0].Len(); got != have {
		return fmt.Errorf("the collection holds %d-dimensional embeddings, the embedding function makes %d-dimensional ones: %w", have, got, chroma.ErrDimension)
	}
	return nil
}

// checkInputs fails, before anything is written, when a chunk the run
// will embed is over the embedding model's limit for one input, naming
// its file: each chunk is one input, so a smaller --chunk-size is the
// fix. Pages the collection holds unchanged are not embedded again, and
// not checked.
func (r *run) checkInputs(files []SourceFile) error {
	if r.opt.Embed == nil {
		return nil
	}
	slugs := Slugs(files)
	for fi, f := range files {
		if f.Type == tree.TypeDir || f.Type == tree.TypeSymlink {
			continue
		}
		data, err := r.read(f.Abs)
		if err != nil {
			return unreadable(f.Rel, err)
		}
		if r.opt.Lazy.applies(f.Rel, len(data)) || !utf8.Valid(data) {
			continue // no chunks, or a binary file's short description
		}
		chunks := Split(data, r.opt.ChunkSize)
		if r.unchanged(slugs[fi], r.entry(f, data, chunks, Access{})) {
			continue
		}
		for i, c := range chunks {
			err := r.opt.Embed.Check(string(c))
			switch {
			case err == nil:
			case r.opt.EmbedTruncate:
				r.sum.Truncated = append(r.sum.Truncated, f.Rel)
			default:
				return fmt.Errorf("%s: chunk %d: %w; nothing was written: lower --chunk-size (now %d bytes), or pass --embed-truncate to embed such a chunk from its first tokens", f.Rel, i, err, r.opt.ChunkSize)
			}
			if err != nil {
				break // the file is named once
			}
		}
	}
	sort.Strings(r.sum.Truncated)
	return nil
}

// refuseForeign fails when any of ids already belongs to another writer.
func (r *run) refuseForeign(ctx context.Context, ids []string) error {
	var unknown []string
	for _, id := range ids {
		if !r.owned[id] {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	foreign, err := r.st.NotOwned(ctx, unknown)
	if err != nil || len(foreign) == 0 {
		return err
	}
	more := ""
	if len(foreign) > 1 {
		more = fmt.Sprintf(" (and %d more)", len(foreign)-1)
	}
	return fmt.Errorf("record %q%s already exists without chromafs-ingest's %q mark (%w); refusing to overwrite it: ingest into another collection",
		foreign[0], more, chroma.KeyOwner, chroma.ErrForeign)
}

// batch is a write's records, and the number of files whose records are
// all written once it is (files without records count in the next batch).
type batch struct {
	recs  []chroma.Record
	files int
}

// produce reads, chunks and batches the files' records, at most
// chroma.MaxWrite a batch.
func (r *run) produce(ctx context.Context, files []SourceFile, out chan<- batch) error {
	slugs := Slugs(files)
	r.keep = map[string]bool{}
	var recs []chroma.Record
	done := 0 // files whose records are all in recs or sent, not yet in a batch's count
	for i, f := range files {
		page, err := r.page(f, slugs[i])
		if err != nil {
			return err
		}
		recs = append(recs, page...)
		for len(recs) >= chroma.MaxWrite {
			b := batch{recs: recs[:chroma.MaxWrite], files: done}
			if recs = recs[chroma.MaxWrite:]; len(recs) == 0 {
				b.files++ // this file's last record is in this batch
			}
			if err := send(ctx, out, b); err != nil {
				return err
			}
			done = 0
		}
		if len(recs) > 0 || len(page) == 0 {
			done++ // its records wait in recs, or it has none
		}
	}
	if len(recs) > 0 || done > 0 {
		return send(ctx, out, batch{recs: recs, files: done})
	}
	return nil
}

// advance counts files whose records are written, for Options.Progress.
func (r *run) advance(files, total int) {
	if r.opt.Progress == nil || files == 0 {
		return
	}
	r.progressMu.Lock()
	defer r.progressMu.Unlock()
	r.progressed += files
	r.opt.Progress(r.progressed, total)
}

func send(ctx context.Context, out chan<- batch, b batch) error {
	b.recs = append([]chroma.Record(nil), b.recs...)
	select {
	case out <- b:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// page builds the tree entry for one file and returns the records to
// write: none when the file is skipped or unchanged.
func (r *run) page(f SourceFile, slug string) ([]chroma.Record, error) {
	switch f.Type {
	case tree.TypeDir:
		r.dirs = append(r.dirs, dirSlug{f, slug})
		return nil, nil
	case tree.TypeSymlink: // visible to whoever sees its target (the mount checks)
		r.entries[slug] = tree.Entry{IsPublic: r.opt.DefaultPublic, Path: f.Rel, Mtime: f.Mtime, MtimeNsec: f.Nsec,
			Type: tree.TypeSymlink, Target: f.Target}
		r.sum.Links++
		return nil, nil
	}
	data, err := r.read(f.Abs)
	if err != nil {
		return nil, unreadable(f.Rel, err)
	}
	binary := !utf8.Valid(data)
	var chunks [][]byte
	acc := Access{Public: r.opt.DefaultPublic}
	if binary { // no frontmatter: access follows --default-public
		chunks = SplitBinary(data, r.opt.ChunkSize)
	} else {
		var aerr error
		if acc, aerr = ParseAccess(data, r.opt.DefaultPublic); aerr != nil {
			r.sum.Hidden++
			r.log.Warn("hidden: frontmatter", "path", f.Rel, "err", aerr)
		}
		chunks = Split(data, r.opt.ChunkSize)
	}
	if r.opt.Lazy.applies(f.Rel, len(data)) {
		return nil, r.lazyPage(f, slug, data, acc)
	}
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
	line := 1 // of the page, where the next text chunk begins
	for i, c := range chunks {
		if binary {
			recs[i] = chroma.BinaryChunkRecord(slug, e.SHA256, i, c, describeBinary(f.Rel, data, i, len(chunks)))
			continue
		}
		recs[i] = chroma.ChunkRecord(slug, e.SHA256, i, string(c))
		recs[i].Metadata.SetInt(chroma.KeyChunkLine, int64(line))
		line += bytes.Count(c, []byte{'\n'})
	}
	return recs, nil
}

// describeBinary is what the embedding of a binary chunk is made of: the
// file's path and media type, so that a semantic search can find "the
// architecture diagram" by its name; base64 would mean nothing.
func describeBinary(rel string, data []byte, i, n int) string {
	typ := mime.TypeByExtension(path.Ext(rel))
	if typ == "" {
		typ = http.DetectContentType(data)
	}
	return fmt.Sprintf("binary file %s (%s), part %d of %d", rel, typ, i+1, n)
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
		Mtime: f.Mtime, MtimeNsec: f.Nsec, Exec: f.Exec, Chunks: lens, SHA256: hex.EncodeToString(sum[:]),
	}
}

// unchanged reports whether the collection already holds exactly this
// version of the page.
func (r *run) unchanged(slug string, e tree.Entry) bool {
	old, ok := r.old[slug]
	if !ok || old.SHA256 != e.SHA256 || !slices.Equal(old.Chunks, e.Chunks) {
		return false
	}
	for i := range e.Chunks {
		if !r.owned[chroma.ChunkID(slug, e.SHA256, i)] {
			return false
		}
	}
	return true
}

// commit writes the tree and then removes the records of chromafs-ingest
// that it no longer references. Nothing else is ever deleted.
func (r *run) commit(ctx context.Context) error {
	r.addDirs()
	for slug := range r.old {
		if _, ok := r.entries[slug]; !ok && r.old[slug].Type == tree.TypeFile {
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
	treeIDs := chroma.TreeIDs(doc)
	if err := r.refuseForeign(ctx, treeIDs); err != nil {
		return err
	}
	for _, id := range treeIDs {
		r.keep[id] = true
	}
	previous := r.previousChunks()
	var stale []string
	for id := range r.owned {
		switch {
		case r.keep[id]:
		case previous[id]:
			r.sum.Kept++
		default:
			stale = append(stale, id)
		}
	}
	sort.Strings(stale)
	r.sum.Removed = len(stale)
	if r.opt.DryRun {
		return nil
	}
	if err := r.st.WriteTree(ctx, doc); err != nil {
		return fmt.Errorf("write path tree: %w", err)
	}
	return r.st.DeleteOwned(ctx, stale)
}

// previousChunks names the chunks of the tree this run replaces, when
// they are to be kept until the next run (Options.KeepPrevious).
func (r *run) previousChunks() map[string]bool {
	ids := map[string]bool{}
	if !r.opt.KeepPrevious {
		return ids
	}
	for slug, e := range r.old {
		for i := range e.Chunks {
			ids[chroma.ChunkID(slug, e.SHA256, i)] = true
		}
	}
	return ids
}

// unreadable is the error for a source path that exists but cannot be read.
func unreadable(rel string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return fmt.Errorf("%w %s: %w; stopped before changing the collection's tree, so no page was deleted", ErrUnreadable, rel, err)
}
