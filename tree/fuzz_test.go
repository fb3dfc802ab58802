package tree

import (
	"strings"
	"testing"
)

// FuzzDecode feeds arbitrary documents to Decode and Build. They must never
// panic, and every node of a built tree must have a valid name, a unique
// inode and a visible entry behind it.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"guides/auth/oauth":{"isPublic":true,"groups":[]},"internal/billing":{"isPublic":false,"groups":["admin"]}}`))
	f.Add([]byte(`{"a":{"isPublic":true,"path":"../x"},"b/c":{"isPublic":true,"size":3,"chunks":[1,2]}}`))
	f.Add([]byte(`{"a/b":{"isPublic":true},"a/b/c":{"isPublic":true,"groups":"x"}}`))
	f.Add([]byte("H4sIAAAAAAAA/6pWSlSyUlBKzs8rSc0rUbJSqAUAAAD//w=="))
	lim := DefaultLimits
	lim.MaxDecoded = 1 << 20
	f.Fuzz(func(t *testing.T, doc []byte) {
		d, err := Decode(doc, lim)
		if err != nil {
			return
		}
		tr := BuildVisible(d, []string{"admin"}, lim)
		seen := map[uint64]bool{}
		Walk(tr.Root, func(n *Node) bool {
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
			if n.File != nil {
				e := d.Entries[n.File.Slug]
				if !e.Visible(GroupSet([]string{"admin"})) {
					t.Fatalf("hidden entry %q in tree", n.File.Slug)
				}
				if tr.Lookup(n.Path()) != n {
					t.Fatalf("lookup of %q does not find its node", n.Path())
				}
			}
			return true
		})
	})
}
