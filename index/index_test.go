package index

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/tree"
	"github.com/chromafs/chromafs/treeload"
)

// store is a fake collection: the records another tool wrote, the ids of
// chromafs-ingest's own records, whether the path tree is another tool's;
// it records what a run writes and deletes.
type store struct {
	records     []chroma.RawRecord
	owned       []string
	foreignTree bool
	wrote       []int    // record counts of the trees written
	keys        []string // and their groups keys
	doc         string
	deleted     []string
}

func (s *store) Scan(_ context.Context, fn func([]chroma.RawRecord) error) (int, error) {
	return len(s.records), fn(s.records)
}

func (s *store) Count(context.Context) (int, error) { return len(s.records) + len(s.owned), nil }

func (s *store) NotOwned(_ context.Context, ids []string) ([]string, error) {
	if s.foreignTree && slices.Contains(ids, chroma.TreeID) {
		return []string{chroma.TreeID}, nil
	}
	return nil, nil
}

func (s *store) Inventory(context.Context) (chroma.Inventory, error) {
	return chroma.Inventory{Owned: s.owned, Foreign: len(s.records)}, nil
}

func (s *store) WriteIndexTree(_ context.Context, doc string, records int, groupsKey string) error {
	s.doc, s.wrote, s.keys = doc, append(s.wrote, records), append(s.keys, groupsKey)
	return nil
}

func (s *store) DeleteOwned(_ context.Context, ids []string) error {
	s.deleted = append(s.deleted, ids...)
	return nil
}

// langchain are a LangChain vector store's records of two files.
func langchain() []chroma.RawRecord {
	return []chroma.RawRecord{
		{ID: "u1", Doc: "hello ", Meta: map[string]any{"source": "a.md", "start_index": 0.0}},
		{ID: "u2", Doc: "world\n", Meta: map[string]any{"source": "a.md", "start_index": 6.0}},
		{ID: "u3", Doc: "other", Meta: map[string]any{"source": "b.md", "start_index": 0.0}},
	}
}

var auto = Options{Layout: treeload.Layout{Name: "auto"}}

func TestRun(t *testing.T) {
	// an earlier index in two parts and a page ingest wrote
	old := []string{chroma.TreeID, chroma.TreeID + "#0123456789ab#0", chroma.TreeID + "#0123456789ab#1", "page-1"}
	st := &store{records: langchain(), owned: old}
	sum, err := Run(context.Background(), st, auto)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Report.Files != 2 || sum.Layout.Name != "langchain" || sum.TreeBytes != len(st.doc) {
		t.Fatalf("summary %+v", sum)
	}
	// the header counts the other tool's records, ingest's page and the
	// new tree's records (one: a small tree is not split)
	if want := 3 + 1 + len(chroma.TreeIDs(st.doc)); len(st.wrote) != 1 || st.wrote[0] != want {
		t.Fatalf("tree written with counts %v, want [%d]", st.wrote, want)
	}
	if !slices.Equal(st.keys, []string{""}) {
		t.Fatalf("tree written with groups keys %q, want none recorded as \"\"", st.keys)
	}
	// only the old tree's parts the new tree does not reuse are deleted
	if !slices.Equal(st.deleted, old[1:3]) {
		t.Fatalf("deleted %v, want %v", st.deleted, old[1:3])
	}
	if got := sum.String(); !strings.HasPrefix(got, "indexed: layout langchain") || !strings.Contains(got, "3 records") ||
		!strings.Contains(got, "2 files, not exact: 2 edges") || !strings.Contains(got, "no existing record changed") {
		t.Fatalf("summary %q", got)
	}
	entries := written(t, st)
	if _, ok := entries[tree.ReportPath]; ok {
		t.Fatalf("the index stores a report of inexact files: one for every view")
	}
}

// written decodes the tree st was given.
func written(t *testing.T, st *store) map[string]tree.Entry {
	t.Helper()
	d, err := tree.Decode([]byte(st.doc), tree.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return d.Entries()
}

// TestRunAccess: the index records the groups key it was written with
// (issue 28, finding 3: a mount reads its groups under it), and each file
// takes the strictest access of its records (finding 2): the red team's
// collection, whose path key groups a billing, an admin and a public
// record into one file, gives a file no view sees; the summary counts
// the files whose records disagree.
func TestRunAccess(t *testing.T) {
	recs := []chroma.RawRecord{
		{ID: "b1", Doc: "billing text", Meta: map[string]any{"acl": "billing", "kind": "doc"}},
		{ID: "a1", Doc: "HUNTER2 admin text", Meta: map[string]any{"acl": "admin", "kind": "doc"}},
		{ID: "p1", Doc: "public text", Meta: map[string]any{"kind": "doc"}},
		{ID: "x1", Doc: "billing only", Meta: map[string]any{"acl": "billing", "kind": "invoices"}},
	}
	st := &store{records: recs}
	sum, err := Run(context.Background(), st, Options{Layout: treeload.Layout{Name: "custom", PathKey: "kind", GroupsKey: "acl"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(st.keys, []string{"acl"}) {
		t.Fatalf("tree written with groups keys %q, want [acl]", st.keys)
	}
	entries := written(t, st)
	if e := entries["doc"]; e.IsPublic || len(e.Groups) != 0 {
		t.Errorf("doc: public %v, groups %v; want hidden from every view", e.IsPublic, e.Groups)
	}
	if e := entries["invoices"]; e.IsPublic || !slices.Equal(e.Groups, []string{"billing"}) {
		t.Errorf("invoices: public %v, groups %v", e.IsPublic, e.Groups)
	}
	if got := sum.String(); !strings.Contains(got, "1 file whose records disagree on their groups") {
		t.Errorf("summary %q does not count the file whose records disagree", got)
	}
}

func TestRunWritesNothing(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   *store
		o    Options
		err  string
	}{
		{"dry run", &store{records: langchain(), owned: []string{chroma.TreeID + "#x#0"}}, Options{Layout: auto.Layout, DryRun: true}, ""},
		{"another tool's tree", &store{records: langchain(), foreignTree: true}, auto, "never replaced"},
		{"no file", &store{records: []chroma.RawRecord{{ID: "x", Doc: "d", Meta: map[string]any{"title": "t"}}}}, Options{Layout: treeload.Layout{Name: "custom", PathKey: "path"}}, `has a "path"`},
		{"undetectable layout", &store{records: []chroma.RawRecord{{ID: "x", Doc: "d", Meta: map[string]any{"title": "t"}}}}, auto, "cannot tell the layout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum, err := Run(context.Background(), tc.st, tc.o)
			if tc.err == "" && (err != nil || !strings.HasPrefix(sum.String(), "dry run, nothing written")) {
				t.Fatalf("%v, %q", err, sum)
			}
			if tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
			if tc.name == "another tool's tree" && !errors.Is(err, chroma.ErrForeign) {
				t.Fatalf("%v is not ErrForeign", err)
			}
			if len(tc.st.wrote) != 0 || len(tc.st.deleted) != 0 {
				t.Fatalf("wrote %v, deleted %v", tc.st.wrote, tc.st.deleted)
			}
		})
	}
}

func TestRunLeavesIngestsOwnRecordsOut(t *testing.T) {
	recs := append(langchain(), chroma.RawRecord{ID: "own", Doc: "mine", Meta: map[string]any{"source": "c.md", chroma.KeyOwner: chroma.OwnerIngest}})
	st := &store{records: recs}
	sum, err := Run(context.Background(), st, auto)
	if err != nil || sum.Report.Files != 2 {
		t.Fatalf("ingest's own record was indexed as another tool's: %+v, %v", sum.Report, err)
	}
}
