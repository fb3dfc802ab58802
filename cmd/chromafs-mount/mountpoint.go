package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// prepareMountpoint checks that mp is an empty directory that is not
// mounted, clearing a stale FUSE mount left by a crashed daemon. It returns
// the absolute path.
func prepareMountpoint(mp string) (string, error) {
	abs, err := filepath.Abs(mp)
	if err != nil {
		return "", fmt.Errorf("mountpoint %s: %w", mp, err)
	}
	if fstype, ok := mountedAt(abs); ok && strings.HasPrefix(fstype, "fuse") && isDead(abs) {
		if err := clearStale(abs); err != nil {
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
	if fstype, ok := mountedAt(abs); ok {
		return "", fmt.Errorf("mountpoint %s is already mounted (%s); unmount it first: fusermount3 -u %s", abs, fstype, abs)
	}
	entries, err := os.ReadDir(abs)
	if err != nil {
		return "", fmt.Errorf("mountpoint: %w", err)
	}
	if len(entries) > 0 {
		return "", fmt.Errorf("mountpoint %s is not empty (%d entries); chromafs mounts only on an empty directory", abs, len(entries))
	}
	return abs, nil
}

// isDead reports whether the FUSE mount at abs has lost its server
// ("transport endpoint is not connected"). The probe gives up after two
// seconds, so a hung server cannot hang the caller.
func isDead(abs string) bool {
	res := make(chan error, 1)
	go func() {
		_, err := os.ReadDir(abs)
		res <- err
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
func clearStale(abs string) error {
	if err := syscall.Unmount(abs, syscall.MNT_DETACH); err == nil {
		logf("cleared a stale mount at %s", abs)
		return nil
	}
	for _, bin := range []string{"fusermount3", "fusermount"} {
		if exec.Command(bin, "-u", "-z", abs).Run() == nil {
			logf("cleared a stale mount at %s with %s", abs, bin)
			return nil
		}
	}
	return fmt.Errorf("stale FUSE mount at %s (transport endpoint is not connected; a crashed daemon?): clear it with: fusermount3 -u -z %s", abs, abs)
}

// mountedAt reports whether abs is a mount point, and its type.
func mountedAt(abs string) (string, bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || unescapeMount(fields[4]) != abs {
			continue
		}
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) {
				return fields[i+1], true
			}
		}
		return "unknown type", true
	}
	return "", false
}

// unescapeMount undoes the octal escapes (\040 for space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
