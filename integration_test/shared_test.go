package integration_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/internal/testenv"
)

// These tests share a collection with "another writer": the official
// chromadb JavaScript client (testdata/foreign-writer.cjs), writing records
// the way a RAG pipeline does. chromafs-ingest must never overwrite or
// delete them, whatever their ids look like.

// foreignRecord is one record as the other writer wrote or reads it.
type foreignRecord struct {
	ID        string         `json:"id"`
	Document  string         `json:"document"`
	Metadata  map[string]any `json:"metadata"`
	Embedding []float64      `json:"embedding"`
}

// foreignWriter runs testdata/foreign-writer.cjs.
func foreignWriter(t *testing.T, name string, stdin []byte, args ...string) []byte {
	t.Helper()
	testenv.Require(t, env.script != "" || os.Getenv("CHROMAFS_NODE_MODULES") != "",
		"external server and no CHROMAFS_NODE_MODULES for the chromadb JS client")
	modules := os.Getenv("CHROMAFS_NODE_MODULES")
	if modules == "" {
		out, err := exec.Command(filepath.Join(repoRoot(), "scripts", "chroma-server.sh"), "modules").Output()
		if err != nil {
			t.Fatalf("chroma-server.sh modules: %v", err)
		}
		modules = strings.TrimSpace(string(out))
	}
	script := filepath.Join(repoRoot(), "integration_test", "testdata", "foreign-writer.cjs")
	cmd := exec.Command("node", append([]string{script, modules, env.url, name}, args...)...)
	cmd.Stdin = strings.NewReader(string(stdin))
	var errb strings.Builder
	cmd.Stderr = &errb
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("foreign writer %v: %v: %s", args, err, errb.String())
	}
	return out
}

func foreignAdd(t *testing.T, name string, recs []foreignRecord) {
	t.Helper()
	b, err := json.Marshal(recs)
	must(t, err)
	foreignWriter(t, name, b, "add")
}

// foreignGet reads records back through the other writer's client, sorted
// by id; missing ids are simply absent.
func foreignGet(t *testing.T, name string, ids []string) []foreignRecord {
	t.Helper()
	var out []foreignRecord
	must(t, json.Unmarshal(foreignWriter(t, name, nil, append([]string{"get"}, ids...)...), &out))
	return out
}

// vector is a deterministic embedding of dim dimensions.
func vector(seed, dim int) []float64 {
	v := make([]float64, dim)
	for i := range v {
		v[i] = math.Round(math.Sin(float64(seed*31+i))*1e4) / 1e4
	}
	return v
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// writeSource writes files (path -> content) below dir.
func writeSource(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		must(t, os.MkdirAll(filepath.Dir(full), 0o755))
		must(t, os.WriteFile(full, []byte(c), 0o644))
	}
}

func sharedSource(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	files := map[string]string{}
	for i := 0; i < 24; i++ {
		files[fmt.Sprintf("guides/s%d/page-%02d.md", i%3, i)] = fmt.Sprintf("# Page %d\n\n%s", i, strings.Repeat("text of the page\n", 40+i*9))
	}
	files["index.mdx"] = "# Welcome\n"
	files["api/auth.md"] = "---\ngroups: [admin]\n---\nprivate page\n"
	writeSource(t, src, files)
	return src
}

// seedForeign writes the other writer's records: plain RAG records, and
// records whose ids and metadata imitate chromafs-ingest's without its
// ownership mark.
func seedForeign(t *testing.T, name string, dim int) []foreignRecord {
	t.Helper()
	fakeSHA := strings.Repeat("0f", 32)
	recs := []foreignRecord{
		{ID: "my-rag-1", Document: "chunk one of a RAG pipeline", Metadata: map[string]any{"source": "handbook.pdf", "page": 1}},
		{ID: "my-rag-2", Document: "chunk two", Metadata: map[string]any{"source": "handbook.pdf", "page": 2}},
		{ID: "my-rag-3", Document: "chunk three", Metadata: map[string]any{"source": "faq.md"}},
		{ID: "7b1e4a0c-2f7d-4c55-9a57-1f0e4c7a9d21", Document: "uuid id", Metadata: map[string]any{"source": "x"}},
		// Shaped like chromafs chunks of pages that this ingest writes.
		{ID: chroma.ChunkID("index", fakeSHA, 0), Document: "imitation", Metadata: map[string]any{
			chroma.KeyPage: "index", chroma.KeyChunkIndex: 0, chroma.KeyPageSHA: fakeSHA}},
		{ID: chroma.ChunkID("guides/s0/page-00", fakeSHA, 1), Document: "imitation 2", Metadata: map[string]any{
			chroma.KeyPage: "guides/s0/page-00", chroma.KeyChunkIndex: 1}},
		// Shaped like a tree part; and one with the mark's key but another value.
		{ID: chroma.TreeID + "#0123456789abcdef#0", Document: "not a tree part", Metadata: map[string]any{chroma.KeyTreePart: 0}},
		{ID: "marked-by-someone-else", Document: "x", Metadata: map[string]any{chroma.KeyOwner: "another-tool"}},
	}
	for i := range recs {
		recs[i].Embedding = vector(i, dim)
	}
	foreignAdd(t, name, recs)
	got := foreignGet(t, name, foreignIDs(recs))
	if len(got) != len(recs) {
		t.Fatalf("the other writer wrote %d records, %d read back: the checks of what is left would compare fewer", len(recs), len(got))
	}
	docs := map[string]string{}
	for _, r := range got {
		docs[r.ID] = r.Document
	}
	for _, r := range recs {
		if d, ok := docs[r.ID]; !ok || d != r.Document {
			t.Fatalf("record %q read back: %v, document %q; written with %q", r.ID, ok, d, r.Document)
		}
	}
	return got
}

func foreignIDs(recs []foreignRecord) []string {
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	return ids
}

// checkForeignIntact asserts every record of the other writer is still there,
// unchanged: id, document, metadata and embedding.
func checkForeignIntact(t *testing.T, name string, want []foreignRecord, when string) {
	t.Helper()
	got := foreignGet(t, name, foreignIDs(want))
	if len(got) != len(want) {
		t.Fatalf("%s: %d of the other writer's %d records left", when, len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("%s: record %q changed:\n got %+v\nwant %+v", when, want[i].ID, got[i], want[i])
		}
	}
}

// ownedIDs lists the records that carry chromafs-ingest's mark.
func ownedIDs(t *testing.T, name string) map[string]bool {
	t.Helper()
	inv, err := openStore(t, name).Inventory(t.Context())
	must(t, err)
	out := map[string]bool{}
	for _, id := range inv.Owned {
		out[id] = true
	}
	return out
}

// TestIngestSharedCollection: a collection holding another writer's records
// goes through three ingest runs with edits, deletions and renames; the
// other writer's records survive record for record, chromafs's own records
// are exactly what its tree references, and the summary's counts are true.
func TestIngestSharedCollection(t *testing.T) {
	requireServer(t)
	name := collectionName(t)
	theirs := seedForeign(t, name, 384) // consistent_hash's dimension
	src := sharedSource(t)
	args := []string{"--chroma-url", env.url, "--collection", name, "--quiet", "--chunk-size", "512", "--keep-previous=false", src}

	edits := []struct {
		what              string
		edit              func()
		deleted, modified int
	}{
		{"first ingest", func() {}, 0, 0},
		{"edits, a deletion and renames", func() {
			writeSource(t, src, map[string]string{"guides/s0/page-00.md": "# Page 0, rewritten\n", "index.mdx": "# Welcome!\n"})
			must(t, os.Remove(filepath.Join(src, "guides/s1/page-01.md")))
			must(t, os.Rename(filepath.Join(src, "guides/s2/page-02.md"), filepath.Join(src, "guides/s2/renamed.md")))
			must(t, os.Rename(filepath.Join(src, "guides/s1"), filepath.Join(src, "moved")))
		}, 1 + 1 + 7, 2},
		{"a directory deleted, a page added", func() {
			must(t, os.RemoveAll(filepath.Join(src, "moved")))
			writeSource(t, src, map[string]string{"new/page.md": "new\n"})
		}, 7, 0},
	}
	for i, e := range edits {
		e.edit()
		before := ownedIDs(t, name)
		dry, errOut, code := ingestCmd(t, nil, append([]string{"--dry-run"}, args...)...)
		if code != 0 {
			t.Fatalf("run %d (%s) dry run: exit %d: %s", i+1, e.what, code, errOut)
		}
		out, errOut, code := ingestCmd(t, nil, args...)
		if code != 0 {
			t.Fatalf("run %d (%s): exit %d: %s", i+1, e.what, code, errOut)
		}
		s, d := parseSummary(t, out), parseSummary(t, dry)
		if !strings.Contains(dry, "would be written") || d != s {
			t.Errorf("run %d: dry run %+v (%q) does not announce the real run %+v", i+1, d, dry, s)
		}
		after := ownedIDs(t, name)
		removed := 0
		for id := range before {
			if !after[id] {
				removed++
			}
		}
		if s.deleted != e.deleted || s.removed != removed || s.foreign != len(theirs) {
			t.Errorf("run %d (%s): summary %+v; want %d pages deleted, %d records removed (as observed), %d foreign",
				i+1, e.what, s, e.deleted, removed, len(theirs))
		}
		checkForeignIntact(t, name, theirs, fmt.Sprintf("after run %d (%s)", i+1, e.what))
		st := openStore(t, name)
		entries := loadEntries(t, st)
		checkAllPages(t, st, src, entries)
		checkExactIDs(t, st, entries, foreignIDs(theirs)...)
	}
}

// TestIngestNeverOverwritesForeign: a record of another writer under the very
// id ingest would write, or a path tree written by another tool, stops the
// run (and its dry run) with exit 1 before anything is written.
func TestIngestNeverOverwritesForeign(t *testing.T) {
	requireServer(t)
	src := t.TempDir()
	page := "# Collide\n"
	writeSource(t, src, map[string]string{"collide.md": page, "other.md": "other\n"})
	cases := []struct {
		name string
		rec  foreignRecord
		want string
	}{
		{"same chunk id", foreignRecord{ID: chroma.ChunkID("collide", sha256Hex([]byte(page)), 0), Document: "theirs",
			Metadata: map[string]any{"source": "theirs"}}, "refusing to overwrite"},
		{"foreign path tree", foreignRecord{ID: chroma.TreeID, Document: `{"guide":{"isPublic":true,"groups":[]}}`,
			Metadata: map[string]any{"kind": "mintlify"}}, "written by another tool"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := collectionName(t)
			tc.rec.Embedding = vector(1, 384)
			foreignAdd(t, name, []foreignRecord{tc.rec})
			want := foreignGet(t, name, []string{tc.rec.ID})
			for _, dry := range []bool{true, false} {
				args := []string{"--chroma-url", env.url, "--collection", name, "--quiet", src}
				if dry {
					args = append([]string{"--dry-run"}, args...)
				}
				_, errOut, code := ingestCmd(t, nil, args...)
				if code != 1 || !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, tc.rec.ID) {
					t.Errorf("dry=%v: exit %d, stderr %q; want exit 1 naming %q and %q", dry, code, errOut, tc.rec.ID, tc.want)
				}
				checkForeignIntact(t, name, want, fmt.Sprintf("dry=%v", dry))
				ids, err := openStore(t, name).IDs(t.Context())
				must(t, err)
				if len(ids) != 1 {
					t.Errorf("dry=%v: collection holds %d records after a refused run, want the foreign one only: %v", dry, len(ids), ids)
				}
			}
		})
	}
}

// TestDryRunDimensionMismatch: a collection of 3-dimensional embeddings
// (written by the other tool) makes the dry run fail exactly like the real
// run, which writes nothing; with a matching embedding function both pass
// and agree.
func TestDryRunDimensionMismatch(t *testing.T) {
	requireServer(t)
	name := collectionName(t)
	theirs := seedForeign(t, name, 3)
	src := sharedSource(t)
	base := []string{"--chroma-url", env.url, "--collection", name, "--quiet"}
	var lines []string
	for _, dry := range []bool{true, false} {
		args := append(append([]string{}, base...), src)
		if dry {
			args = append([]string{"--dry-run"}, args...)
		}
		_, errOut, code := ingestCmd(t, nil, args...)
		if code != 1 || !strings.Contains(errOut, "3-dimensional") || !strings.Contains(errOut, "384-dimensional") {
			t.Errorf("dry=%v: exit %d, stderr %q; want exit 1 and the dimensions", dry, code, errOut)
		}
		lines = append(lines, strings.TrimSpace(errOut))
	}
	if lines[0] != lines[1] {
		t.Errorf("dry run and real run fail differently:\n%s\n%s", lines[0], lines[1])
	}
	ids, err := openStore(t, name).IDs(t.Context())
	must(t, err)
	if len(ids) != len(theirs) {
		t.Errorf("failed run left %d records, want the %d foreign ones", len(ids), len(theirs))
	}
	matching := append(base, "--embedding-config", `{"dim":3}`, src)
	dry, errOut, code := ingestCmd(t, nil, append([]string{"--dry-run"}, matching...)...)
	out, errOut2, code2 := ingestCmd(t, nil, matching...)
	if code != 0 || code2 != 0 {
		t.Fatalf("matching dimension: dry exit %d (%s), real exit %d (%s)", code, errOut, code2, errOut2)
	}
	if d, s := parseSummary(t, dry), parseSummary(t, out); d != s || s.written != 26 {
		t.Errorf("dry run %+v vs real run %+v; want equal, 26 written", d, s)
	}
	checkForeignIntact(t, name, theirs, "after the matching run")
}
