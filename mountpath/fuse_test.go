package mountpath

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// silentFS stands for a user's FUSE server that answers lookups and
// creates but never a statfs nor a getattr (until released).
type silentFS struct {
	fs.Inode
	release chan struct{}
}

func (r *silentFS) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	<-r.release
	return 0
}

func (r *silentFS) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	<-r.release
	out.Mode = syscall.S_IFDIR | 0o777
	return 0
}

func (r *silentFS) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if name != "d" {
		return nil, syscall.ENOENT
	}
	out.Mode, out.Uid = syscall.S_IFDIR|0o755, nobody
	return r.NewInode(ctx, &silentFS{release: r.release}, fs.StableAttr{Mode: syscall.S_IFDIR}), 0
}

func (r *silentFS) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	out.Mode, out.Uid = syscall.S_IFREG|0o600, nobody
	return r.NewInode(ctx, &silentFS{release: r.release}, fs.StableAttr{Mode: syscall.S_IFREG}), nil, fuse.FOPEN_DIRECT_IO, 0
}

// TestFUSEToldFromTheMountTable: a directory or a file on a FUSE file
// system is refused without asking its server anything (its statfs and
// getattr never answer): the mount's root as in use, what is inside it
// as not allowed, an access log there as on a FUSE file system.
func TestFUSEToldFromTheMountTable(t *testing.T) {
	requireRoot(t)
	if _, err := os.Stat("/dev/fuse"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: no /dev/fuse")
		}
		t.Skip("SKIPPED: no /dev/fuse")
	}
	mnt := filepath.Join(tree(t), "silent")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	root := &silentFS{release: make(chan struct{})}
	zero := time.Duration(0)
	srv, err := fs.Mount(mnt, root, &fs.Options{AttrTimeout: &zero, EntryTimeout: &zero,
		MountOptions: fuse.MountOptions{AllowOther: true, FsName: "silent", DisableXAttrs: true}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(root.release); _ = srv.Unmount() })
	u := User{UID: nobody, GID: nobody}
	for _, c := range []struct {
		what string
		try  func() error
		is   error
		says string
	}{
		{"the mount's root", func() error { d, err := Open(mnt, User{}); closeDir(d); return err }, ErrInUse, "mount point already"},
		{"a directory inside", func() error { d, err := Open(filepath.Join(mnt, "d"), u); closeDir(d); return err }, ErrNotAllowed, "inside a FUSE file system"},
		{"a directory inside, on a restart", func() error { d, err := Reopen(filepath.Join(mnt, "d"), u, 1); closeDir(d); return err }, ErrNotAllowed, "inside a FUSE file system"},
		{"an access log", func() error {
			f, err := CreateFile(filepath.Join(mnt, "log"), u)
			if f != nil {
				f.Close()
			}
			return err
		}, ErrNotAllowed, "on a FUSE file system"},
	} {
		start := time.Now()
		err := c.try()
		if !errors.Is(err, c.is) || !strings.Contains(fmtErr(err), c.says) {
			t.Errorf("%s: %v, want %v saying %q", c.what, err, c.is, c.says)
		}
		if took := time.Since(start); took > resolveTimeout/2 {
			t.Errorf("%s: refused after %v: its server was waited for", c.what, took)
		}
	}
}

func closeDir(d *Dir) {
	if d != nil {
		d.Close()
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
