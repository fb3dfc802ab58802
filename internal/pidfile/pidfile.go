// Package pidfile lets a signal reach the one process that serves a
// mount, named by its mount point, never by a pattern that may match
// other processes (pkill -f).
//
// A serving chromafs-mount keeps two things:
//
//   - a pid file, when asked (--pid-file FILE): the pid and a newline, as
//     systemd's PIDFile= and "kill $(cat FILE)" expect, written atomically
//     once the mount answers and removed at exit if it still holds this
//     process's pid;
//   - a record per mount point in a runtime directory (/run/chromafs/mounts
//     for root, $XDG_RUNTIME_DIR/chromafs/mounts otherwise): the pid, the
//     process's start time, the mount's device number and the mount point.
//
// Find reads the record of a mount point and believes it only while it
// still describes the world: the mount point is mounted with the device
// the record names (the mount is the one that process made, not a later
// one at the same path), and the process with that pid started when the
// record says (the pid was not reused). So chromafs-mount --reload
// MOUNTPOINT signals that mount's process or nothing.
package pidfile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/chromafs/chromafs/internal/proc"
)

// Write writes pid to path atomically (a temporary file renamed over it),
// mode 0644.
func Write(path string, pid int) error {
	return writeAtomic(path, []byte(strconv.Itoa(pid)+"\n"), 0o644)
}

// Remove removes the pid file at path if it still holds pid (another
// process may have taken the path since).
func Remove(path string, pid int) {
	b, err := os.ReadFile(path)
	if err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(pid) {
		_ = os.Remove(path)
	}
}

func writeAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// RuntimeDir is where mount records live: /run/chromafs for root,
// $XDG_RUNTIME_DIR/chromafs otherwise, else fallback/run (fallback is
// the cache directory; "" when there is none either).
func RuntimeDir(fallback string) string {
	if os.Geteuid() == 0 {
		return "/run/chromafs"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return filepath.Join(d, "chromafs")
	}
	if fallback != "" {
		return filepath.Join(fallback, "run")
	}
	return ""
}

// Record says which process serves the mount at Mountpoint.
type Record struct {
	PID        int    `json:"pid"`
	Start      uint64 `json:"start"`  // /proc/PID/stat start time
	Device     string `json:"device"` // the mount's major:minor
	Mountpoint string `json:"mountpoint"`
}

// Errors of Find.
var (
	ErrNotMounted = errors.New("not a chromafs mount")
	ErrNoRecord   = errors.New("no record of the process serving it")
	ErrStale      = errors.New("the process that served it is gone")
)

// recordPath names the record of mountpoint in dir: a digest, since a
// path may not fit in a file name.
func recordPath(dir, mountpoint string) string {
	sum := sha256.Sum256([]byte(mountpoint))
	return filepath.Join(dir, "mounts", hex.EncodeToString(sum[:12])+".json")
}

// Register records that this process serves the mount at mountpoint (an
// absolute path, mounted now), and returns a function that removes the
// record if it is still this process's.
func Register(dir, mountpoint string) (unregister func(), err error) {
	if dir == "" {
		return func() {}, errors.New("no runtime directory (set XDG_RUNTIME_DIR)")
	}
	m, ok := proc.MountAt(mountpoint)
	if !ok {
		return func() {}, fmt.Errorf("%s: %w", mountpoint, ErrNotMounted)
	}
	pid := os.Getpid()
	start, err := proc.StartTime(pid)
	if err != nil {
		return func() {}, err
	}
	r := Record{PID: pid, Start: start, Device: m.Device, Mountpoint: mountpoint}
	if err := os.MkdirAll(filepath.Join(dir, "mounts"), 0o700); err != nil {
		return func() {}, err
	}
	data, _ := json.Marshal(r)
	p := recordPath(dir, mountpoint)
	if err := writeAtomic(p, append(data, '\n'), 0o600); err != nil {
		return func() {}, err
	}
	return func() {
		if got, err := read(p); err == nil && got == r {
			_ = os.Remove(p)
		}
	}, nil
}

func read(p string) (Record, error) {
	var r Record
	b, err := os.ReadFile(p)
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return r, fmt.Errorf("%s: %w", p, err)
	}
	return r, nil
}

// Find returns the record of the process serving the chromafs mount at
// mountpoint (absolute), checked against the mount table and the process
// table.
func Find(dir, mountpoint string) (Record, error) {
	m, ok := proc.MountAt(mountpoint)
	if !ok || m.FSType != "fuse.chromafs" {
		return Record{}, fmt.Errorf("%s: %w", mountpoint, ErrNotMounted)
	}
	if dir == "" {
		return Record{}, fmt.Errorf("%s: %w (no runtime directory: set XDG_RUNTIME_DIR)", mountpoint, ErrNoRecord)
	}
	r, err := read(recordPath(dir, mountpoint))
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, fmt.Errorf("%s: %w in %s", mountpoint, ErrNoRecord, dir)
	}
	if err != nil {
		return Record{}, err
	}
	if r.Mountpoint != mountpoint {
		return Record{}, fmt.Errorf("%s: %w (the record is of %s)", mountpoint, ErrStale, r.Mountpoint)
	}
	return r, checkRecord(r, m.Device)
}

// checkRecord checks that r is of the mount whose device is dev, and that
// its process still runs.
func checkRecord(r Record, dev string) error {
	if r.Device != dev {
		return fmt.Errorf("%s: %w (the record is of an earlier mount there)", r.Mountpoint, ErrStale)
	}
	if start, err := proc.StartTime(r.PID); err != nil || start != r.Start {
		return fmt.Errorf("%s: %w (pid %d)", r.Mountpoint, ErrStale, r.PID)
	}
	return nil
}
