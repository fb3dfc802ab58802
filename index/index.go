// Package index makes a collection written by another tool mountable
// (chromafs-ingest index): it reads every record once, reassembles each
// file from its chunks (package foreign, through treeload's Records and
// Choose, as a mount's scan does, so both see the same files), and writes
// a chromafs path tree into the collection that maps every file onto byte
// ranges of the existing records.
//
// What it may change is bounded like ingest's: it refuses a collection
// whose path tree another tool wrote (Mintlify's tree is never
// replaced), changes or deletes no record of another writer, and deletes
// only the parts of its own earlier tree that the new one does not
// reuse. The tree's header records how many records the collection holds
// once it is written, so that a mount's refresh notices records added
// later (package view: a stale index is served as scanned), and the key
// of records' access groups it was built with, so that such a scan, and a
// mount whose own --groups-key differs, read the groups the index did
// (package view: a mismatch hides, never reveals).
//
// Each file's entry carries its access (the strictest of its records',
// package foreign) and its reassembly mark; the list of inexact files a
// mount shows is written per view when its tree is built
// (tree.ReportPath), never stored here.
//
// Its collaborator is a small interface (Store) that chroma.Store
// implements, so that the bookkeeping is unit-tested with a fake.
package index

import (
	"context"
	"fmt"
	"strings"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/foreign"
	"github.com/chromafs/chromafs/tree"
	"github.com/chromafs/chromafs/treeload"
)

// Store is the collection being indexed; *chroma.Store implements it
// (opened with an embedding function of the collection's dimension, for
// the tree records it writes).
type Store interface {
	treeload.Scanner
	NotOwned(ctx context.Context, ids []string) ([]string, error)
	Inventory(ctx context.Context) (chroma.Inventory, error)
	WriteIndexTree(ctx context.Context, doc string, records int, groupsKey string) error
	DeleteOwned(ctx context.Context, ids []string) error
}

// Options control a run.
type Options struct {
	Layout treeload.Layout // how records map to files
	DryRun bool            // read and report; write nothing
}

// Summary is what a run did.
type Summary struct {
	DryRun    bool
	Layout    foreign.Layout // the layout used (detected or named)
	Report    foreign.Report // files, records, what is not exact
	TreeBytes int            // the written tree document's size
}

// Run indexes st: it reads the records, builds the tree and (unless
// o.DryRun) writes it, then deletes the parts of the tree it replaced.
func Run(ctx context.Context, st Store, o Options) (Summary, error) {
	if err := refuseForeignTree(ctx, st); err != nil {
		return Summary{}, err
	}
	recs, err := treeload.Records(ctx, st)
	if err != nil {
		return Summary{}, err
	}
	l, err := treeload.Choose(o.Layout, recs)
	if err != nil {
		return Summary{}, err
	}
	entries, rep := foreign.Build(recs, l)
	if rep.Files == 0 {
		return Summary{}, fmt.Errorf("no record of the %d has a %q: not a %s collection (try --layout custom --path-key KEY)", len(recs), l.PathKey, l.Name)
	}
	raw, err := tree.Encode(entries)
	if err != nil {
		return Summary{}, err
	}
	doc, err := tree.Wrap(raw)
	if err != nil {
		return Summary{}, err
	}
	if !o.DryRun {
		if err := writeTree(ctx, st, doc, len(recs), o.Layout.GroupsKey); err != nil {
			return Summary{}, err
		}
	}
	return Summary{DryRun: o.DryRun, Layout: l, Report: rep, TreeBytes: len(doc)}, nil
}

// refuseForeignTree stops when the collection's path tree is another
// tool's (Mintlify's): it is never replaced.
func refuseForeignTree(ctx context.Context, st Store) error {
	foreignIDs, err := st.NotOwned(ctx, []string{chroma.TreeID})
	if err != nil {
		return err
	}
	if len(foreignIDs) > 0 {
		return fmt.Errorf("the collection's path tree (record %q) was written by another tool (%w); it is never replaced", chroma.TreeID, chroma.ErrForeign)
	}
	return nil
}

// writeTree writes the tree, then deletes the parts of the tree it
// replaced (its own records only). The header records how many records
// the collection then holds (the indexed records of the other tool, its
// own records that are not tree records, the new tree's): a mount's
// refresh compares it with the count to notice records added later. It
// also records groupsKey, the key the entries' groups were read under.
func writeTree(ctx context.Context, st Store, doc string, indexed int, groupsKey string) error {
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
	if err := st.WriteIndexTree(ctx, doc, records, groupsKey); err != nil {
		return fmt.Errorf("write path tree: %w", err)
	}
	return st.DeleteOwned(ctx, stale)
}

// String is the summary chromafs-ingest index prints: the layout (and
// the offsets' unit), records, files, how many files' records disagree on
// their groups, how many files are not exact (a mount lists those it
// shows), and the tree's size.
func (s Summary) String() string {
	rep, l := s.Report, s.Layout
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
		notExact = "not exact: " + strings.Join(parts, ", ") + " (a mount lists those it shows in " + tree.ReportPath + ")"
	}
	verb := "indexed"
	if s.DryRun {
		verb = "dry run, nothing written"
	}
	layout := l.Name
	if rep.Offsets.How != "" {
		layout += ", offsets in " + rep.Offsets.String()
	}
	access := ""
	if rep.Disagree > 0 {
		access = fmt.Sprintf(", %d %s whose records disagree on their groups (shown only to the groups all of a file's records name)",
			rep.Disagree, plural(rep.Disagree, "file", "files"))
	}
	return fmt.Sprintf("%s: layout %s, %d records (%d without a %s, skipped), %d files%s, %s; path tree of %d bytes; no existing record changed",
		verb, layout, rep.Records, rep.Skipped, l.PathKey, rep.Files, access, notExact, s.TreeBytes)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
