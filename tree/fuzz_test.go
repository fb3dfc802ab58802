package tree

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// FuzzDecode feeds arbitrary documents to Decode and Build. They must never
// panic, and every node of a built tree must have a valid name, a unique
// inode and a visible entry behind it, but for the view's report
// (ReportPath), which names only files of the tree.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"guides/auth/oauth":{"isPublic":true,"groups":[]},"internal/billing":{"isPublic":false,"groups":["admin"]}}`))
	f.Add([]byte(`{"a":{"isPublic":true,"path":"../x"},"b/c":{"isPublic":true,"size":3,"chunks":[1,2]}}`))
	f.Add([]byte(`{"a/b":{"isPublic":true},"a/b/c":{"isPublic":true,"groups":"x"}}`))
	f.Add([]byte(`{"a":{"isPublic":true,"reassembly":"gaps"},"s":{"groups":["sre"],"reassembly":"edges"},".chromafs-reassembly.txt":{"isPublic":true}}`))
	f.Add([]byte("H4sIAAAAAAAA/6pWSlSyUlBKzs8rSc0rUbJSqAUAAAD//w=="))
	f.Add([]byte(`{"/":{"isPublic":true,"type":"dir","path":"."},"e/":{"isPublic":true,"type":"dir","path":"e/f"},` +
		`"l":{"isPublic":true,"type":"symlink","path":"x/l","target":"../e/f"},"m":{"isPublic":true,"type":"symlink","path":"m","target":"x/l/../../m"}}`))
	f.Add([]byte(`{"u":{"isPublic":true,"uri":"https://h/u","size":2,"chunks":[2],"chunk_sha256":["` + strings.Repeat("0", 64) + `"],"sha256":"` + strings.Repeat("1", 64) + `"}}`))
	lim := DefaultLimits
	lim.MaxDecoded = 1 << 20
	f.Fuzz(func(t *testing.T, doc []byte) {
		d, err := Decode(doc, lim)
		if err != nil {
			return
		}
		tr := BuildVisible(d, []string{"admin"}, lim)
		seen := map[uint64]bool{}
		check := func(n *Node) bool {
			if seen[n.Ino] {
				t.Fatalf("duplicate inode %d", n.Ino)
			}
			seen[n.Ino] = true
			if n == tr.Root {
				return true
			}
			if checkName(n.Name) != nil || strings.ContainsAny(n.Name, "/\x00") {
				t.Fatalf("invalid name %q", n.Name)
			}
			if n.File != nil && n.Path() == ReportPath { // the view's own report: no entry behind it
				for _, line := range strings.Split(strings.TrimSuffix(n.File.Records()[0].Text, "\n"), "\n") {
					if _, p, ok := strings.Cut(line, "\t"); !strings.HasPrefix(line, "#") && (!ok || tr.Lookup(p) == nil || tr.Lookup(p).File == nil) {
						t.Fatalf("the report names %q, no file of the tree", line)
					}
				}
				return true
			}
			if n.File != nil {
				e := d.Entries()[n.File.Slug]
				if !e.Visible(GroupSet([]string{"admin"})) {
					t.Fatalf("hidden entry %q in tree", n.File.Slug)
				}
				if tr.Lookup(n.Path()) != n {
					t.Fatalf("lookup of %q does not find its node", n.Path())
				}
			}
			if n.Link != nil && resolveLink(tr, n) == nil {
				t.Fatalf("link %q -> %q names nothing in the tree", n.Path(), n.Link.Target)
			}
			return true
		}
		Walk(tr.Root, check)
		if tr.Report != nil { // unlisted: no walk visits it
			if tr.Report.Path() != ReportPath || tr.Root.Child(ReportPath) != nil {
				t.Fatalf("the report at %q, or listed", tr.Report.Path())
			}
			check(tr.Report)
		}
	})
}

// resolveLink follows a link's target through tr as the kernel would and
// returns the node it ends at, or nil.
func resolveLink(tr *Tree, l *Node) *Node {
	cur := l.Parent
	for hops, parts := 0, strings.Split(l.Link.Target, "/"); len(parts) > 0 && hops < 1000; hops++ {
		c := parts[0]
		parts = parts[1:]
		switch {
		case c == "" || c == ".":
			continue
		case c == "..":
			if cur.Parent == nil {
				return nil
			}
			cur = cur.Parent
			continue
		}
		if !cur.IsDir() {
			return nil
		}
		next := cur.Child(c)
		if next == nil {
			return nil
		}
		if next.Link != nil {
			parts = append(strings.Split(next.Link.Target, "/"), parts...)
			continue // cur stays the link's directory
		}
		cur = next
	}
	return cur
}

// FuzzRawInts checks rawInts against the plain reading it replaces:
// split at commas, each element trimmed and read by strconv.ParseInt.
func FuzzRawInts(f *testing.F) {
	for _, s := range []string{`[8192,8192,17]`, `[]`, ` [ 1 , -2 ,+3 ] `, `[0]`, `[-0]`, `[007]`,
		`[9223372036854775807]`, `[9223372036854775808]`, `[-9223372036854775808]`, `[-9223372036854775809]`,
		`[99999999999999999999]`, `[1,]`, `[,1]`, `[1,,2]`, `[1 2]`, `[1.5]`, `[1e3]`, `["1"]`, `[[1]]`, `[-]`, `[+]`, `1,2`, `[`, `[1`, "[\t1\n,\r2 ]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := rawInts(raw)
		want, werr := plainInts(raw)
		if (err == nil) != (werr == nil) || err == nil && !slices.Equal(got, want) {
			t.Fatalf("rawInts(%q) = %v, %v; the plain reading gives %v, %v", raw, got, err, want, werr)
		}
	})
}

// plainInts is the reading rawInts must agree with, on JSON's white
// space: the reading rawInts replaced trimmed Unicode's too (TrimSpace),
// which no value it is given holds outside a string (the scanner and the
// JSON decoder hand over values that are JSON).
func plainInts(raw []byte) ([]int64, error) {
	trim := func(b []byte) []byte { return bytes.Trim(b, " \t\n\r") }
	body := trim(raw)
	if len(body) < 2 || body[0] != '[' || body[len(body)-1] != ']' {
		return nil, errNotList
	}
	body = trim(body[1 : len(body)-1])
	if len(body) == 0 {
		return []int64{}, nil
	}
	var out []int64
	for _, f := range bytes.Split(body, []byte(",")) {
		n, err := strconv.ParseInt(string(trim(f)), 10, 64)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}
