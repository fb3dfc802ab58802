package mountpath

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// An idmapped copy of a mount (mount_setattr MOUNT_ATTR_IDMAP, Linux
// 5.12; FUSE file systems since 6.12, when their server allows it) shows
// the files of the mount as owned by other ids, and the kernel checks
// permissions against the ids it shows. A daemon serves a view to many
// users from one mount whose files are root's: each user's copy shows
// them as that user's (its root 0500: no other user enters it), and
// every copy reads the one mount's page cache.
//
// The mapping is a user namespace's: a process is started in a new one
// with the ids mapped (by the kernel's clone and the Go runtime's
// writes of uid_map and gid_map, before the child runs any code of its
// own), stopped by ptrace before its program's first instruction, its
// namespace opened, and killed. The namespace lives on in the opened
// descriptor.

// IDMap maps root (uid 0, gid 0) to one owner, for idmapped copies of a
// mount whose files are root's.
type IDMap struct {
	UID, GID uint32
	ns       *os.File // the user namespace
}

// NewIDMap makes the user namespace that maps uid 0 to uid and gid 0 to
// gid. It costs a fork and an exec that never runs (about 2 ms).
func NewIDMap(uid, gid uint32) (*IDMap, error) {
	// the tracer is this thread: it must not end while the child lives
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	p, err := os.StartProcess("/proc/self/exe", []string{"chromafs-idmap"}, &os.ProcAttr{Sys: &syscall.SysProcAttr{
		Cloneflags:  unix.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(uid), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(gid), Size: 1}},
		Ptrace:      true, // stopped at its exec: it never runs
		Pdeathsig:   syscall.SIGKILL,
	}})
	if err != nil {
		return nil, fmt.Errorf("a user namespace mapping root to %d:%d: %w", uid, gid, err)
	}
	defer func() { _ = p.Kill(); _, _ = p.Wait() }()
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", p.Pid))
	if err != nil {
		return nil, fmt.Errorf("a user namespace mapping root to %d:%d: %w", uid, gid, err)
	}
	return &IDMap{UID: uid, GID: gid, ns: ns}, nil
}

// Close lets go of the namespace (the copies made with it keep it).
func (m *IDMap) Close() error { return m.ns.Close() }

// ErrNoIDMap is returned by ProbeIDMap when the kernel, or the file
// system's server, does not allow an idmapped copy.
var ErrNoIDMap = errors.New("idmapped mounts not supported")

// ProbeIDMap reports whether an idmapped copy of the mount at src may be
// made: it makes one with m and lets it go unattached.
func ProbeIDMap(src string, m *IDMap) error {
	tree, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return fmt.Errorf("open_tree %s: %w", src, err)
	}
	defer unix.Close(tree)
	if err := setIDMap(tree, m); err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EPERM) {
			return fmt.Errorf("%w: %w", ErrNoIDMap, err)
		}
		return err
	}
	return nil
}

// setIDMap makes the detached mount tree an idmapped one.
func setIDMap(tree int, m *IDMap) error {
	if err := unix.MountSetattr(tree, "", unix.AT_EMPTY_PATH, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP, Userns_fd: uint64(m.ns.Fd())}); err != nil {
		return fmt.Errorf("idmapped copy for %d:%d: %w", m.UID, m.GID, err)
	}
	return nil
}
