package fusefs

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/tree"
)

// dirSize is what ext4 reports for a small directory, so that ls -l and
// du -b on the mount match a local copy.
const dirSize = 4096

// fastLink is the target length below which ext4 keeps a symbolic link in
// its inode (no block allocated; du counts 0).
const fastLink = 60

// fillAttr describes n. A file's size must be known (see ensureSize).
func (f *FS) fillAttr(n *tree.Node, a *fuse.Attr) {
	a.Ino = n.Ino
	a.Uid, a.Gid = f.cfg.UID, f.cfg.GID
	a.Nlink = n.Nlink()
	a.Mtime, a.Atime, a.Ctime = uint64(max(n.Mtime, 0)), uint64(max(n.Mtime, 0)), uint64(max(n.Mtime, 0))
	a.Mtimensec, a.Atimensec, a.Ctimensec = n.Nsec, n.Nsec, n.Nsec
	a.Blksize = 4096
	switch {
	case n.IsDir():
		a.Mode = syscall.S_IFDIR | 0o555
		if n.Ino == tree.RootIno && f.cfg.RootPerm != 0 {
			a.Mode = syscall.S_IFDIR | f.cfg.RootPerm&0o555
		}
		a.Size = dirSize
	case n.Link != nil:
		a.Mode = syscall.S_IFLNK | 0o777
		a.Size = uint64(len(n.Link.Target))
		if a.Size < fastLink {
			return // kept in the inode, as ext4 does: no block
		}
	default:
		a.Mode = syscall.S_IFREG | 0o444
		if n.File.Exec {
			a.Mode |= 0o111
		}
		size, _ := n.File.Size()
		a.Size = uint64(max(size, 0))
	}
	// Allocated like a local file system: whole 4 KiB blocks, in 512-byte
	// units, so du and ls -s agree with a local copy.
	a.Blocks = (a.Size + 4095) / 4096 * 8
}

func modeOf(n *tree.Node) uint32 {
	switch {
	case n.IsDir():
		return syscall.S_IFDIR
	case n.Link != nil:
		return syscall.S_IFLNK
	}
	return syscall.S_IFREG
}
