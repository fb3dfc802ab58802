package index

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/treeload"
)

// store is a fake collection: the records another tool wrote, the ids of
// chromafs-ingest's own records, whether the path tree is another tool's;
// it records what a run writes and deletes.
type store struct {
	records     []chroma.RawRecord
	owned       []string
	foreignTree bool
	wrote       []int // record counts of the trees written
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

func (s *store) WriteIndexTree(_ context.Context, doc string, records int) error {
	s.doc, s.wrote = doc, append(s.wrote, records)
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
	// only the old tree's parts the new tree does not reuse are deleted
	if !slices.Equal(st.deleted, old[1:3]) {
		t.Fatalf("deleted %v, want %v", st.deleted, old[1:3])
	}
	if got := sum.String(); !strings.HasPrefix(got, "indexed: layout langchain") || !strings.Contains(got, "3 records") ||
		!strings.Contains(got, "2 files, not exact: 2 edges") || !strings.Contains(got, "no existing record changed") {
		t.Fatalf("summary %q", got)
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
