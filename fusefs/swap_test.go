package fusefs

import (
	"strings"
	"testing"

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
