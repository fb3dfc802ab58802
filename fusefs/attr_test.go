package fusefs

import (
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// TestRootPerm: RootPerm narrows the root directory's mode only (an
// attachment for one user: nobody else may enter); without it the root is
// 0555 like every directory.
func TestRootPerm(t *testing.T) {
	tr := build(t, `{"d/page":{"isPublic":true,"sha256":"11","size":3,"chunks":[3]}}`)
	for _, c := range []struct {
		perm, root, dir uint32
	}{{0, 0o555, 0o555}, {0o500, 0o500, 0o555}, {0o777, 0o555, 0o555}} {
		f := New(tr, nil, Config{NoKernelPush: true, UID: 7, RootPerm: c.perm})
		var root, dir fuse.Attr
		f.fillAttr(tr.Root, &root)
		f.fillAttr(tr.Lookup("d"), &dir)
		if root.Mode&0o7777 != c.root || dir.Mode&0o7777 != c.dir || root.Uid != 7 {
			t.Errorf("RootPerm %o: root %o (uid %d), dir %o; want %o, %o", c.perm, root.Mode&0o7777, root.Uid, dir.Mode&0o7777, c.root, c.dir)
		}
		f.Close()
	}
}
