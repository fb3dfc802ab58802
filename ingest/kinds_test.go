package ingest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromafs/chromafs/tree"
)

func entriesByPath(t *testing.T, st *memStore) map[string]tree.Entry {
	t.Helper()
	d, err := tree.Decode([]byte(st.tree), tree.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]tree.Entry{}
	for _, e := range d.Entries() {
		out[e.Path] = e
	}
	return out
}

// TestDirectoriesLinksAndAccess: every directory gets an entry (empty ones
// too, nested), as visible as what lies below it; in-tree relative links
// stay links; absolute links to files are stored as files; links out of
// the tree are skipped and listed.
func TestDirectoriesLinksAndAccess(t *testing.T) {
	src := t.TempDir()
	writeFiles(t, src, map[string]string{
		"pub/a.md":      "# a\n",
		"priv/b.md":     "---\npublic: false\ngroups: [admin, ops]\n---\nb\n",
		"mixed/p.md":    "p\n",
		"mixed/q.md":    "---\npublic: false\ngroups: [x]\n---\nq\n",
		"only/deep.md":  "---\npublic: false\ngroups: [sre]\n---\nd\n",
		"only/sub/x.md": "---\npublic: false\ngroups: [admin]\n---\nx\n",
	})
	for _, d := range []string{"empty", "nest/a/b"} {
		must(t, os.MkdirAll(filepath.Join(src, d), 0o755))
	}
	must(t, os.Symlink("../pub/a.md", filepath.Join(src, "mixed/link.md")))
	must(t, os.Symlink("pub", filepath.Join(src, "dirlink")))
	must(t, os.Symlink(filepath.Join(src, "pub/a.md"), filepath.Join(src, "abs.md")))
	must(t, os.Symlink("/etc", filepath.Join(src, "out")))
	st := newMemStore()
	sum, err := Run(context.Background(), st, Options{Src: src, ChunkSize: 64, Workers: 1, DefaultPublic: true})
	must(t, err)
	es := entriesByPath(t, st)
	want := map[string]struct {
		typ    string
		public bool
		groups string
	}{
		".": {tree.TypeDir, true, "admin,ops,sre,x"}, "pub": {tree.TypeDir, true, ""},
		"priv": {tree.TypeDir, false, "admin,ops"}, "mixed": {tree.TypeDir, true, "x"},
		"only": {tree.TypeDir, false, "admin,sre"}, "only/sub": {tree.TypeDir, false, "admin"},
		"empty": {tree.TypeDir, true, ""}, "nest": {tree.TypeDir, true, ""}, "nest/a/b": {tree.TypeDir, true, ""},
		"mixed/link.md": {tree.TypeSymlink, true, ""}, "dirlink": {tree.TypeSymlink, true, ""},
		"abs.md": {tree.TypeFile, true, ""},
	}
	for p, w := range want {
		e, ok := es[p]
		if !ok || e.Type != w.typ || e.IsPublic != w.public || strings.Join(e.Groups, ",") != w.groups {
			t.Errorf("%s: entry %+v, want %+v", p, e, w)
		}
	}
	if es["mixed/link.md"].Target != "../pub/a.md" || es["dirlink"].Target != "pub" {
		t.Errorf("link targets: %q %q", es["mixed/link.md"].Target, es["dirlink"].Target)
	}
	if st.content(t, "abs.md") != "# a\n" {
		t.Errorf("absolute link to a file not stored as that file")
	}
	if _, ok := es["out"]; ok || len(sum.Skipped) != 1 || sum.Skipped[0].Rel != "out" {
		t.Errorf("a link out of the tree: entry %v, skipped %+v", ok, sum.Skipped)
	}
	if sum.Dirs != 10 || sum.Links != 2 {
		t.Errorf("summary: %d directories, %d links; want 10 and 2", sum.Dirs, sum.Links)
	}
	for _, g := range [][]string{nil, {"admin"}} {
		tr := tree.BuildVisible(mustDecode(t, st.tree), g, tree.DefaultLimits)
		if n := tr.Lookup("nest/a/b"); n == nil || !n.IsDir() {
			t.Errorf("groups %v: nested empty directory missing", g)
		}
		if n := tr.Lookup("mixed/link.md"); n == nil || n.Link == nil {
			t.Errorf("groups %v: link missing", g)
		}
		if (tr.Lookup("only") != nil) != (len(g) > 0) {
			t.Errorf("groups %v: only/ visible = %v", g, tr.Lookup("only") != nil)
		}
	}
}

func mustDecode(t *testing.T, doc string) *tree.Doc {
	t.Helper()
	d, err := tree.Decode([]byte(doc), tree.DefaultLimits)
	must(t, err)
	return d
}

// TestLazyPointers: files over --lazy-over or matching --lazy-match become
// pointers (no records), with one digest per piece; the rest stay chunks.
func TestLazyPointers(t *testing.T) {
	src := t.TempDir()
	big := strings.Repeat("0123456789abcdef", (LazyPiece+LazyPiece/2)/16)
	writeFiles(t, src, map[string]string{"video/intro big.bin": big, "docs/a.md": "# a\n", "assets/x.pdf": "%PDF-1.4"})
	st := newMemStore()
	lazy := Lazy{BaseURL: "https://files.example/docs/", Over: 1 << 20, Match: []string{"*.pdf"}}
	sum, err := Run(context.Background(), st, Options{Src: src, ChunkSize: 1024, Workers: 1, DefaultPublic: true, Lazy: lazy})
	must(t, err)
	es := entriesByPath(t, st)
	v := es["video/intro big.bin"]
	if v.URI != "https://files.example/docs/video/intro%20big.bin" || len(v.Chunks) != 2 || v.Chunks[0] != LazyPiece ||
		*v.Size != int64(len(big)) || len(v.ChunkSHA256) != 2 {
		t.Fatalf("big file entry: %+v", v)
	}
	first := sha256.Sum256([]byte(big[:LazyPiece]))
	if v.ChunkSHA256[0] != hex.EncodeToString(first[:]) {
		t.Errorf("piece digest %s", v.ChunkSHA256[0])
	}
	if es["assets/x.pdf"].URI == "" || es["docs/a.md"].URI != "" || sum.Lazy != 2 {
		t.Errorf("pattern pointer %q, text pointer %q, %d lazy", es["assets/x.pdf"].URI, es["docs/a.md"].URI, sum.Lazy)
	}
	for id := range st.recs {
		if strings.Contains(id, "video") || strings.Contains(id, "x.pdf") {
			t.Errorf("a lazy pointer wrote record %q", id)
		}
	}
	for _, bad := range []Lazy{{Over: 5}, {BaseURL: "ftp://h/x", Over: 5}, {BaseURL: "https://h"}, {BaseURL: "https://h", Match: []string{"["}}} {
		if _, err := Run(context.Background(), newMemStore(), Options{Src: src, ChunkSize: 64, Workers: 1, Lazy: bad}); err == nil {
			t.Errorf("lazy options %+v accepted", bad)
		}
	}
}
