package tree

import (
	"bytes"
	"encoding/base64"
	"errors"
	"hash/fnv"
	"strconv"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
)

func mustBuild(t *testing.T, doc string, groups ...string) (*Tree, *Doc) {
	t.Helper()
	d, err := Decode([]byte(doc), DefaultLimits)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	tr := BuildVisible(d, groups, DefaultLimits)
	return tr, d
}

func paths(tr *Tree) []string {
	var out []string
	Walk(tr.Root, func(n *Node) bool {
		if n != tr.Root {
			p := n.Path()
			if n.IsDir() {
				p += "/"
			}
			out = append(out, p)
		}
		return true
	})
	return out
}

func TestDecodeShapes(t *testing.T) {
	plain := `{"guides/auth/oauth":{"isPublic":true,"groups":[]},"internal/billing":{"isPublic":false,"groups":["admin"]}}`
	wrapped, err := Wrap([]byte(plain))
	if err != nil {
		t.Fatal(err)
	}
	for name, doc := range map[string]string{"plain": plain, "base64-gzip": wrapped, "padded": "\n " + plain + "\n"} {
		t.Run(name, func(t *testing.T) {
			tr, _ := mustBuild(t, doc)
			got := strings.Join(paths(tr), " ")
			if want := "guides/ guides/auth/ guides/auth/oauth.mdx"; got != want {
				t.Errorf("public paths = %q, want %q", got, want)
			}
			tr, _ = mustBuild(t, doc, "admin")
			if tr.Lookup("internal/billing.mdx") == nil {
				t.Errorf("admin cannot see internal/billing.mdx")
			}
		})
	}
}

func TestDecodeRejects(t *testing.T) {
	bomb := gzipBytes(t, bytes.Repeat([]byte(" "), 2<<20))
	truncated := gzipBytes(t, []byte(`{"a":{"isPublic":true}}`))
	truncated = truncated[:len(truncated)-6]
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{"empty", "", "not gzip"},
		{"not base64", "%%%%", "neither JSON nor base64"},
		{"base64 not gzip", base64.StdEncoding.EncodeToString([]byte("hello")), "not gzip"},
		{"truncated gzip", base64.StdEncoding.EncodeToString(truncated), "truncated"},
		{"gzip bomb", base64.StdEncoding.EncodeToString(bomb), "limit"},
		{"invalid JSON", `{"a":`, "JSON"},
		{"array", `[1,2]`, "neither JSON nor base64"},
		{"wrapped array", wrapOrFail(t, `[1,2]`), "JSON"},
		{"null", wrapOrFail(t, `null`), "null"},
		{"too many", `{"a":{},"b":{},"c":{}}`, "exceed"},
	}
	lim := DefaultLimits
	lim.MaxDecoded = 1 << 20
	lim.MaxEntries = 2
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Decode([]byte(tc.doc), lim)
			if err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode error = %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

func TestHostileEntries(t *testing.T) {
	long := strings.Repeat("x", 256)
	deep := strings.Repeat("d/", 200) + "f"
	tests := []struct {
		name    string
		entry   string // JSON of one entry with key "k"
		visible bool
		warn    string
	}{
		{"dotdot", `{"isPublic":true,"path":"../etc/passwd"}`, false, `".." path component`},
		{"dot", `{"isPublic":true,"path":"a/./b"}`, false, `"." path component`},
		{"empty component", `{"isPublic":true,"path":"a//b"}`, false, "empty path component"},
		{"trailing slash", `{"isPublic":true,"path":"a/b/"}`, false, "empty path component"},
		{"absolute", `{"isPublic":true,"path":"/etc/passwd"}`, false, "absolute path"},
		{"NUL", `{"isPublic":true,"path":"a\u0000b"}`, false, "NUL"},
		{"256-byte name", `{"isPublic":true,"path":"` + long + `"}`, false, "exceeds 255"},
		{"absurd nesting", `{"isPublic":true,"path":"` + deep + `"}`, false, "depth limit"},
		{"isPublic string", `{"isPublic":"true"}`, false, "isPublic is not a boolean"},
		{"isPublic number", `{"isPublic":1}`, false, "isPublic is not a boolean"},
		{"groups not list", `{"isPublic":true,"groups":"admin"}`, false, "groups is not a list"},
		{"groups of numbers", `{"isPublic":true,"groups":[1]}`, false, "groups is not a list"},
		{"missing isPublic", `{"groups":[]}`, false, ""},
		{"negative size", `{"isPublic":true,"size":-5}`, false, "non-negative"},
		{"string size", `{"isPublic":true,"size":"5"}`, false, "non-negative"},
		{"negative chunk", `{"isPublic":true,"chunks":[-1]}`, false, "negative chunk"},
		{"size mismatch", `{"isPublic":true,"size":10,"chunks":[3,4]}`, false, "does not match"},
		{"not an object", `"yes"`, false, "not a JSON object"},
		{"null groups ok", `{"isPublic":true,"groups":null}`, true, ""},
		{"good", `{"isPublic":true,"size":7,"chunks":[3,4],"mtime":5}`, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr, d := mustBuild(t, `{"k":`+tc.entry+`}`, "g")
			if got := tr.Files == 1; got != tc.visible {
				t.Errorf("visible = %v, want %v (paths %v)", got, tc.visible, paths(tr))
			}
			joined := strings.Join(d.Warnings.List, "\n")
			if tc.warn != "" && !strings.Contains(joined, tc.warn) {
				t.Errorf("warnings %q lack %q", joined, tc.warn)
			}
			if tc.warn == "" && joined != "" {
				t.Errorf("unexpected warnings %q", joined)
			}
			if tr.Dirs != 0 && !tc.visible {
				t.Errorf("hidden entry left %d directories", tr.Dirs)
			}
		})
	}
}

func TestClashes(t *testing.T) {
	doc := `{
		"a/b": {"isPublic":true},
		"a/b/c": {"isPublic":true},
		"x": {"isPublic":true, "path":"same.md"},
		"y": {"isPublic":true, "path":"same.md"},
		"z": {"isPublic":true, "path":"dir"},
		"w": {"isPublic":true, "path":"dir/inner.md"}
	}`
	tr, d := mustBuild(t, doc)
	got := strings.Join(paths(tr), " ")
	want := "a/ a/b/ a/b/c.mdx a/b.mdx dir/ dir/inner.md same.md"
	if got != want {
		t.Errorf("paths = %q, want %q", got, want)
	}
	if n := tr.Lookup("same.md"); n == nil || n.File.Slug != "x" {
		t.Errorf("same.md should belong to the smaller slug x")
	}
	joined := strings.Join(d.Warnings.List, "\n")
	for _, w := range []string{`"y": skipped: path "same.md" is already used by "x"`, `"z": skipped: "dir" is also a directory`} {
		if !strings.Contains(joined, w) {
			t.Errorf("warnings %q lack %q", joined, w)
		}
	}
}

func TestAccess(t *testing.T) {
	doc := `{
		"pub": {"isPublic":true,"groups":[]},
		"admin/only": {"isPublic":false,"groups":["admin"]},
		"team/x": {"isPublic":false,"groups":["eng","ops"]},
		"nobody": {"isPublic":false,"groups":[]}
	}`
	tests := []struct {
		groups []string
		want   string
	}{
		{nil, "pub.mdx"},
		{[]string{"admin"}, "admin/ admin/only.mdx pub.mdx"},
		{[]string{"ops"}, "pub.mdx team/ team/x.mdx"},
		{[]string{"admin", "eng"}, "admin/ admin/only.mdx pub.mdx team/ team/x.mdx"},
		{[]string{""}, "pub.mdx"},
	}
	for _, tc := range tests {
		tr, _ := mustBuild(t, doc, tc.groups...)
		if got := strings.Join(paths(tr), " "); got != tc.want {
			t.Errorf("groups %v: paths %q, want %q", tc.groups, got, tc.want)
		}
	}
}

func TestNodes(t *testing.T) {
	doc := `{
		"d/one": {"isPublic":true,"path":"d/one.md","size":3,"mtime":100},
		"d/sub/two": {"isPublic":true,"path":"d/sub/two.txt","mtime":300},
		"top": {"isPublic":true,"chunks":[1,2],"mtime":50}
	}`
	tr, _ := mustBuild(t, doc)
	d := tr.Lookup("/d/")
	if d == nil || !d.IsDir() || d.Nlink() != 3 || d.Mtime != 300 {
		t.Fatalf("dir d = %+v", d)
	}
	if s, ok := tr.Lookup("d/one.md").File.Size(); !ok || s != 3 {
		t.Errorf("size of d/one.md = %d,%v", s, ok)
	}
	two := tr.Lookup("d/sub/two.txt").File
	if _, ok := two.Size(); ok {
		t.Errorf("size of two.txt should be unknown")
	}
	two.SetSize(9)
	if s, _ := two.Size(); s != 9 {
		t.Errorf("SetSize did not stick")
	}
	if s, _ := tr.Lookup("top.mdx").File.Size(); s != 3 {
		t.Errorf("size from chunks = %d, want 3", s)
	}
	if tr.Root.Ino != RootIno || tr.Files != 3 || tr.Dirs != 2 {
		t.Errorf("root ino %d files %d dirs %d", tr.Root.Ino, tr.Files, tr.Dirs)
	}
	if tr.Lookup("d/nope") != nil || tr.Lookup("top.mdx/x") != nil {
		t.Errorf("lookup of missing path succeeded")
	}
}

// TestStableInodes: a directory's inode depends on its path only, a
// file's on its path and content version: other entries change nothing, a
// changed digest gives a new inode (an atomic replace), and a page without
// a digest gets a new one with every tree version.
func TestStableInodes(t *testing.T) {
	a, _ := mustBuild(t, `{"x/y":{"isPublic":true,"sha256":"11"},"x/z":{"isPublic":true,"sha256":"22"},"w":{"isPublic":true}}`)
	b, _ := mustBuild(t, `{"x/z":{"isPublic":true,"sha256":"22"},"q":{"isPublic":true},"x/y":{"isPublic":true,"sha256":"33"},"w":{"isPublic":true}}`)
	if a.Lookup("x/z.mdx").Ino != b.Lookup("x/z.mdx").Ino || a.Lookup("x").Ino != b.Lookup("x").Ino {
		t.Errorf("inode numbers depend on other entries")
	}
	if a.Lookup("x/y.mdx").Ino == b.Lookup("x/y.mdx").Ino {
		t.Errorf("a file whose digest changed kept its inode")
	}
	if a.Lookup("w.mdx").Ino == b.Lookup("w.mdx").Ino {
		t.Errorf("a file without a digest kept its inode across tree versions")
	}
	a2, _ := mustBuild(t, `{"x/y":{"isPublic":true,"sha256":"11"},"x/z":{"isPublic":true,"sha256":"22"},"w":{"isPublic":true}}`)
	if a.Lookup("w.mdx").Ino != a2.Lookup("w.mdx").Ino {
		t.Errorf("the same tree gave a file without a digest another inode")
	}
	seen := map[uint64]bool{}
	Walk(a.Root, func(n *Node) bool {
		if seen[n.Ino] {
			t.Errorf("duplicate inode %d", n.Ino)
		}
		seen[n.Ino] = true
		return true
	})
}

func TestEncodeRoundTrip(t *testing.T) {
	size := int64(7)
	in := map[string]Entry{
		"a/b": {IsPublic: true, Path: "a/b.md", Size: &size, Chunks: []int64{3, 4}, Mtime: 9, SHA256: "ab"},
		"c":   {IsPublic: false, Groups: []string{"admin"}},
	}
	raw, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"groups":[]`) {
		t.Errorf("empty groups must encode as [] for Mintlify readers: %s", raw)
	}
	wrapped, err := Wrap(raw)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decode([]byte(wrapped), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	got := d.Entries()["a/b"]
	if *got.Size != 7 || got.Path != "a/b.md" || got.Mtime != 9 || len(got.Chunks) != 2 || got.SHA256 != "ab" {
		t.Errorf("round trip lost fields: %+v", got)
	}
	if d.Entries()["c"].Groups[0] != "admin" || d.Warnings.Count() != 0 {
		t.Errorf("round trip: %+v warnings %v", d.Entries()["c"], d.Warnings.List)
	}
}

func TestWarningsCapped(t *testing.T) {
	var sb strings.Builder
	sb.WriteString("{")
	for i := 0; i < 500; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`"k` + strings.Repeat("x", i%50) + string(rune('a'+i%26)) + `_` + strconv.Itoa(i) + `":{"isPublic":"no"}`)
	}
	sb.WriteString("}")
	d, err := Decode([]byte(sb.String()), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Warnings.List) != DefaultLimits.MaxWarnings || d.Warnings.Count() != 500 {
		t.Errorf("kept %d warnings, counted %d", len(d.Warnings.List), d.Warnings.Count())
	}
}

func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func wrapOrFail(t *testing.T, s string) string {
	t.Helper()
	w, err := Wrap([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func TestChangedNames(t *testing.T) {
	a, _ := mustBuild(t, `{"d/keep":{"isPublic":true,"sha256":"11"},"d/edit":{"isPublic":true,"sha256":"22"},"d/gone":{"isPublic":true,"sha256":"33"},"d/sub/x":{"isPublic":true,"sha256":"44"}}`)
	b, _ := mustBuild(t, `{"d/keep":{"isPublic":true,"sha256":"11"},"d/edit":{"isPublic":true,"sha256":"99"},"d/new":{"isPublic":true,"sha256":"55"},"d/sub/x":{"isPublic":true,"sha256":"44"}}`)
	got := strings.Join(ChangedNames(a.Lookup("d"), b.Lookup("d")), ",")
	if want := "edit.mdx,gone.mdx,new.mdx"; got != want {
		t.Errorf("ChangedNames = %s, want %s", got, want)
	}
	if got := strings.Join(ChangedNames(a.Lookup("d/sub"), nil), ","); got != "x.mdx" {
		t.Errorf("ChangedNames(dir, nil) = %s", got)
	}
	if !SameAttrs(a.Lookup("d/keep.mdx"), b.Lookup("d/keep.mdx")) || SameAttrs(a.Lookup("d"), a.Lookup("d/sub")) {
		t.Errorf("SameAttrs wrong")
	}
}

// TestCarryMtimes: across versions, a directory keeps its mtime unless its
// own entries changed, however deep a change below it is.
func TestCarryMtimes(t *testing.T) {
	a, _ := mustBuild(t, `{"top/mid/leaf/x":{"isPublic":true,"sha256":"11","mtime":100},"top/y":{"isPublic":true,"sha256":"22","mtime":50},"other/z":{"isPublic":true,"sha256":"33","mtime":70}}`)
	b, _ := mustBuild(t, `{"top/mid/leaf/x":{"isPublic":true,"sha256":"99","mtime":900},"top/y":{"isPublic":true,"sha256":"22","mtime":50},"other/z":{"isPublic":true,"sha256":"33","mtime":70}}`)
	CarryMtimes(a, b)
	for _, p := range []string{"top", "top/mid", "other", ""} {
		if a.Lookup(p).Mtime != b.Lookup(p).Mtime {
			t.Errorf("%q: mtime %d, was %d; its entries did not change", p, b.Lookup(p).Mtime, a.Lookup(p).Mtime)
		}
	}
	if b.Lookup("top/mid/leaf").Mtime != 900 {
		t.Errorf("top/mid/leaf: mtime %d, want 900: its entry changed", b.Lookup("top/mid/leaf").Mtime)
	}
}

// TestExecAndNanoseconds: exec and mtime_ns are read, a directory takes
// the newest (seconds, nanoseconds) below it, and bad values skip the
// entry with a warning.
func TestExecAndNanoseconds(t *testing.T) {
	tr, d := mustBuild(t, `{"d/a":{"isPublic":true,"mtime":10,"mtime_ns":5,"exec":true},"d/b":{"isPublic":true,"mtime":10,"mtime_ns":900},`+
		`"bad1":{"isPublic":true,"mtime_ns":1000000000},"bad2":{"isPublic":true,"exec":"yes"},"bad3":{"isPublic":true,"mtime_ns":-1}}`)
	a := tr.Lookup("d/a.mdx")
	if a == nil || !a.File.Exec || a.Nsec != 5 || tr.Lookup("d/b.mdx").File.Exec {
		t.Fatalf("d/a: %+v", a)
	}
	if dir := tr.Lookup("d"); dir.Mtime != 10 || dir.Nsec != 900 {
		t.Errorf("d: mtime %d.%09d, want 10.000000900", dir.Mtime, dir.Nsec)
	}
	for _, p := range []string{"bad1.mdx", "bad2.mdx", "bad3.mdx"} {
		if tr.Lookup(p) != nil {
			t.Errorf("%s with a bad field is served", p)
		}
	}
	if len(d.Warnings.List) != 3 {
		t.Errorf("warnings %v, want 3", d.Warnings.List)
	}
}

// TestInodesAreFNVOfPaths pins the inode numbers: FNV-1a of the path
// ("/" after a directory; a file's content version after a NUL), as every
// earlier version numbered them, so that they stay stable across versions.
func TestInodesAreFNVOfPaths(t *testing.T) {
	tr, _ := mustBuild(t, `{"a/b":{"isPublic":true,"path":"a/b.md","sha256":"`+strings.Repeat("c", 64)+`"}}`)
	sum := func(s string) uint64 { h := fnv.New64a(); h.Write([]byte(s)); return h.Sum64() }
	if got, want := tr.Lookup("a").Ino, sum("a/"); got != want {
		t.Errorf("directory inode %d, want %d", got, want)
	}
	if got, want := tr.Lookup("a/b.md").Ino, sum("a/b.md\x00"+strings.Repeat("c", 64)); got != want {
		t.Errorf("file inode %d, want %d", got, want)
	}
}
