package mountpath

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/chromafs/chromafs/internal/proc"
)

// Mount operations of a privileged daemon, made on descriptors so that no
// name is looked up twice: BindOnto places a copy of a mount (idmapped or
// not) on a checked directory and makes it shared; Unmount takes a mount away only if it is
// still the one recorded (its mount id).

// BindOnto places a copy of the mount at src (a path of the daemon's own,
// not reachable by users) on d, the directory that was checked, and makes
// the copy a shared mount: a mount stacked on it later (after a daemon
// restart) propagates to the copies sandboxes made of it. With an idmap
// (not nil), the copy is an idmapped one: the files src's mount holds as
// root's are its owner's there (idmap.go). It returns the new mount's
// id. Stacking on a mount that is there already is allowed only through
// a Dir from Reopen.
func BindOnto(src string, d *Dir, idmap *IDMap) (uint64, error) {
	tree, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return 0, fmt.Errorf("open_tree %s: %w", src, err)
	}
	defer unix.Close(tree)
	if idmap != nil {
		if err := setIDMap(tree, idmap); err != nil {
			return 0, err
		}
	}
	if err := unix.MoveMount(tree, "", d.Fd(), "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH); err != nil {
		return 0, fmt.Errorf("mount on %s: %w", d.path, err)
	}
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Propagation: unix.MS_SHARED}); err != nil {
		_ = unix.Unmount(d.path, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		return 0, fmt.Errorf("make %s shared: %w", d.path, err)
	}
	id, err := MountID(tree)
	if err != nil {
		return 0, err
	}
	return id, nil
}

// MountID reads the id of the mount fd is on, from /proc/self/fdinfo
// (no request reaches the file system: it works on a dead FUSE mount).
func MountID(fd int) (uint64, error) {
	f, err := os.Open("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "mnt_id:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		}
	}
	return 0, errors.New("fdinfo without mnt_id")
}

// ErrMoved is returned when the mount at a path is not the one recorded.
var ErrMoved = errors.New("not the mount recorded there")

// Unmount takes away the mount at path (absolute) if it is the mount id
// recorded: the path is resolved without symbolic links, and the mount
// that was found is the one detached (lazily: a sandbox's process inside
// does not keep it).
func Unmount(path string, id uint64) error {
	fd, err := unix.Openat2(unix.AT_FDCWD, filepath.Clean(path), &unix.OpenHow{
		Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return describe(path, err)
	}
	defer unix.Close(fd)
	got, err := MountID(fd)
	if err != nil {
		return err
	}
	if got != id {
		return fmt.Errorf("%s: %w (mount %d, recorded %d)", path, ErrMoved, got, id)
	}
	if err := unix.Unmount("/proc/self/fd/"+strconv.Itoa(fd), unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount %s: %w", path, err)
	}
	return nil
}

// MountID is the id of the mount the directory d holds is on (for a
// mount point: the mount on it, if the Dir came from Reopen).
func (d *Dir) MountID() (uint64, error) { return MountID(d.Fd()) }

// Reopen resolves path as u for a daemon that restarts: when the mount
// found there is the one recorded (id, or dev: a dead mount of the daemon
// before), it returns it to stack a new mount on; otherwise it is Open's
// checks (the path must be a directory u may mount on again).
//
// A daemon restarted in a new mount namespace (a new container of a
// DaemonSet, whose kubelet directory is shared with the host) finds a
// copy of its dead mount there, under another id: the device (dev, the
// super block's major:minor, the same in every copy) tells it.
func Reopen(path string, u User, id uint64, dev string) (*Dir, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%s: want an absolute path", path)
	}
	path = filepath.Clean(path)
	fd, err := openAs(u, path, unix.O_PATH|unix.O_DIRECTORY, func(fd int) error {
		if got, err := MountID(fd); err == nil && (got == id && id != 0 || Recorded(got, path, dev)) {
			return nil // the dead mount recorded: to stack on
		}
		return checkDir(fd, path, u)
	})
	if err != nil {
		return nil, pathError(path, err)
	}
	return &Dir{f: os.NewFile(uintptr(fd), path), path: path}, nil
}

// Recorded reports whether the mount of id, at path, is a FUSE mount of
// device dev, made by root in its user namespace (user_id=0): a copy of a
// mount recorded by its device ("" matches nothing). A device number is
// one super block's while that super block exists: while the dead mount
// recorded is still there (it is, if a copy of it is found), no other
// file system has its number. After a reboot numbers start again: a
// record's ids and devices are trusted only in the boot and mount
// namespace they were taken in (the daemon's MountNS), and devices only
// with the path.
func Recorded(id uint64, path, dev string) bool {
	if dev == "" {
		return false
	}
	m, at, ok := proc.MountByID(id)
	return ok && at == path && Ours(m, dev)
}

// Ours reports whether m is a FUSE mount of device dev that root made.
func Ours(m proc.Mount, dev string) bool {
	return dev != "" && m.Device == dev && m.IsFUSE() && m.HasOption("user_id=0")
}

// UnmountID takes away the mount of id wherever it is now (its path may
// have been renamed, or a link put on the way, since it was placed): it
// is found in /proc/self/mountinfo (whose first field is the mount id)
// and detached with Unmount, which checks the id again. A mount that is
// gone already is not an error; nor is one of id that is not a root-made
// FUSE mount of device dev (when dev is known): the id was given to
// another mount since.
func UnmountID(id uint64, dev string) error {
	for range 3 { // the path may move again meanwhile
		m, path, ok := proc.MountByID(id)
		if !ok || dev != "" && !Ours(m, dev) {
			return nil
		}
		err := Unmount(path, id)
		if err == nil || (!errors.Is(err, ErrMoved) && !errors.Is(err, ErrNotAllowed)) {
			return err
		}
	}
	return fmt.Errorf("mount %d keeps moving", id)
}
