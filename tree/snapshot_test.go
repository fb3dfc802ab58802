package tree

import (
	"errors"
	"reflect"
	"testing"
)

// sameTree compares two trees node by node, as a mount sees them.
func sameTree(t *testing.T, a, b *Tree) {
	t.Helper()
	if a.Version != b.Version || a.Files != b.Files || a.Dirs != b.Dirs || a.Links != b.Links {
		t.Fatalf("counts: %+v vs %+v", a, b)
	}
	var an, bn []*Node
	Walk(a.Root, func(n *Node) bool { an = append(an, n); return true })
	Walk(b.Root, func(n *Node) bool { bn = append(bn, n); return true })
	if len(an) != len(bn) {
		t.Fatalf("%d nodes vs %d", len(an), len(bn))
	}
	for i := range an {
		x, y := an[i], bn[i]
		if x.Path() != y.Path() || x.Ino != y.Ino || x.Mtime != y.Mtime || x.Nsec != y.Nsec || x.Nlink() != y.Nlink() ||
			a.recorded[x] != b.recorded[y] || !reflect.DeepEqual(x.Link, y.Link) {
			t.Fatalf("node %q differs: %+v vs %+v", x.Path(), x, y)
		}
		if (x.File == nil) != (y.File == nil) {
			t.Fatalf("%q: file vs not", x.Path())
		}
		if x.File != nil {
			xs, _ := x.File.Size()
			ys, _ := y.File.Size()
			fx, fy := x.File, y.File
			if xs != ys || !reflect.DeepEqual(fx.Chunks, fy.Chunks) || fx.Slug != fy.Slug || fx.SHA256 != fy.SHA256 ||
				fx.Version != fy.Version || fx.URI() != fy.URI() || fx.Exec != fy.Exec ||
				!reflect.DeepEqual(fx.ChunkSHA256(), fy.ChunkSHA256()) || !reflect.DeepEqual(fx.Records(), fy.Records()) {
				t.Fatalf("file %q differs", x.Path())
			}
		}
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	for name, doc := range map[string]string{
		"kinds": kindsDoc,
		"mapped": `{"m":{"isPublic":true,"path":"m.md","records":[{"id":"r1","from":2,"to":5},{"text":"\n"}],"chunk_sha256":["` +
			"ab" + `"]}, "x":{"isPublic":true,"size":3,"chunks":[3],"sha256":"` + "cd" + `","exec":true,"mtime":5,"mtime_ns":9}}`,
		"mintlify": `{"a/b":{"isPublic":true,"groups":[]},"c":{"isPublic":true}}`,
	} {
		tr, _ := mustBuild(t, doc)
		got, err := FromSnapshot(tr.Snapshot())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sameTree(t, tr, got)
	}
}

func TestSnapshotDamage(t *testing.T) {
	tr, _ := mustBuild(t, kindsDoc)
	snap := tr.Snapshot()
	for i := 0; i < len(snap); i += 7 {
		for _, cut := range [][]byte{snap[:i], append(append([]byte{}, snap[:i]...), 0xff, 0xff, 0xff)} {
			if _, err := FromSnapshot(cut); err == nil && i < len(snap) {
				t.Fatalf("a snapshot cut at %d of %d decoded", i, len(snap))
			} else if err != nil && !errors.Is(err, ErrSnapshot) {
				t.Fatalf("error %v does not wrap ErrSnapshot", err)
			}
		}
	}
}

func FuzzSnapshot(f *testing.F) {
	tr, _ := mustBuildF(kindsDoc)
	f.Add(tr.Snapshot())
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = FromSnapshot(b) // never a panic or a hang
	})
}

func mustBuildF(doc string) (*Tree, *Doc) {
	d, err := Decode([]byte(doc), DefaultLimits)
	if err != nil {
		panic(err)
	}
	return BuildVisible(d, nil, DefaultLimits), d
}
