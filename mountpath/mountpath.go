// Package mountpath checks, the way fusermount3 does and without a race,
// that a user may have something mounted at a path, and holds the
// directory it checked so that the mount goes on exactly that directory.
//
// fusermount3 (setuid root) lets a user mount only on a directory the
// user owns and may write, and it mounts on the directory it checked
// (it chdirs there and mounts "."), so a symbolic link swapped in between
// check and mount cannot redirect it. A privileged daemon that mounts on
// a client's behalf must do no less:
//
//   - the path is resolved on a thread that takes the user's file-system
//     identity (setfsuid, setfsgid and the user's groups, on that thread
//     only; the thread is discarded after), so the user must be able to
//     reach it; with openat2's RESOLVE_NO_SYMLINKS, no component may be
//     a symbolic link (nor a /proc magic link);
//   - the checks are made on the opened descriptor, not on the name: a
//     directory, owned by the user and writable by its owner (root may use
//     any directory), empty, not itself a mount point (STATX_ATTR_MOUNT_ROOT),
//     and not inside a FUSE file system (a view mounted in a view would make
//     the daemon serve requests from its own mounts);
//   - the caller mounts on Dir.Target(), /proc/self/fd/N: the kernel
//     follows that to the directory that was opened and checked, whatever
//     the name points to by then.
//
// Files (an access log a client names) are opened the same way: resolved
// and created as the user, without following a link, and used only if
// they are the user's own regular files.
package mountpath

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chromafs/chromafs/internal/proc"
)

// User is whose behalf a path is checked on (from the socket's peer
// credentials).
type User struct {
	UID, GID uint32
	Groups   []uint32 // supplementary groups
}

// Errors the checks wrap.
var (
	ErrNotAllowed = errors.New("not a directory this user may mount on")
	ErrInUse      = errors.New("in use")
)

// Dir is an opened, checked directory.
type Dir struct {
	f    *os.File
	path string
}

// Path is the path the directory was opened by.
func (d *Dir) Path() string { return d.path }

// Fd is the descriptor held on the directory.
func (d *Dir) Fd() int { return int(d.f.Fd()) }

// Target is the name to mount on: the directory that was checked.
func (d *Dir) Target() string { return "/proc/self/fd/" + strconv.Itoa(int(d.f.Fd())) }

// Close releases the directory (after the mount, or if it failed).
func (d *Dir) Close() error { return d.f.Close() }

// Open resolves path (absolute) as u and checks it is a directory u may
// mount on. The caller closes the Dir.
func Open(path string, u User) (*Dir, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%s: want an absolute path", path)
	}
	path = filepath.Clean(path)
	fd, err := openAs(u, path, unix.O_PATH|unix.O_DIRECTORY, func(fd int) error { return checkDir(fd, path, u) })
	if err != nil {
		return nil, pathError(path, err)
	}
	return &Dir{f: os.NewFile(uintptr(fd), path), path: path}, nil
}

// checkDir checks that fd, opened by path, is a directory u may mount
// on. Whether it is on a FUSE file system is told from the mount table
// first, without a request its server could leave unanswered.
func checkDir(fd int, path string, u User) error {
	fuse, root, err := onFUSE(fd, path)
	switch {
	case err != nil:
		return fmt.Errorf("%s: %w", path, err)
	case fuse && root:
		return fmt.Errorf("%s is a mount point already: %w", path, ErrInUse)
	case fuse:
		return fmt.Errorf("%s is inside a FUSE file system (another mount of chromafs?): %w", path, ErrNotAllowed)
	}
	var stx unix.Statx_t
	if err := unix.Statx(fd, "", unix.AT_EMPTY_PATH, unix.STATX_BASIC_STATS, &stx); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if stx.Mode&unix.S_IFMT != unix.S_IFDIR {
		return fmt.Errorf("%s: not a directory: %w", path, ErrNotAllowed)
	}
	if stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT != 0 {
		return fmt.Errorf("%s is a mount point already: %w", path, ErrInUse)
	}
	if u.UID != 0 {
		if stx.Uid != u.UID {
			return fmt.Errorf("%s is owned by uid %d, not by uid %d: %w", path, stx.Uid, u.UID, ErrNotAllowed)
		}
		if stx.Mode&0o200 == 0 {
			return fmt.Errorf("%s is not writable by its owner (mode %04o): %w", path, stx.Mode&0o7777, ErrNotAllowed)
		}
	}
	empty, err := emptyDir(fd, path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if !empty {
		return fmt.Errorf("%s is not empty: %w", path, ErrInUse)
	}
	return nil
}

// onFUSE reports whether fd, opened by path (absolute, clean, resolved
// without a symbolic link), is on a FUSE mount, and whether it is that
// mount's root, from its mount id (fdinfo) and the mount table: nothing
// is asked of the file system.
func onFUSE(fd int, path string) (fuse, root bool, err error) {
	id, err := MountID(fd)
	if err != nil {
		return false, false, err
	}
	m, at, ok := proc.MountByID(id)
	if !ok {
		return false, false, fmt.Errorf("mount %d is not in this process's mount table", id)
	}
	return m.IsFUSE(), at == path, nil
}

// emptyDir reads the directory fd holds.
func emptyDir(dirfd int, path string) (bool, error) {
	fd, err := unix.Openat(dirfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	names, err := f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return len(names) == 0, err
}

// CreateFile opens path (absolute) for appending as u would: resolved as
// u without a symbolic link, created by u (mode 0600, so u's) where u may
// create files, or, if it exists, u's own regular file (never a link, a
// FIFO, another user's file, or a file on a FUSE file system, whose
// server could hold every write).
func CreateFile(path string, u User) (*os.File, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("%s: want an absolute path", path)
	}
	path = filepath.Clean(path)
	fd, err := openAs(u, path, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT|unix.O_NOFOLLOW|unix.O_NONBLOCK, func(fd int) error {
		// told from the mount table first: its server decides when a
		// request returns, and the writer would wait on a file system
		// its user controls
		fuse, _, err := onFUSE(fd, path)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if fuse {
			return fmt.Errorf("%s is on a FUSE file system: put it on a local one: %w", path, ErrNotAllowed)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		switch {
		case st.Mode&unix.S_IFMT != unix.S_IFREG:
			return fmt.Errorf("%s: not a regular file: %w", path, ErrNotAllowed)
		case st.Uid != u.UID:
			return fmt.Errorf("%s is owned by uid %d, not by uid %d: %w", path, st.Uid, u.UID, ErrNotAllowed)
		}
		return nil
	})
	if err != nil {
		return nil, pathError(path, err)
	}
	_ = unix.SetNonblock(fd, false)
	return os.NewFile(uintptr(fd), path), nil
}

// checkFailed is a check's refusal of what openAs opened (already
// described; see pathError).
type checkFailed struct{ err error }

func (c *checkFailed) Error() string { return c.err.Error() }
func (c *checkFailed) Unwrap() error { return c.err }

// pathError is openAs's error as the caller returns it: a check's as it
// is, a resolution's described.
func pathError(path string, err error) error {
	var cf *checkFailed
	if errors.As(err, &cf) {
		return cf.err
	}
	return describe(path, err)
}

// describe turns the resolution's errors into what a user can act on.
func describe(path string, err error) error {
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return fmt.Errorf("%s: a symbolic link on the way: %w", path, ErrNotAllowed)
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		return fmt.Errorf("%s: permission denied for this user: %w", path, ErrNotAllowed)
	case errors.Is(err, unix.ENOTDIR):
		return fmt.Errorf("%s: not a directory: %w", path, ErrNotAllowed)
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%s: no such directory: %w", path, ErrNotAllowed)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// openAs opens path with openat2 (no symbolic links, no magic links) on a
// thread whose file-system identity is u's, then runs check on the
// descriptor on that same thread with the daemon's own identity again
// (a failed check closes it); the thread is never given back to the Go
// scheduler (it exits with the goroutine), so no other goroutine ever
// runs with u's identity.
//
// A resolution (the checks included: each may be a request to the file
// system) that has not answered after resolveTimeout is given up, but
// its thread stays blocked in the kernel until the file system answers: a user's own FUSE server that never does would otherwise
// leave a thread per request, up to Go's fatal thread limit. So the
// resolutions in flight are counted until their thread ends (package
// state: they are the process's threads), and a user with
// maxInFlightPerUser of them, or any user but root once maxInFlight are,
// is refused at once until some end.
func openAs(u User, path string, flags int, check func(fd int) error) (int, error) {
	if err := inFlight.enter(u.UID); err != nil {
		return -1, fmt.Errorf("%s: %w", path, err)
	}
	type result struct {
		fd  int
		err error
	}
	res := make(chan result, 1)
	go func() {
		defer inFlight.done(u.UID)
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		if err := become(u); err != nil {
			res <- result{-1, err}
			return
		}
		how := &unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
		if flags&unix.O_CREAT != 0 {
			how.Mode = 0o600 // openat2 takes a mode only with O_CREAT
		}
		fd, err := unix.Openat2(unix.AT_FDCWD, path, how)
		if err == nil && check != nil {
			if err = unbecome(u); err == nil {
				if cerr := check(fd); cerr != nil {
					err = &checkFailed{cerr}
				}
			}
			if err != nil {
				unix.Close(fd)
				fd = -1
			}
		}
		res <- result{fd, err}
	}()
	select {
	case r := <-res:
		return r.fd, r.err
	case <-time.After(resolveTimeout):
		// a lookup through a file system that does not answer (the user's
		// own FUSE mount, a hung NFS server): the thread stays blocked until
		// it answers, then closes what it opened and ends
		go func() {
			if r := <-res; r.err == nil {
				unix.Close(r.fd)
			}
		}()
		return -1, &checkFailed{fmt.Errorf("%s: no answer within %v from a file system on the way: %w", path, resolveTimeout, ErrNotAllowed)}
	}
}

// resolveTimeout bounds a path's resolution: the daemon must never wait
// on a file system a user controls.
const resolveTimeout = 5 * time.Second

// Bounds of the resolutions in flight (see openAs): a resolution takes
// microseconds unless a file system on the way does not answer.
const (
	maxInFlightPerUser = 16
	maxInFlight        = 128
)

// inFlight counts the resolutions in flight, per uid.
var inFlight = &flightCount{byUID: map[uint32]int{}}

type flightCount struct {
	mu    sync.Mutex
	byUID map[uint32]int
	total int
}

// enter counts a resolution for uid, or refuses it when too many of its
// (or of everyone's, for a user but root) are in flight.
func (s *flightCount) enter(uid uint32) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.byUID[uid] >= maxInFlightPerUser:
		return fmt.Errorf("%d resolutions of uid %d's paths are in flight (waiting on a file system that does not answer?); refused until they end: %w", s.byUID[uid], uid, ErrNotAllowed)
	case uid != 0 && s.total >= maxInFlight:
		return fmt.Errorf("%d path resolutions are in flight (waiting on file systems that do not answer?); refused until they end: %w", s.total, ErrNotAllowed)
	}
	s.byUID[uid]++
	s.total++
	return nil
}

func (s *flightCount) done(uid uint32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byUID[uid]--; s.byUID[uid] <= 0 {
		delete(s.byUID, uid)
	}
	s.total--
}

// InFlight is how many path resolutions are in flight (each holds a
// thread; those waiting on a file system that does not answer hold it
// until it does).
func InFlight() int {
	inFlight.mu.Lock()
	defer inFlight.mu.Unlock()
	return inFlight.total
}

// become gives the calling thread u's file-system identity: groups
// first (setgroups(2) through the raw system call acts on this thread
// only; Go's syscall.Setgroups would change every thread), then gid, then
// uid. For root (uid 0), and for this process's own uid, nothing changes.
func become(u User) error {
	if u.UID == 0 || int(u.UID) == os.Geteuid() {
		return nil // root, or this process's own user: nothing to take
	}
	groups := u.Groups
	if len(groups) == 0 {
		groups = []uint32{u.GID}
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), uintptr(ptr(groups)), 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	unix.Setfsgid(int(u.GID))
	unix.Setfsuid(int(u.UID))
	if cur, _ := unix.SetfsuidRetUid(-1); cur != int(u.UID) {
		return fmt.Errorf("cannot take uid %d's file-system identity (this process is not privileged)", u.UID)
	}
	if cur, _ := unix.SetfsgidRetGid(-1); cur != int(u.GID) {
		return fmt.Errorf("cannot take gid %d's file-system identity", u.GID)
	}
	return nil
}

// unbecome gives the calling thread the process's own file-system
// identity back after become (setfsuid needs CAP_SETUID, which a change
// of the file-system uid does not take away): the checks of what was
// opened are the daemon's, as the mount is.
func unbecome(u User) error {
	if u.UID == 0 || int(u.UID) == os.Geteuid() {
		return nil
	}
	unix.Setfsuid(os.Geteuid())
	unix.Setfsgid(os.Getegid())
	if cur, _ := unix.SetfsuidRetUid(-1); cur != os.Geteuid() {
		return fmt.Errorf("cannot take the daemon's file-system identity back")
	}
	return nil
}
