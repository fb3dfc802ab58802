package daemon

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/chromafs/chromafs/policy"
)

// subjectOf is the policy's subject of a recorded attachment.
func subjectOf(rec record) policy.Subject {
	if rec.Open {
		return policy.Subject{Pod: rec.Pod, Docker: rec.Docker}
	}
	return policy.Subject{UID: rec.UID, GIDs: append([]uint32{rec.GID}, rec.UserGroups...)}
}

func currentUID() int { return os.Geteuid() }

// asRoot reports whether the daemon serves uid (a unix user's request;
// not a front end's) as root: root itself, or the user a daemon without
// privileges runs as, who holds the token and the caches anyway. Such a
// caller may attach anything, may set layout keys, and has no limits.
func (d *Daemon) asRoot(uid uint32, frontEnd bool) bool {
	return !frontEnd && (uid == 0 || (!d.privileged && uid == uint32(currentUID())))
}

// isDeadMount reports whether path is a FUSE mount that lost its server.
// The probe is statfs, bounded: a hung server must not hang the daemon.
func isDeadMount(path string) bool {
	res := make(chan error, 1)
	go func() {
		var st syscall.Statfs_t
		res <- syscall.Statfs(path, &st)
	}()
	select {
	case err := <-res:
		return errors.Is(err, syscall.ENOTCONN)
	case <-time.After(2 * time.Second):
		return false
	}
}

// fusermountLazy detaches a FUSE mount of this user with fusermount3.
func fusermountLazy(path string) error {
	out, err := exec.Command("fusermount3", "-u", "-z", path).CombinedOutput()
	if err != nil {
		return errors.New(strings.TrimSpace(string(out)))
	}
	return nil
}
