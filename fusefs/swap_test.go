package fusefs

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/tree"
)

func build(t *testing.T, doc string) *tree.Tree {
	t.Helper()
	d, err := tree.Decode([]byte(doc), tree.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return tree.BuildVisible(d, nil, tree.DefaultLimits)
}

// TestRebind: a directory the kernel knows follows the new version (and
// reports its changed names), a vanished one is served empty; an
// unchanged file follows the new version, a changed or removed one keeps
// the old version for its open readers.
func TestRebind(t *testing.T) {
	a := build(t, `{"d/same":{"isPublic":true,"sha256":"11","size":3,"chunks":[3]},"d/edit":{"isPublic":true,"sha256":"22"},"gone/x":{"isPublic":true,"sha256":"33"}}`)
	b := build(t, `{"d/same":{"isPublic":true,"sha256":"11","size":3,"chunks":[3],"mtime":5},"d/edit":{"isPublic":true,"sha256":"99"},"d/new":{"isPublic":true,"sha256":"44"}}`)
	f := New(a, nil, Config{NoKernelPush: true})
	defer f.Close()
	dir := f.newNode(a.Lookup("d")).(*dirNode)
	gone := f.newNode(a.Lookup("gone")).(*dirNode)
	same := f.newNode(a.Lookup("d/same.mdx")).(*fileNode)
	edit := f.newNode(a.Lookup("d/edit.mdx")).(*fileNode)

	c, changed := rebindDir(dir, b)
	if !changed || strings.Join(c.names, ",") != "edit.mdx,new.mdx" || dir.node() != b.Lookup("d") {
		t.Errorf("rebindDir: changed %v, names %v, bound to new version %v", changed, c.names, dir.node() == b.Lookup("d"))
	}
	if _, changed := rebindDir(gone, b); !changed || len(gone.node().Children) != 0 || !gone.node().IsDir() {
		t.Errorf("a vanished directory: changed %v, %d children", changed, len(gone.node().Children))
	}
	if attrs := rebindLeaf(&same.n, b); !attrs || same.node() != b.Lookup("d/same.mdx") {
		t.Errorf("unchanged file: attrs changed %v (mtime did), rebound %v", attrs, same.node() == b.Lookup("d/same.mdx"))
	}
	if rebindLeaf(&edit.n, b) || edit.node() != a.Lookup("d/edit.mdx") {
		t.Errorf("a changed file must keep its old version")
	}
}

// TestUnlistedReport (issue 33): the report of files not reassembled
// exactly is found by name at the root and nowhere else, never listed,
// and a swap to a tree whose report differs serves the new one.
func TestUnlistedReport(t *testing.T) {
	a := build(t, `{"a":{"isPublic":true,"path":"a.md","reassembly":"gaps"},"d/b":{"isPublic":true,"path":"d/b.md"}}`)
	b := build(t, `{"a":{"isPublic":true,"path":"a.md","reassembly":"gaps"},"d/b":{"isPublic":true,"path":"d/b.md","reassembly":"edges"}}`)
	f := New(a, sized{}, Config{NoKernelPush: true, Search: &fakeSearcher{}})
	defer f.Close()
	r := newRaw(t, f)
	if names := strings.Join(r.names(1), ","); strings.Contains(names, tree.ReportPath) || !strings.Contains(names, "a.md") {
		t.Errorf("the root lists %s", names)
	}
	_, out := r.mustLookup(tree.ReportPath)
	if out.Attr.Mode&syscall.S_IFMT != syscall.S_IFREG || out.Attr.Ino != a.Report.Ino || int(out.Attr.Size) != len(a.Report.File.Records()[0].Text) {
		t.Errorf("lookup of the report: mode %o ino %d size %d; want the tree's report (ino %d)", out.Attr.Mode, out.Attr.Ino, out.Attr.Size, a.Report.Ino)
	}
	if _, _, st := r.lookup(".similar/" + tree.ReportPath); st != fuse.ENOENT {
		t.Errorf(".similar/%s: %v, want ENOENT (the report is no page)", tree.ReportPath, st)
	}
	if _, _, st := r.lookup("d/" + tree.ReportPath); st != fuse.ENOENT {
		t.Errorf("d/%s: %v, want ENOENT (the root's only)", tree.ReportPath, st)
	}
	if a.Report.Ino == b.Report.Ino {
		t.Fatal("two different reports share an inode: the test proves nothing")
	}
	if st := f.Swap(b); st.Entries == 0 {
		t.Errorf("a swap that changed the report dropped no entry: %+v", st)
	}
	if _, out := r.mustLookup(tree.ReportPath); out.Attr.Ino != b.Report.Ino {
		t.Errorf("after the swap the report is ino %d, want the new tree's %d", out.Attr.Ino, b.Report.Ino)
	}
}

// sized knows every size (the tree's report has its own); it reads
// nothing.
type sized struct{ Reader }

func (sized) EnsureSize(context.Context, *tree.Node) error { return nil }
