package fusefs

import (
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/tree"
)

// dirSize is what ext4 reports for a small directory, so that ls -l and
// du -b on the mount match a local copy.
const dirSize = 4096

// fillAttr describes n. A file's size must be known (see ensureSize).
func (f *FS) fillAttr(n *tree.Node, a *fuse.Attr) {
	a.Ino = n.Ino
	a.Uid, a.Gid = f.cfg.UID, f.cfg.GID
	a.Nlink = n.Nlink()
	a.Mtime, a.Atime, a.Ctime = uint64(max(n.Mtime, 0)), uint64(max(n.Mtime, 0)), uint64(max(n.Mtime, 0))
	a.Mtimensec, a.Atimensec, a.Ctimensec = n.Nsec, n.Nsec, n.Nsec
	a.Blksize = 4096
	if n.IsDir() {
		a.Mode = syscall.S_IFDIR | 0o555
		a.Size = dirSize
	} else {
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
	if n.IsDir() {
		return syscall.S_IFDIR
	}
	return syscall.S_IFREG
}
