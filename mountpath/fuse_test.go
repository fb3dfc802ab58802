package mountpath

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/internal/testenv"
)

// silentFS stands for a user's FUSE server that answers lookups and
// creates but never a statfs nor a getattr (until released); asked counts
// the statfs and getattr requests that reached it.
type silentFS struct {
	fs.Inode
	release chan struct{}
	asked   *atomic.Int64
}

func (r *silentFS) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	r.asked.Add(1)
	<-r.release
	return 0
}

func (r *silentFS) Getattr(ctx context.Context, f fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	r.asked.Add(1)
	<-r.release
	out.Mode = syscall.S_IFDIR | 0o777
	return 0
}

func (r *silentFS) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if name != "d" {
		return nil, syscall.ENOENT
	}
	out.Mode, out.Uid = syscall.S_IFDIR|0o755, nobody
	return r.NewInode(ctx, &silentFS{release: r.release, asked: r.asked}, fs.StableAttr{Mode: syscall.S_IFDIR}), 0
}

func (r *silentFS) Create(ctx context.Context, name string, flags, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	out.Mode, out.Uid = syscall.S_IFREG|0o600, nobody
	return r.NewInode(ctx, &silentFS{release: r.release, asked: r.asked}, fs.StableAttr{Mode: syscall.S_IFREG}), nil, fuse.FOPEN_DIRECT_IO, 0
}

// TestFUSEToldFromTheMountTable: a directory or a file on a FUSE file
// system is refused without asking its server a statfs or a getattr
// (which never answer): the mount's root as in use, what is inside it as
// not allowed, an access log there as on a FUSE file system. The server
// counts what reached it; a stat of the mount shows that it would.
func TestFUSEToldFromTheMountTable(t *testing.T) {
	requireRoot(t)
	_, err := os.Stat("/dev/fuse")
	testenv.Require(t, err == nil, "no /dev/fuse: %v", err)
	mnt := filepath.Join(tree(t), "silent")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	root := &silentFS{release: make(chan struct{}), asked: new(atomic.Int64)}
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
		{"a directory inside, on a restart", func() error { d, err := Reopen(filepath.Join(mnt, "d"), u, 1, ""); closeDir(d); return err }, ErrNotAllowed, "inside a FUSE file system"},
		{"an access log", func() error {
			f, err := CreateFile(filepath.Join(mnt, "log"), u)
			if f != nil {
				f.Close()
			}
			return err
		}, ErrNotAllowed, "on a FUSE file system"},
	} {
		err := c.try()
		if !errors.Is(err, c.is) || !strings.Contains(fmtErr(err), c.says) {
			t.Errorf("%s: %v, want %v saying %q", c.what, err, c.is, c.says)
		}
		// a request sent would have had resolveTimeout to arrive
		if n := root.asked.Load(); n != 0 {
			t.Fatalf("%s: %d statfs or getattr requests reached the server", c.what, n)
		}
	}
	// positive control: a statfs of the mount does reach the server (and
	// waits for it: released at cleanup)
	go func() {
		var st syscall.Statfs_t
		_ = syscall.Statfs(mnt, &st)
	}()
	for deadline := time.Now().Add(time.Minute); root.asked.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a statfs of the mount never reached its server: the count proves nothing")
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
