package ingest

import (
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/tree"
)

// memStore is an in-memory Store for the run logic; the real server is
// exercised in integration_test. Like the real one, it deletes only records
// that carry the ownership mark.
type memStore struct {
	mu        sync.Mutex // protects the following
	recs      map[string]chroma.Record
	tree      string
	upserts   int
	dim       int // the collection's embedding dimension (Dimension)
	failTree  bool
	deletions int
	dimErr    error
}

func newMemStore() *memStore { return &memStore{recs: map[string]chroma.Record{}} }

func (m *memStore) LoadTree(context.Context) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.recs[chroma.TreeID]; !ok {
		return nil, chroma.ErrNoTree
	}
	return []byte(m.tree), nil
}

func (m *memStore) Inventory(context.Context) (chroma.Inventory, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var inv chroma.Inventory
	for id, r := range m.recs {
		if chroma.Owned(r.Metadata) {
			inv.Owned = append(inv.Owned, id)
		} else {
			inv.Foreign++
		}
	}
	return inv, nil
}

func (m *memStore) NotOwned(_ context.Context, ids []string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, id := range ids {
		if r, ok := m.recs[id]; ok && !chroma.Owned(r.Metadata) {
			out = append(out, id)
		}
	}
	return out, nil
}

func (m *memStore) CheckDimension(context.Context) error { return m.dimErr }

func (m *memStore) Dimension(context.Context) (int, error) { return m.dim, nil }

func (m *memStore) Upsert(_ context.Context, recs []chroma.Record) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(recs) > chroma.MaxWrite {
		return errors.New("batch too large")
	}
	m.upserts++
	for _, r := range recs {
		m.recs[r.ID] = r
	}
	return nil
}

func (m *memStore) WriteTree(_ context.Context, doc string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failTree {
		return errors.New("injected failure")
	}
	m.tree = doc
	m.recs[chroma.TreeID] = chroma.Record{ID: chroma.TreeID, Metadata: v2.NewDocumentMetadata(
		v2.NewStringAttribute(chroma.KeyOwner, chroma.OwnerIngest))}
	return nil
}

func (m *memStore) DeleteOwned(_ context.Context, ids []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		if r, ok := m.recs[id]; ok && chroma.Owned(r.Metadata) {
			delete(m.recs, id)
			m.deletions++
		}
	}
	return nil
}

// foreign adds a record of another writer.
func (m *memStore) foreign(t *testing.T, id string, md map[string]any) {
	t.Helper()
	meta, err := v2.NewDocumentMetadataFromMap(md)
	if err != nil {
		t.Fatal(err)
	}
	m.recs[id] = chroma.Record{ID: id, Text: "theirs " + id, Metadata: meta}
}

// content reassembles a page from the store as a reader would.
func (m *memStore) content(t *testing.T, path string) string {
	t.Helper()
	d, err := tree.Decode([]byte(m.tree), tree.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	for slug, e := range d.Entries() {
		if e.Path != path {
			continue
		}
		var sb strings.Builder
		for i := range e.Chunks {
			r, ok := m.recs[chroma.ChunkID(slug, e.SHA256, i)]
			if !ok {
				t.Fatalf("%s: chunk %d missing", path, i)
			}
			text := r.Text
			if enc, _ := r.Metadata.GetString(chroma.KeyChunkEncoding); enc == chroma.EncodingBase64 {
				b, err := base64.StdEncoding.DecodeString(text)
				if err != nil || len(text) > 64 || r.EmbedText == "" {
					t.Fatalf("%s: binary chunk %d: %v, %d bytes of base64, embed %q", path, i, err, len(text), r.EmbedText)
				}
				text = string(b)
			}
			sb.WriteString(text)
		}
		return sb.String()
	}
	t.Fatalf("%s not in tree", path)
	return ""
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRunLifecycle(t *testing.T) {
	src := t.TempDir()
	writeFiles(t, src, map[string]string{
		"a.md":         strings.Repeat("alpha\n", 100),
		"dir/b.mdx":    "---\ngroups: [admin]\n---\nbeta",
		"dir/c.md":     "gamma\r\n",
		"bad.md":       "---\npublic: maybe\n---\n",
		"binary.bin":   strings.Repeat("\xff\xfe\x00\x01", 40),
		"dir/empty.md": "",
	})
	st := newMemStore()
	opt := Options{Src: src, ChunkSize: 64, DefaultPublic: true, Workers: 3}
	ctx := context.Background()

	sum, err := Run(ctx, st, opt)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Files != 6 || sum.Written != 6 || sum.Hidden != 1 || len(sum.Skipped) != 0 {
		t.Fatalf("first run: %+v", sum)
	}
	if got := st.content(t, "binary.bin"); got != strings.Repeat("\xff\xfe\x00\x01", 40) {
		t.Errorf("binary.bin reassembled wrongly: %q", got)
	}
	if got := st.content(t, "a.md"); got != strings.Repeat("alpha\n", 100) {
		t.Errorf("a.md reassembled wrongly")
	}
	// each text chunk says the line of its page it begins on (a search
	// numbers the lines it shows from it); binary chunks do not
	for slug, want := range map[string][]int64{"a": {1, 11, 21}, "binary": nil} {
		d, err := tree.Decode([]byte(st.tree), tree.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		e, ok := d.Entries()[slug]
		if !ok || len(e.Chunks) < 2 {
			t.Fatalf("no page %q of several chunks in %v", slug, d.Entries())
		}
		for i := range e.Chunks {
			line, ok := st.recs[chroma.ChunkID(slug, e.SHA256, i)].Metadata.GetInt(chroma.KeyChunkLine)
			switch {
			case want == nil && ok:
				t.Errorf("%s chunk %d: chunk_line %d on a binary chunk", slug, i, line)
			case want != nil && i < len(want) && (!ok || line != want[i]):
				t.Errorf("%s chunk %d: chunk_line %d (%v), want %d", slug, i, line, ok, want[i])
			}
		}
	}

	sum, _ = Run(ctx, st, opt)
	if sum.Written != 0 || sum.Unchanged != 6 || st.deletions != 0 {
		t.Errorf("second run without edits: %+v, %d deletions", sum, st.deletions)
	}

	writeFiles(t, src, map[string]string{"dir/c.md": "gamma changed\r\n"})
	if err := os.Remove(filepath.Join(src, "a.md")); err != nil {
		t.Fatal(err)
	}
	sum, _ = Run(ctx, st, opt)
	if sum.Written != 1 || sum.Deleted != 1 || sum.Unchanged != 4 {
		t.Errorf("run after edit+delete: %+v", sum)
	}
	if want := expectedIDs(t, st); len(want)+1 != len(st.recs) {
		t.Errorf("store holds %d records, the tree references %d chunks (+1 tree record)", len(st.recs), len(want))
	}
	if got := st.content(t, "dir/c.md"); got != "gamma changed\r\n" {
		t.Errorf("dir/c.md = %q", got)
	}
}

// expectedIDs lists the records the current tree references, failing on
// any that is missing.
func expectedIDs(t *testing.T, st *memStore) map[string]bool {
	t.Helper()
	d, err := tree.Decode([]byte(st.tree), tree.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for slug, e := range d.Entries() {
		for i := range e.Chunks {
			id := chroma.ChunkID(slug, e.SHA256, i)
			if _, ok := st.recs[id]; !ok {
				t.Errorf("record %q missing", id)
			}
			want[id] = true
		}
	}
	return want
}

func TestFailedTreeWriteKeepsPreviousTree(t *testing.T) {
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"p.md": "version one\n"})
	st := newMemStore()
	opt := Options{Src: src, ChunkSize: 64, DefaultPublic: true, Workers: 1}
	if _, err := Run(context.Background(), st, opt); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, src, map[string]string{"p.md": "version two\n"})
	st.failTree = true
	if _, err := Run(context.Background(), st, opt); err == nil {
		t.Fatal("run with a failing tree write succeeded")
	}
	if got := st.content(t, "p.md"); got != "version one\n" {
		t.Errorf("previous tree no longer reads its page: %q", got)
	}
	if st.deletions != 0 {
		t.Errorf("%d records deleted before the tree was written", st.deletions)
	}
}

func TestDryRun(t *testing.T) {
	src := t.TempDir()
	writeFiles(t, src, map[string]string{"p.md": strings.Repeat("x", 5000)})
	st := newMemStore()
	sum, err := Run(context.Background(), st, Options{Src: src, ChunkSize: 1000, DryRun: true, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Written != 1 || sum.Chunks != 5 || st.upserts != 0 || st.tree != "" {
		t.Errorf("dry run: %+v, %d upserts, tree %q", sum, st.upserts, st.tree)
	}
}

func TestSlugs(t *testing.T) {
	files := []SourceFile{{Rel: ".hidden"}, {Rel: "a"}, {Rel: "a.md"}, {Rel: "a.mdx"}, {Rel: "d/.x"}, {Rel: "d/y.md"}}
	got := strings.Join(Slugs(files), " ")
	if want := ".hidden a a.md a.mdx d/.x d/y"; got != want {
		t.Errorf("slugs %q, want %q", got, want)
	}
}

func TestBadChunkSize(t *testing.T) {
	if _, err := Run(context.Background(), newMemStore(), Options{Src: t.TempDir(), ChunkSize: chroma.MaxDocument + 1}); err == nil {
		t.Error("chunk size above the document cap accepted")
	}
}
