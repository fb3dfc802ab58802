package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/foreign"
	"github.com/chromafs/chromafs/internal/cli"
	"github.com/chromafs/chromafs/tree"
	"github.com/chromafs/chromafs/treeload"
)

const indexUsage = `Usage: chromafs-ingest index [flags]

Makes a collection written by another tool mountable: it reads every
record's metadata and document once (LangChain's or LlamaIndex's Chroma
vector store, or any loader that keeps a file path in the metadata),
reassembles each file from its chunks, and writes a chromafs path tree
into the collection (the __path_tree__ record and its parts, marked
chromafs_owner=chromafs-ingest) that maps every file onto byte ranges of
the existing records. No existing record is changed or deleted; a later
mount loads the tree in one request and reads the records by id, each part
verified against the digest recorded now (a record changed since is EIO).
Run it again after the collection changes: until then, a mount whose
refresh sees another record count serves the records as scanned and says so.

Reassembly is exact where the records say where they start (LangChain's
start_index, LlamaIndex's start_char_idx, --offset-key); elsewhere chunks
are joined at their overlaps in order (LangChain.js's line numbers,
--order-key, LlamaIndex's PREVIOUS/NEXT links), and what no record holds (whitespace a splitter stripped) is
guessed. Files that are not exact are listed, with why, in
.chromafs-reassembly.txt at the root of the mount, and in the summary.

The tree records get a fixed unit-vector embedding of the collection's
dimension (the tool's own embedding function is not needed): a semantic
search may still return them; filter on chromafs_owner to leave them out.

Layouts (--layout): auto (detected from the records), langchain (metadata
source, start_index or locFrom/locTo), llamaindex (file_path,
_node_content), custom (--path-key, with --offset-key or --order-key).
Without --groups-key every file is public; with it, a file is visible to
the groups its records name (a list, or a comma-separated string), and a
malformed value hides it.

Exit status: 0 done; 1 a runtime error; 2 a usage error.

Flags:
`

type indexOptions struct {
	conn   chroma.Config
	layout treeload.Layout
	dryRun bool
}

func parseIndexFlags(args []string, helpOut io.Writer) (indexOptions, error) {
	var o indexOptions
	fs := cli.New("chromafs-ingest index", indexUsage, helpOut)
	o.conn.RegisterFlags(fs.FlagSet)
	cli.Duration(fs.FlagSet, &o.conn.Timeout, "timeout", chroma.DefaultTimeout, false, "deadline for each request to Chroma")
	o.layout.RegisterFlags(fs.FlagSet, "auto (detected from the records), langchain, llamaindex or custom")
	fs.BoolVar(&o.dryRun, "dry-run", false, "read and report; write nothing")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() != 0 {
		return o, fmt.Errorf("index takes no arguments, got %q (see --help)", fs.Args())
	}
	if err := o.layout.Validate(); err != nil {
		return o, err
	}
	if !o.layout.Scans() {
		return o, fmt.Errorf("--layout %s: index maps the collections of other tools (auto, langchain, llamaindex, custom)", o.layout.Name)
	}
	return o, o.conn.Validate()
}

// runIndex is "chromafs-ingest index".
func runIndex(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseIndexFlags(args, stdout)
	if errors.Is(err, errHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "chromafs-ingest index: %v\n", err)
		return 2
	}
	sum, err := index(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "chromafs-ingest index: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, sum)
	return 0
}

func index(ctx context.Context, o indexOptions) (string, error) {
	probe, err := chroma.Open(ctx, o.conn, nil)
	if err != nil {
		return "", err
	}
	dim, err := probe.Dimension(ctx)
	probe.Close()
	if err != nil {
		return "", err
	}
	st, err := chroma.Open(ctx, o.conn, chroma.UnitEmbedding(max(dim, 1)))
	if err != nil {
		return "", err
	}
	defer st.Close()
	if err := refuseForeignTree(ctx, st); err != nil {
		return "", err
	}
	recs, err := treeload.Records(ctx, st)
	if err != nil {
		return "", err
	}
	l, err := treeload.Choose(o.layout, recs)
	if err != nil {
		return "", err
	}
	entries, rep := foreign.Build(recs, l)
	if rep.Files == 0 {
		return "", fmt.Errorf("no record of the %d has a %q: not a %s collection (try --layout custom --path-key KEY)", len(recs), l.PathKey, l.Name)
	}
	raw, err := tree.Encode(entries)
	if err != nil {
		return "", err
	}
	doc, err := tree.Wrap(raw)
	if err != nil {
		return "", err
	}
	if !o.dryRun {
		if err := writeIndexTree(ctx, st, doc, len(recs)); err != nil {
			return "", err
		}
	}
	return indexSummary(o, l, rep, len(doc)), nil
}

// refuseForeignTree stops when the collection's path tree is another
// tool's (Mintlify's): it is never replaced.
func refuseForeignTree(ctx context.Context, st *chroma.Store) error {
	foreignIDs, err := st.NotOwned(ctx, []string{chroma.TreeID})
	if err != nil {
		return err
	}
	if len(foreignIDs) > 0 {
		return fmt.Errorf("the collection's path tree (record %q) was written by another tool (%w); it is never replaced", chroma.TreeID, chroma.ErrForeign)
	}
	return nil
}

// writeIndexTree writes the tree, then deletes the parts of the tree it
// replaced (its own records only). The header records how many records
// the collection then holds (the indexed records of the other tool, its
// own records that are not tree records, the new tree's): a mount's
// refresh compares it with the count to notice records added later.
func writeIndexTree(ctx context.Context, st *chroma.Store, doc string, indexed int) error {
	inv, err := st.Inventory(ctx)
	if err != nil {
		return err
	}
	treeIDs := chroma.TreeIDs(doc)
	keep := map[string]bool{}
	for _, id := range treeIDs {
		keep[id] = true
	}
	var stale []string
	records := indexed + len(treeIDs)
	for _, id := range inv.Owned {
		switch {
		case !chroma.IsTreeRecord(id):
			records++
		case !keep[id]:
			stale = append(stale, id)
		}
	}
	if err := st.WriteIndexTree(ctx, doc, records); err != nil {
		return fmt.Errorf("write path tree: %w", err)
	}
	return st.DeleteOwned(ctx, stale)
}

func indexSummary(o indexOptions, l foreign.Layout, rep foreign.Report, treeBytes int) string {
	marks := map[string]int{}
	for _, m := range rep.Marked {
		marks[m]++
	}
	var parts []string
	for _, m := range []string{foreign.Joined, foreign.Edges, foreign.Gaps, foreign.Ambiguous, foreign.Conflict, foreign.Unordered} {
		if marks[m] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", marks[m], m))
		}
	}
	notExact := "all exact"
	if len(parts) > 0 {
		notExact = "not exact: " + strings.Join(parts, ", ") + " (listed in " + foreign.ReportPath + ")"
	}
	verb := "indexed"
	if o.dryRun {
		verb = "dry run, nothing written"
	}
	sort.Strings(rep.Warnings)
	layout := l.Name
	if rep.Offsets.How != "" {
		layout += ", offsets in " + rep.Offsets.String()
	}
	return fmt.Sprintf("%s: layout %s, %d records (%d without a %s, skipped), %d files, %s; path tree of %d bytes; no existing record changed",
		verb, layout, rep.Records, rep.Skipped, l.PathKey, rep.Files, notExact, treeBytes)
}
