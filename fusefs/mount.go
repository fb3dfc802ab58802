package fusefs

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// Mount mounts f at dir and starts serving; it returns once the kernel
// has the mount. It is fs.Mount with one change below the fs API: see
// noOpendir.
func (f *FS) Mount(dir string, mo fuse.MountOptions) (*fuse.Server, error) {
	return MountNodes(f.Root(), dir, f.Options(mo))
}

// MountNodes mounts the node tree of root at dir with opts, as every
// chromafs mount is (behind noOpendir), and starts serving; it returns
// once the kernel has the mount.
func MountNodes(root fs.InodeEmbedder, dir string, opts *fs.Options) (*fuse.Server, error) {
	raw := &noOpendir{RawFileSystem: fs.NewNodeFS(root, opts)}
	server, err := fuse.NewServer(raw, dir, &opts.MountOptions)
	if err != nil {
		return nil, err
	}
	go server.Serve()
	if err := server.WaitMount(); err != nil {
		return nil, err
	}
	return server, nil
}

// noOpendir answers OPENDIR with ENOSYS, which makes the kernel stop sending
// OPENDIR and RELEASEDIR for good and cache directory listings itself (it
// then treats every directory as opened with FOPEN_CACHE_DIR). A warm
// grep -r or find then costs no request at all. go-fuse's fs layer expects
// a handle for READDIR, so a READDIR without one opens a handle inside,
// reads, and releases it.
type noOpendir struct {
	fuse.RawFileSystem
}

func (r *noOpendir) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	return fuse.ENOSYS
}

func (r *noOpendir) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return r.withHandle(cancel, in, func(in *fuse.ReadIn) fuse.Status { return r.RawFileSystem.ReadDir(cancel, in, out) })
}

func (r *noOpendir) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	return r.withHandle(cancel, in, func(in *fuse.ReadIn) fuse.Status { return r.RawFileSystem.ReadDirPlus(cancel, in, out) })
}

func (r *noOpendir) ReleaseDir(in *fuse.ReleaseIn) {
	if in.Fh != 0 {
		r.RawFileSystem.ReleaseDir(in)
	}
}

func (r *noOpendir) withHandle(cancel <-chan struct{}, in *fuse.ReadIn, read func(*fuse.ReadIn) fuse.Status) fuse.Status {
	if in.Fh != 0 {
		return read(in)
	}
	var opened fuse.OpenOut
	st := r.RawFileSystem.OpenDir(cancel, &fuse.OpenIn{InHeader: in.InHeader, Flags: syscall.O_RDONLY}, &opened)
	if !st.Ok() {
		return st
	}
	defer r.RawFileSystem.ReleaseDir(&fuse.ReleaseIn{InHeader: in.InHeader, Fh: opened.Fh})
	withFh := *in
	withFh.Fh = opened.Fh
	return read(&withFh)
}

// MountProbe mounts an empty directory at dir with mo, for a caller to
// learn what the kernel allows of a chromafs mount (an idmapped copy of
// it) before it serves one. Unmount it after.
func MountProbe(dir string, mo fuse.MountOptions) (*fuse.Server, error) {
	return MountNodes(&fs.Inode{}, dir, &fs.Options{MountOptions: mo})
}
