package integration_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/tree"
)

// writeRaw writes records straight into a new collection, bypassing ingest.
func writeRaw(t *testing.T, recs []chroma.Record) string {
	t.Helper()
	name := collectionName(t)
	st, err := chroma.OpenOrCreate(t.Context(), conn(t, name), nil)
	must(t, err)
	defer st.Close()
	must(t, st.Upsert(t.Context(), recs))
	return name
}

func treeRecord(doc string) chroma.Record {
	return chroma.Record{ID: chroma.TreeID, Text: doc, Metadata: newMeta(map[string]any{"kind": "tree"})}
}

func chunkRec(id, page string, idx any, text string) chroma.Record {
	md := map[string]any{"page": page}
	if idx != nil {
		md["chunk_index"] = idx
	}
	return chroma.Record{ID: id, Text: text, Metadata: newMeta(md)}
}

func gz(t *testing.T, b []byte) string {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, err := zw.Write(b)
	must(t, err)
	must(t, zw.Close())
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}

// TestHostileTreesRefused: a tree the mount cannot trust stops it from
// starting, with one clear line and no mount left behind.
func TestHostileTreesRefused(t *testing.T) {
	requireFUSE(t)
	good := gz(t, []byte(`{"a":{"isPublic":true}}`))
	bomb := gz(t, bytes.Repeat([]byte(" "), 600<<20))
	header := func(parts int, sha string) chroma.Record {
		return chroma.Record{ID: chroma.TreeID, Text: "manifest", Metadata: newMeta(map[string]any{
			chroma.KeyTreeParts: parts, chroma.KeyTreeSHA: sha, chroma.KeyTreeBytes: 10})}
	}
	cases := []struct {
		name string
		recs []chroma.Record
		want string
	}{
		{"truncated gzip", []chroma.Record{treeRecord(good[:len(good)-8])}, "invalid path tree"},
		{"not base64", []chroma.Record{treeRecord("%%% not a tree %%%")}, "invalid path tree"},
		{"invalid JSON", []chroma.Record{treeRecord(`{"a": {"isPublic": tru`)}, "invalid path tree"},
		{"JSON array", []chroma.Record{treeRecord(gz(t, []byte(`[{"a":1}]`)))}, "invalid path tree"},
		{"gzip bomb", []chroma.Record{treeRecord(bomb)}, "limit"},
		{"parts missing", []chroma.Record{header(3, strings.Repeat("ab", 32))}, "parts missing or inconsistent"},
		{"digest mismatch", []chroma.Record{{ID: chroma.TreeID, Text: good, Metadata: newMeta(map[string]any{chroma.KeyTreeSHA: strings.Repeat("0", 64)})}}, "parts missing or inconsistent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			name := writeRaw(t, tc.recs)
			mnt := t.TempDir()
			out, code, _ := mountCmd(t, "--chroma-url", env.url, "--collection", name, mnt)
			if code != 1 || !strings.Contains(out, tc.want) || strings.Count(strings.TrimSpace(out), "\n") > 0 {
				t.Errorf("exit %d, %q; want exit 1 and one line with %q", code, out, tc.want)
			}
			if isMounted(mnt) {
				t.Error("mount left behind")
			}
		})
	}
}

// TestHostileEntriesAndPages: bad entries are skipped with a warning, the
// rest is served; pages whose chunks cannot be trusted read as EIO; chunks
// stored out of order still read right; nothing appears outside the tree.
func TestHostileEntriesAndPages(t *testing.T) {
	requireFUSE(t)
	long := strings.Repeat("n", 256)
	entries := map[string]string{
		"good":       `{"isPublic":true}`,
		"dir/inner":  `{"isPublic":true}`,
		"escape":     `{"isPublic":true,"path":"../../etc/passwd"}`,
		"absolute":   `{"isPublic":true,"path":"/etc/shadow"}`,
		"nul":        `{"isPublic":true,"path":"a\u0000b.md"}`,
		"double":     `{"isPublic":true,"path":"a//b.md"}`,
		"longname":   `{"isPublic":true,"path":"` + long + `.md"}`,
		"dup1":       `{"isPublic":true,"path":"same.md"}`,
		"dup2":       `{"isPublic":true,"path":"same.md"}`,
		"clash":      `{"isPublic":true,"path":"dir"}`,
		"strpublic":  `{"isPublic":"false"}`,
		"badgroups":  `{"isPublic":true,"groups":"admin"}`,
		"negsize":    `{"isPublic":true,"size":-1}`,
		"missingidx": `{"isPublic":true}`,
		"dupidx":     `{"isPublic":true}`,
		"reversed":   `{"isPublic":true}`,
		"sizelie":    `{"isPublic":true,"path":"sizelie.md","size":6,"chunks":[3,3]}`,
		"linkout":    `{"isPublic":true,"type":"symlink","path":"linkout","target":"../../etc/passwd"}`,
		"linkabs":    `{"isPublic":true,"type":"symlink","path":"linkabs","target":"/etc/passwd"}`,
		"linkloop":   `{"isPublic":true,"type":"symlink","path":"linkloop","target":"linkloop"}`,
		"linkgood":   `{"isPublic":true,"type":"symlink","path":"dir/linkgood","target":"../good.mdx"}`,
		"lazyfile":   `{"isPublic":true,"path":"lazyfile","uri":"file:///etc/passwd","size":5,"sha256":"` + strings.Repeat("a", 64) + `"}`,
		"devtype":    `{"isPublic":true,"type":"chardev","path":"devtype"}`,
	}
	var parts []string
	for slug, e := range entries {
		parts = append(parts, fmt.Sprintf("%q:%s", slug, e))
	}
	recs := []chroma.Record{treeRecord(gz(t, []byte("{"+strings.Join(parts, ",")+"}")))}
	recs = append(recs,
		chunkRec("g0", "good", 0, "good "), chunkRec("g1", "good", "1", "page\n"),
		chunkRec("i0", "dir/inner", 0, "inner\n"),
		chunkRec("s0", "dup1", 0, "first\n"), chunkRec("s1", "dup2", 0, "second\n"),
		chunkRec("m0", "missingidx", 0, "a"), chunkRec("m1", "missingidx", nil, "b"),
		chunkRec("d0", "dupidx", 0, "a"), chunkRec("d1", "dupidx", 0, "different"),
		chunkRec("r2", "reversed", 2, "three"), chunkRec("r1", "reversed", 1, "two "), chunkRec("r0", "reversed", 0, "one "),
		chunkRec("z0", "sizelie", 0, "abcd"), chunkRec("z1", "sizelie", 1, "ef"),
		chunkRec("e0", "escape", 0, "should never show"),
	)
	name := writeRaw(t, recs)
	mnt := mountDir(t, t.TempDir())
	m := startMount(t, name, mnt, "--prefetch", "none")

	listing, _ := sh(t, mnt, "find . | sort", false)
	want := ". ./dir ./dir/inner.mdx ./dir/linkgood ./dupidx.mdx ./good.mdx ./missingidx.mdx ./reversed.mdx ./same.md ./sizelie.md"
	if got := strings.Join(strings.Fields(listing), " "); got != want {
		t.Errorf("tree served:\n  %s\nwant:\n  %s", got, want)
	}
	reads := []struct{ file, want string }{
		{"good.mdx", "good page\n"}, {"dir/inner.mdx", "inner\n"}, {"same.md", "first\n"}, {"reversed.mdx", "one two three"},
		{"dir/linkgood", "good page\n"}, {"missingidx.mdx", "EIO"}, {"dupidx.mdx", "EIO"}, {"sizelie.md", "EIO"},
	}
	for _, r := range reads {
		out, code := sh(t, mnt, "cat "+r.file, true)
		if r.want == "EIO" {
			if code == 0 || !strings.Contains(out, "Input/output error") {
				t.Errorf("cat %s: exit %d %q, want EIO", r.file, code, out)
			}
		} else if code != 0 || out != r.want {
			t.Errorf("cat %s: exit %d %q, want %q", r.file, code, out, r.want)
		}
	}
	logs := m.logs.String()
	for _, w := range []string{`"escape": skipped`, `"absolute": skipped`, `"nul": skipped`, `"double": skipped`, `"longname": skipped`,
		`"dup2": skipped`, `"clash": skipped`, `"strpublic": isPublic is not a boolean`, `"badgroups": groups is not a list`, `"negsize": size`,
		`"linkout": skipped`, `"linkabs": symlink target is absolute`, `"linkloop": skipped`, `"lazyfile": uri`, `"devtype": unknown type`} {
		if !strings.Contains(logs, strings.ReplaceAll(w, `"`, `\"`)) { // slog quotes the message
			t.Errorf("no warning %s in the log:\n%s", w, logs)
		}
	}
	if _, err := tree.Decode([]byte(recs[0].Text), tree.DefaultLimits); err != nil {
		t.Fatalf("the test's own tree does not decode: %v", err)
	}
}
