package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromafs/chromafs/chroma"
)

// seedForeign adds records of another writer, some with ids shaped like
// chromafs-ingest's, and returns a copy of them to compare with later.
func seedForeign(t *testing.T, st *memStore) map[string]chroma.Record {
	t.Helper()
	st.foreign(t, "my-rag-1", map[string]any{"source": "a.md"})
	st.foreign(t, "my-rag-2", nil)
	st.foreign(t, chroma.ChunkID("gone", strings.Repeat("ab", 32), 0), map[string]any{"page": "gone", "chunk_index": 0})
	st.foreign(t, chroma.TreeID+"#0123456789abcdef#0", map[string]any{chroma.KeyOwner: "someone-else"})
	out := map[string]chroma.Record{}
	for id, r := range st.recs {
		out[id] = r
	}
	return out
}

func TestForeignRecordsSurviveRuns(t *testing.T) {
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"a.md": "alpha\n", "gone.md": "soon deleted\n", "d/b.md": "beta\n"})
	st := newMemStore()
	theirs := seedForeign(t, st)
	opt := Options{Src: src, ChunkSize: 64, DefaultPublic: true, Workers: 2}
	edits := []func(){
		func() {},
		func() {
			must(t, os.Remove(filepath.Join(src, "gone.md")))
			writeFiles(t, src, map[string]string{"a.md": "alpha 2\n"})
		},
		func() { must(t, os.Rename(filepath.Join(src, "d"), filepath.Join(src, "e"))) },
	}
	for run, edit := range edits {
		edit()
		sum, err := Run(context.Background(), st, opt)
		if err != nil {
			t.Fatalf("run %d: %v", run+1, err)
		}
		if sum.Foreign != len(theirs) {
			t.Errorf("run %d: %d foreign records counted, want %d", run+1, sum.Foreign, len(theirs))
		}
		for id, want := range theirs {
			if got, ok := st.recs[id]; !ok || got.Text != want.Text {
				t.Errorf("run %d: foreign record %q gone or changed", run+1, id)
			}
		}
		if want := expectedIDs(t, st); len(want)+1+len(theirs) != len(st.recs) {
			t.Errorf("run %d: %d records, want %d chunks + tree + %d foreign", run+1, len(st.recs), len(want), len(theirs))
		}
	}
}

func TestForeignTreeNeverReplaced(t *testing.T) {
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"a.md": "alpha\n"})
	st := newMemStore()
	st.foreign(t, chroma.TreeID, map[string]any{"kind": "mintlify"})
	st.tree = `{"x":{"isPublic":true}}`
	_, err := Run(context.Background(), st, Options{Src: src, ChunkSize: 64, Workers: 1})
	if !errors.Is(err, chroma.ErrForeign) || st.upserts != 0 {
		t.Fatalf("run over a foreign tree: err %v, %d upserts; want ErrForeign and no write", err, st.upserts)
	}
	if st.tree != `{"x":{"isPublic":true}}` {
		t.Errorf("foreign tree replaced")
	}
}

func TestForeignRecordNeverOverwritten(t *testing.T) {
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"a.md": "alpha\n"})
	sum := sha256.Sum256([]byte("alpha\n"))
	id := chroma.ChunkID("a", hex.EncodeToString(sum[:]), 0)
	for _, dry := range []bool{true, false} {
		st := newMemStore()
		st.foreign(t, id, map[string]any{"page": "a", "chunk_index": 0})
		_, err := Run(context.Background(), st, Options{Src: src, ChunkSize: 64, Workers: 1, DryRun: dry})
		if !errors.Is(err, chroma.ErrForeign) || !strings.Contains(err.Error(), id) {
			t.Errorf("dry=%v: err %v, want ErrForeign naming %q", dry, err, id)
		}
		if st.upserts != 0 || st.recs[id].Text != "theirs "+id {
			t.Errorf("dry=%v: foreign record overwritten (%d upserts)", dry, st.upserts)
		}
	}
}

func TestUnreadableFileKeepsItsPage(t *testing.T) {
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"a.md": "alpha\n", "b.md": "beta\n"})
	st := newMemStore()
	opt := Options{Src: src, ChunkSize: 64, Workers: 1}
	if _, err := Run(context.Background(), st, opt); err != nil {
		t.Fatal(err)
	}
	before := st.tree
	for _, fail := range []error{os.ErrPermission, os.ErrNotExist, errors.New("input/output error")} {
		r := newRun(st, opt)
		r.read = func(p string) ([]byte, error) {
			if strings.HasSuffix(p, "b.md") {
				return nil, &os.PathError{Op: "open", Path: p, Err: fail}
			}
			return os.ReadFile(p)
		}
		err := r.do(context.Background())
		if !errors.Is(err, ErrUnreadable) || !strings.Contains(err.Error(), "b.md") {
			t.Errorf("%v: err %v, want ErrUnreadable naming b.md", fail, err)
		}
		if st.tree != before || st.deletions != 0 {
			t.Errorf("%v: tree changed or %d records deleted after a read error", fail, st.deletions)
		}
	}
	if got := st.content(t, "b.md"); got != "beta\n" {
		t.Errorf("b.md after failed runs: %q", got)
	}
}

func TestDimensionMismatchWritesNothing(t *testing.T) {
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"a.md": "alpha\n"})
	for _, dry := range []bool{true, false} {
		st := newMemStore()
		st.dimErr = fmt.Errorf("3 vs 384: %w", chroma.ErrDimension)
		_, err := Run(context.Background(), st, Options{Src: src, ChunkSize: 64, Workers: 1, DryRun: dry})
		if !errors.Is(err, chroma.ErrDimension) || st.upserts != 0 {
			t.Errorf("dry=%v: err %v, %d upserts; want ErrDimension before any write", dry, err, st.upserts)
		}
	}
}

func TestSummaryWords(t *testing.T) {
	s := Summary{Files: 1, Bytes: 6, Chunks: 1, Written: 1, Deleted: 2, Removed: 1, Foreign: 3, Dirs: 2, Links: 1}
	want := "1 file, 6 bytes, 1 chunk; 1 written, 0 unchanged, 2 deleted, 0 skipped, 0 hidden by frontmatter errors; 1 stale record removed, 3 records of other writers left untouched; 2 directories, 1 symbolic link, 0 lazy pointers; 0.00s"
	if got := s.String(); got != want {
		t.Errorf("summary\n got %q\nwant %q", got, want)
	}
	s.DryRun = true
	if got := s.String(); !strings.Contains(got, "1 would be written") || !strings.Contains(got, "2 would be deleted") ||
		!strings.Contains(got, "1 stale record would be removed") {
		t.Errorf("dry-run summary without 'would': %q", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
