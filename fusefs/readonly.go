package fusefs

import (
	"context"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// readOnly answers every write path with EROFS. The kernel already refuses
// writes on a read-only mount; this covers requests that reach the server
// anyway. Extended attributes never reach it: the mount disables them
// (FS.Options).
type readOnly struct{}

var (
	_ = (fs.NodeSetattrer)((*readOnly)(nil))
	_ = (fs.NodeMkdirer)((*readOnly)(nil))
	_ = (fs.NodeMknoder)((*readOnly)(nil))
	_ = (fs.NodeCreater)((*readOnly)(nil))
	_ = (fs.NodeUnlinker)((*readOnly)(nil))
	_ = (fs.NodeRmdirer)((*readOnly)(nil))
	_ = (fs.NodeRenamer)((*readOnly)(nil))
	_ = (fs.NodeLinker)((*readOnly)(nil))
	_ = (fs.NodeSymlinker)((*readOnly)(nil))
)

func (readOnly) Setattr(context.Context, fs.FileHandle, *fuse.SetAttrIn, *fuse.AttrOut) syscall.Errno {
	return syscall.EROFS
}
func (readOnly) Mkdir(context.Context, string, uint32, *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (readOnly) Mknod(context.Context, string, uint32, uint32, *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (readOnly) Create(context.Context, string, uint32, uint32, *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	return nil, nil, 0, syscall.EROFS
}
func (readOnly) Unlink(context.Context, string) syscall.Errno { return syscall.EROFS }
func (readOnly) Rmdir(context.Context, string) syscall.Errno  { return syscall.EROFS }
func (readOnly) Rename(context.Context, string, fs.InodeEmbedder, string, uint32) syscall.Errno {
	return syscall.EROFS
}
func (readOnly) Link(context.Context, fs.InodeEmbedder, string, *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
func (readOnly) Symlink(context.Context, string, string, *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return nil, syscall.EROFS
}
