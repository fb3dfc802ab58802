package integration_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/tree"
)

// loadEntries reads and decodes the stored tree: its pages (files).
func loadEntries(t *testing.T, st *chroma.Store) map[string]tree.Entry {
	t.Helper()
	doc, err := st.LoadTree(context.Background())
	if err != nil {
		t.Fatalf("LoadTree: %v", err)
	}
	d, err := tree.Decode(doc, tree.DefaultLimits)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if d.Warnings.Count() != 0 {
		t.Errorf("tree written by ingest has warnings: %v", d.Warnings.List)
	}
	pages := map[string]tree.Entry{} // directories and links are checked by TestEveryFileOfADocsRepo
	for slug, e := range d.Entries() {
		if e.Type == tree.TypeFile {
			pages[slug] = e
		}
	}
	return pages
}

// checkAllPages fetches every page through chroma.Store and compares it
// with the source file, byte for byte. It returns the number of pages.
func checkAllPages(t *testing.T, st *chroma.Store, src string, entries map[string]tree.Entry) int {
	t.Helper()
	refs := make([]chroma.PageRef, 0, len(entries))
	for slug, e := range entries {
		refs = append(refs, chroma.PageRef{Slug: slug, SHA256: e.SHA256, Chunks: e.Chunks})
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].Slug < refs[j].Slug })
	pages, err := st.FetchPages(context.Background(), refs)
	if err != nil {
		t.Fatalf("FetchPages: %v", err)
	}
	for _, ref := range refs {
		e := entries[ref.Slug]
		want, err := os.ReadFile(filepath.Join(src, filepath.FromSlash(e.Path)))
		if err != nil {
			t.Errorf("page %q has no source file: %v", ref.Slug, err)
			continue
		}
		p := pages[ref.Slug]
		if p.Err != nil {
			t.Errorf("page %q: %v", ref.Slug, p.Err)
			continue
		}
		if got := []byte(strings.Join(p.Chunks, "")); !bytes.Equal(got, want) {
			t.Errorf("page %q: %d bytes read back differ from the %d-byte source", ref.Slug, len(got), len(want))
		}
	}
	return len(refs)
}

var summaryRE = regexp.MustCompile(`(\d+) files?, (\d+) bytes?, (\d+) chunks?; (\d+) (?:would be )?written, (\d+) unchanged, ` +
	`(\d+) (?:would be )?deleted, (\d+) skipped, \d+ hidden by frontmatter errors; (\d+) stale records? (?:would be )?removed, ` +
	`(\d+) records? of other writers left untouched`)

type summary struct{ files, bytes, chunks, written, unchanged, deleted, skipped, removed, foreign int }

func parseSummary(t *testing.T, out string) summary {
	t.Helper()
	m := summaryRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no summary line in %q", out)
	}
	n := make([]int, len(m))
	for i := 1; i < len(m); i++ {
		n[i], _ = strconv.Atoi(m[i])
	}
	return summary{n[1], n[2], n[3], n[4], n[5], n[6], n[7], n[8], n[9]}
}

func TestIngestRoundTrip(t *testing.T) {
	requireServer(t)
	src := t.TempDir()
	stats, err := corpus.Generate(src, corpus.Spec{Files: 1000, Large: []int64{5 << 20}, Edge: true, Private: 50, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	skipped := addUnreadable(t, src)
	name := collectionName(t)
	start := time.Now()
	out, errOut, code := ingestCmd(t, nil, "--chroma-url", env.url, "--collection", name, "--quiet", src)
	secs := time.Since(start).Seconds()
	if code != 0 {
		t.Fatalf("ingest exit %d: %s", code, errOut)
	}
	sum := parseSummary(t, out)
	fmt.Printf("INGEST THROUGHPUT: %d files, %.1f MiB in %.2fs: %.0f files/s, %.2f MiB/s\n",
		sum.files, float64(sum.bytes)/(1<<20), secs, float64(sum.files)/secs, float64(sum.bytes)/(1<<20)/secs)
	if sum.files != stats.Files+1 || sum.written != sum.files || sum.skipped != len(skipped) || !strings.Contains(out, " 1 symbolic link,") {
		t.Errorf("summary %+v: want %d files (corpus + binary.dat) and 1 symbolic link (inside), all written, %d skipped:\n%s", sum, stats.Files+1, len(skipped), out)
	}
	for _, s := range skipped {
		if !strings.Contains(errOut, "skipped: "+s) {
			t.Errorf("stderr does not list skipped %q:\n%s", s, errOut)
		}
	}
	st := openStore(t, name)
	entries := loadEntries(t, st)
	if n := checkAllPages(t, st, src, entries); n != sum.files {
		t.Errorf("read back %d pages, ingest reported %d", n, sum.files)
	}
	checkTreeParts(t, st)
	checkRangedRead(t, st, src, entries, "large/big-0")
	checkAccess(t, entries)
}

// addUnreadable adds what ingest must skip, returning the listed names,
// and a binary file, which it must not skip.
func addUnreadable(t *testing.T, src string) []string {
	t.Helper()
	must(t, os.WriteFile(filepath.Join(src, "binary.dat"), []byte{0xff, 0xfe, 0x00, 0x80}, 0o644))
	must(t, os.Symlink("/etc/hostname", filepath.Join(src, "escape-link.md")))
	must(t, os.Symlink("edge/crlf.md", filepath.Join(src, "inside-link.md")))
	l, err := net.Listen("unix", filepath.Join(src, "sock"))
	must(t, err)
	t.Cleanup(func() { l.Close() })
	return []string{"escape-link.md: symlink leaves", "sock: not a regular file"}
}

func checkTreeParts(t *testing.T, st *chroma.Store) {
	t.Helper()
	ids, err := st.IDs(context.Background())
	must(t, err)
	parts := 0
	for _, id := range ids {
		if strings.HasPrefix(id, chroma.TreeID+"#") {
			parts++
		}
	}
	if parts < 2 {
		t.Errorf("a 1,000-page tree should be stored in several parts, found %d", parts)
	}
}

// checkRangedRead fetches two middle chunks of a large page and compares
// them with the matching byte range of the source.
func checkRangedRead(t *testing.T, st *chroma.Store, src string, entries map[string]tree.Entry, slug string) {
	t.Helper()
	e, ok := entries[slug]
	if !ok || len(e.Chunks) < 10 {
		t.Fatalf("page %q missing or too small for a ranged read: %+v", slug, e)
	}
	k := len(e.Chunks) / 2
	var off int64
	for _, n := range e.Chunks[:k] {
		off += n
	}
	got, err := st.FetchPage(context.Background(), chroma.PageRef{Slug: slug, SHA256: e.SHA256, Chunks: e.Chunks}, []int{k, k + 1})
	must(t, err)
	want, err := os.ReadFile(filepath.Join(src, e.Path))
	must(t, err)
	if joined := strings.Join(got, ""); joined != string(want[off:off+e.Chunks[k]+e.Chunks[k+1]]) {
		t.Errorf("ranged read of chunks %d-%d does not match bytes %d.. of the source", k, k+1, off)
	}
}

func checkAccess(t *testing.T, entries map[string]tree.Entry) {
	t.Helper()
	private := 0
	for slug, e := range entries {
		if !e.IsPublic {
			private++
			if len(e.Groups) != 1 || e.Groups[0] != "team" {
				t.Errorf("private page %q has groups %v, want [team]", slug, e.Groups)
			}
		}
	}
	if private != 20 {
		t.Errorf("%d private pages, want 20 (every 50th of 1000)", private)
	}
}

func TestReingestAfterEdits(t *testing.T) {
	requireServer(t)
	src := t.TempDir()
	_, err := corpus.Generate(src, corpus.Spec{Files: 120, Edge: true, Seed: 2})
	must(t, err)
	name := collectionName(t)
	args := []string{"--chroma-url", env.url, "--collection", name, "--quiet", "--chunk-size", "1024", "--keep-previous=false", src}
	out, errOut, code := ingestCmd(t, nil, args...)
	if code != 0 {
		t.Fatalf("first ingest exit %d: %s", code, errOut)
	}
	first := parseSummary(t, out)

	edits := []string{"guides/page-0000.mdx", "edge/crlf.md", "edge/empty.md"}
	for _, p := range edits {
		f, err := os.OpenFile(filepath.Join(src, p), os.O_APPEND|os.O_WRONLY, 0)
		must(t, err)
		_, err = f.WriteString("\nappended line\n")
		must(t, err)
		must(t, f.Close())
	}
	must(t, os.Remove(filepath.Join(src, "guides/page-0001.md")))
	must(t, os.RemoveAll(filepath.Join(src, "edge/with space")))
	must(t, os.MkdirAll(filepath.Join(src, "new"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "new/added.md"), []byte("---\ngroups: [ops]\n---\nnew page\n"), 0o644))

	out, errOut, code = ingestCmd(t, nil, args...)
	if code != 0 {
		t.Fatalf("second ingest exit %d: %s", code, errOut)
	}
	second := parseSummary(t, out)
	want := summary{files: first.files - 1, written: len(edits) + 1, unchanged: first.files - 2 - len(edits), deleted: 2}
	if second.files != want.files || second.written != want.written || second.unchanged != want.unchanged || second.deleted != want.deleted {
		t.Errorf("second run summary %+v, want files/written/unchanged/deleted %d/%d/%d/%d",
			second, want.files, want.written, want.unchanged, want.deleted)
	}
	st := openStore(t, name)
	entries := loadEntries(t, st)
	checkAllPages(t, st, src, entries)
	checkExactIDs(t, st, entries)
	if e := entries["new/added"]; e.IsPublic || len(e.Groups) != 1 || e.Groups[0] != "ops" {
		t.Errorf("new/added access = %v %v, want private [ops]", e.IsPublic, e.Groups)
	}

	out, errOut, code = ingestCmd(t, nil, args...)
	if third := parseSummary(t, out); code != 0 || third.written != 0 || third.deleted != 0 || third.unchanged != third.files {
		t.Errorf("third run (no edits): exit %d summary %+v: want nothing written or deleted (%s)", code, third, errOut)
	}
}

// checkExactIDs asserts the collection holds exactly the records the tree
// references, no stale chunks, no stale tree parts, besides the records of
// other writers named in foreign.
func checkExactIDs(t *testing.T, st *chroma.Store, entries map[string]tree.Entry, foreign ...string) {
	t.Helper()
	want := map[string]bool{}
	for _, id := range foreign {
		want[id] = true
	}
	for slug, e := range entries {
		for i := range e.Chunks {
			want[chroma.ChunkID(slug, e.SHA256, i)] = true
		}
	}
	doc, err := st.LoadTree(context.Background())
	must(t, err)
	for _, id := range chroma.TreeIDs(string(doc)) {
		want[id] = true
	}
	ids, err := st.IDs(context.Background())
	must(t, err)
	got := map[string]bool{}
	for _, id := range ids {
		got[id] = true
		if !want[id] {
			t.Errorf("stale record %q left in the collection", id)
		}
	}
	for id := range want {
		if !got[id] {
			t.Errorf("record %q missing from the collection", id)
		}
	}
}

func TestIngestErrors(t *testing.T) {
	requireServer(t)
	src := t.TempDir()
	must(t, os.WriteFile(filepath.Join(src, "a.md"), []byte("a\n"), 0o644))
	badTok := filepath.Join(t.TempDir(), "token")
	must(t, os.WriteFile(badTok, []byte("secret-token-value\n"), 0o644))
	port, err := freePort()
	must(t, err)
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unreachable", []string{"--chroma-url", fmt.Sprintf("http://127.0.0.1:%d", port), "--collection", "abc", src}, 1, "unreachable"},
		{"unknown database", []string{"--chroma-url", env.url, "--database", "nope", "--collection", "abc", src}, 1, `database "nope": not found`},
		{"unknown tenant", []string{"--chroma-url", env.url, "--tenant", "nope", "--collection", "abc", src}, 1, `tenant "nope"`},
		{"bad collection name", []string{"--chroma-url", env.url, "--collection", "a", src}, 2, `collection name "a": want 3 to 512 characters`},
		{"a collection name out of its database", []string{"--chroma-url", env.url, "--collection", "../other/collections/abc", src}, 2, "collection name"},
		{"bad database name", []string{"--chroma-url", env.url, "--database", "../x", "--collection", "abc", src}, 2, "--database"},
		{"no collection", []string{"--chroma-url", env.url, src}, 2, "no collection"},
		{"chunk too big", []string{"--chroma-url", env.url, "--collection", "abc", "--chunk-size", "20000", src}, 2, "16 KiB"},
		{"open token file", []string{"--chroma-url", env.url, "--collection", "abc", "--token-file", badTok, src}, 2, "must not be readable"},
		{"not a dir", []string{"--chroma-url", env.url, "--collection", "abc", filepath.Join(src, "a.md")}, 1, "not a directory"},
		{"unknown embedding", []string{"--chroma-url", env.url, "--collection", "abc", "--embedding", "nope", src}, 1, "available:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			_, errOut, code := ingestCmd(t, nil, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut, tc.code, tc.want)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %s; errors must come within seconds", d)
			}
			if strings.Contains(errOut, "secret-token-value") {
				t.Errorf("token leaked to stderr")
			}
		})
	}
	ingestTokenNotShown(t, src, port)
}

// ingestTokenNotShown: a token file only its owner can read is read, and
// the token sent; when the run then fails (the server refuses the token,
// or cannot be reached), stderr says why and never holds the token. The
// server that refuses it records what it was sent: the positive control
// that the token was read at all (the refused file of the table never is).
func ingestTokenNotShown(t *testing.T, src string, unreachable int) {
	const token = "secret-token-0600-value"
	tok := filepath.Join(t.TempDir(), "token")
	must(t, os.WriteFile(tok, []byte(token+"\n"), 0o600))
	var sent atomic.Value // string: the token headers of the last request
	var requests atomic.Int64
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		sent.Store(r.Header.Get("X-Chroma-Token") + "|" + r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":"AuthError","message":"Unauthorized"}`)
	}))
	t.Cleanup(refuse.Close)
	for _, tc := range []struct{ name, url, want string }{
		{"refused token", refuse.URL, "check CHROMA_TOKEN or --token-file"},
		{"unreachable with a token", fmt.Sprintf("http://127.0.0.1:%d", unreachable), "unreachable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, errOut, code := ingestCmd(t, []string{"CHROMA_TOKEN="}, "--chroma-url", tc.url, "--collection", "abc", "--token-file", tok, src)
			if code != 1 || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, stderr %q; want exit 1 and %q", code, errOut, tc.want)
			}
			if strings.Contains(errOut, token) || strings.Contains(errOut, "0600-value") {
				t.Errorf("token leaked to stderr: %q", errOut)
			}
		})
	}
	if got, _ := sent.Load().(string); requests.Load() == 0 || !strings.Contains(got, token) {
		t.Errorf("the refusing server saw %d requests, token headers %q: the token file was never read and sent, so its absence from stderr proves nothing", requests.Load(), got)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	requireServer(t)
	src := t.TempDir()
	_, err := corpus.Generate(src, corpus.Spec{Files: 30, Seed: 3})
	must(t, err)
	name := collectionName(t)
	out, errOut, code := ingestCmd(t, nil, "--chroma-url", env.url, "--collection", name, "--dry-run", src)
	if code != 0 || !strings.Contains(out, "dry run") || parseSummary(t, out).written != 30 {
		t.Fatalf("dry run on a new collection: exit %d out %q err %q", code, out, errOut)
	}
	ctx := context.Background()
	if _, err := chroma.Open(ctx, conn(t, name), nil); !errors.Is(err, chroma.ErrNotFound) {
		t.Errorf("dry run created the collection (open error %v)", err)
	}
}

func TestCorruptTreeParts(t *testing.T) {
	requireServer(t)
	src := t.TempDir()
	_, err := corpus.Generate(src, corpus.Spec{Files: 400, Seed: 4})
	must(t, err)
	name := collectionName(t)
	if _, errOut, code := ingestCmd(t, nil, "--chroma-url", env.url, "--collection", name, "--quiet", src); code != 0 {
		t.Fatalf("ingest: %s", errOut)
	}
	st := openStore(t, name)
	ids, err := st.IDs(context.Background())
	must(t, err)
	for _, id := range ids {
		if strings.HasPrefix(id, chroma.TreeID+"#") && strings.HasSuffix(id, "#1") {
			must(t, st.DeleteOwned(context.Background(), []string{id}))
			_, err := st.LoadTree(context.Background())
			if !errors.Is(err, chroma.ErrBadTree) {
				t.Fatalf("LoadTree with a part missing: %v, want ErrBadTree", err)
			}
			return
		}
	}
	t.Fatalf("no tree part #1 among %d ids", len(ids))
}
