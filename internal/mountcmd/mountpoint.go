package mountcmd

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/chromafs/chromafs/internal/proc"
)

// prepareMountpoint checks that mp is an empty directory that is not
// mounted, clearing a stale FUSE mount left by a crashed daemon. It returns
// the absolute path.
func prepareMountpoint(log *slog.Logger, mp string) (string, error) {
	abs, err := filepath.Abs(mp)
	if err != nil {
		return "", fmt.Errorf("mountpoint %s: %w", mp, err)
	}
	if fstype, ok := proc.MountedAt(abs); ok && strings.HasPrefix(fstype, "fuse") && isDead(abs) {
		if err := clearStale(log, abs); err != nil {
			return "", err
		}
	}
	st, err := os.Stat(abs)
	if err != nil {
		return "", fmt.Errorf("mountpoint: %w", err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("mountpoint %s is not a directory", abs)
	}
	if fstype, ok := proc.MountedAt(abs); ok {
		return "", fmt.Errorf("mountpoint %s is already mounted (%s); unmount it first: fusermount3 -u %s", abs, fstype, abs)
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return "", fmt.Errorf("mountpoint: %w", err)
	}
	if len(entries) > 0 {
		what := "1 entry"
		if len(entries) != 1 {
			what = fmt.Sprintf("%d entries", len(entries))
		}
		return "", fmt.Errorf("mountpoint %s is not empty (%s); chromafs mounts only on an empty directory", abs, what)
	}
	return abs, nil
}

// isDead reports whether the FUSE mount at abs has lost its server
// ("transport endpoint is not connected"). The probe is statfs, which the
// kernel always sends to the server: a listing or a stat may be answered
// from the kernel's caches of a dead mount. It gives up after two seconds,
// so a hung server cannot hang the caller.
func isDead(abs string) bool {
	res := make(chan error, 1)
	go func() {
		var st syscall.Statfs_t
		res <- syscall.Statfs(abs, &st)
	}()
	select {
	case err := <-res:
		return errors.Is(err, syscall.ENOTCONN)
	case <-time.After(2 * time.Second):
		return false
	}
}

// clearStale detaches a dead FUSE mount ("Transport endpoint is not
// connected") so the path can be mounted again.
func clearStale(log *slog.Logger, abs string) error {
	if err := syscall.Unmount(abs, syscall.MNT_DETACH); err == nil {
		log.Info(fmt.Sprintf("cleared a stale mount at %s", abs))
		return nil
	}
	for _, bin := range []string{"fusermount3", "fusermount"} {
		if exec.Command(bin, "-u", "-z", abs).Run() == nil {
			log.Info(fmt.Sprintf("cleared a stale mount at %s with %s", abs, bin))
			return nil
		}
	}
	return fmt.Errorf("stale FUSE mount at %s (transport endpoint is not connected; a crashed daemon?): clear it with: fusermount3 -u -z %s", abs, abs)
}
