// Package proc reads what /proc says about mounts and processes: used by
// chromafs-mount (is the mount point already mounted?), the integration
// tests and the benchmark (the daemon of --daemon is not the caller's child).
package proc

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MountDaemon returns the pid of the chromafs-mount process serving dir.
func MountDaemon(dir string) (int, error) {
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if strings.HasSuffix(args[0], "chromafs-mount") && strings.Contains(string(b), "\x00"+dir+"\x00") {
			var pid int
			if _, err := fmt.Sscanf(p, "/proc/%d/cmdline", &pid); err == nil {
				return pid, nil
			}
		}
	}
	return 0, fmt.Errorf("no chromafs-mount process serves %s", dir)
}

// RSS returns the resident set size of process pid in bytes.
func RSS(pid int) (int64, error) { return statusBytes(pid, "VmRSS:") }

// PeakRSS returns the largest resident set size process pid has had, in
// bytes (VmHWM): what a bound on memory must hold at every moment, not
// only when it is read.
func PeakRSS(pid int) (int64, error) { return statusBytes(pid, "VmHWM:") }

// statusBytes reads a field of /proc/PID/status given in kB.
func statusBytes(pid int, field string) (int64, error) {
	return kBField(fmt.Sprintf("/proc/%d/status", pid), field)
}

// kBField reads a field given in kB from a file of "Field: N kB" lines.
func kBField(file, field string) (int64, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == field {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in %s", strings.TrimSuffix(field, ":"), file)
}

// MountedAt reports whether abs is a mount point, and its file system type.
func MountedAt(abs string) (string, bool) {
	m, ok := MountAt(abs)
	return m.FSType, ok
}

// unescape undoes the octal escapes (\040 for space) of mountinfo.
func unescape(s string) string {
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

// Mount is what /proc/self/mountinfo says of one mount.
type Mount struct {
	Device string // major:minor, unique while the mount exists
	FSType string
	Source string
	// Options are the super block's options (user_id=0,... for FUSE).
	Options string
}

// HasOption reports whether the super block's options hold opt
// ("user_id=0").
func (m Mount) HasOption(opt string) bool {
	for _, o := range strings.Split(m.Options, ",") {
		if o == opt {
			return true
		}
	}
	return false
}

// MountAt returns the mount at abs that processes see (the last one
// stacked there), and whether there is one.
func MountAt(abs string) (Mount, bool) {
	all := MountsAt(abs)
	if len(all) == 0 {
		return Mount{}, false
	}
	return all[len(all)-1].Mount, true
}

// StartTime returns when process pid started, in clock ticks since boot
// (field 22 of /proc/PID/stat): with the pid, it names one process, even
// after the pid is reused.
func StartTime(pid int) (uint64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// the command (field 2) is in parentheses and may hold anything
	rest := string(b)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 20 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	return strconv.ParseUint(f[19], 10, 64) // field 22 of the whole line
}

// maxMountinfoLine is the longest mountinfo line read (its paths are
// escaped, a mount's options may be long). Each read of mountinfo starts
// with a small buffer: a daemon reads it at each attach and mount.
const maxMountinfoLine = 1 << 20

// MountPathOf returns where the mount of id (mountinfo's first field, the
// id statx and fdinfo give) is in this process's mount namespace.
func MountPathOf(id uint64) (string, bool) {
	_, path, ok := MountByID(id)
	return path, ok
}

// MountByID returns the mount of id and where it is in this process's
// mount namespace. It reads /proc/self/mountinfo only: no file system is
// asked anything (a FUSE server that never answers cannot hold it).
func MountByID(id uint64) (m Mount, path string, ok bool) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return Mount{}, "", false
	}
	defer f.Close()
	prefix := []byte(strconv.FormatUint(id, 10) + " ")
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, maxMountinfoLine) // a buffer of 4 KiB, grown for a longer line
	for sc.Scan() {
		if !bytes.HasPrefix(sc.Bytes(), prefix) {
			continue // most lines: not even a string made of them
		}
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			return Mount{}, "", false
		}
		return parseMount(fields), unescape(fields[4]), true
	}
	return Mount{}, "", false
}

// parseMount reads the device, type, source and super options of a
// mountinfo line.
func parseMount(fields []string) Mount {
	m := Mount{Device: fields[2]}
	for i, fld := range fields {
		if fld == "-" && i+2 < len(fields) {
			m.FSType, m.Source = fields[i+1], unescape(fields[i+2])
			if i+3 < len(fields) {
				m.Options = fields[i+3]
			}
			break
		}
	}
	return m
}

// MountNamespace names this process's mount namespace in this boot
// ("BOOT_ID/mnt:[INODE]"), or "" when it cannot be told: mount ids are
// the kernel's numbers in it, meaningless in another one (a daemon's new
// container) or after a reboot.
func MountNamespace() string {
	ns, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return ""
	}
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(boot)) + "/" + ns
}

// Stacked is one of the mounts stacked at a path.
type Stacked struct {
	ID uint64
	Mount
}

// MountsAt returns the mounts stacked at abs in this process's mount
// namespace, the first placed first. It reads /proc/self/mountinfo only.
func MountsAt(abs string) []Stacked {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []Stacked
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, maxMountinfoLine) // a buffer of 4 KiB, grown for a longer line
	for sc.Scan() {
		if !mountPointIs(sc.Bytes(), abs) {
			continue // most lines: not even a string made of them
		}
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || unescape(fields[4]) != abs {
			continue
		}
		id, err := strconv.ParseUint(fields[0], 10, 64)
		if err == nil {
			out = append(out, Stacked{ID: id, Mount: parseMount(fields)})
		}
	}
	return out
}

// mountPointIs reports whether the mount point of a mountinfo line (its
// fifth field) is abs, allocating only for a point that has escapes.
func mountPointIs(line []byte, abs string) bool {
	for range 4 {
		i := bytes.IndexByte(line, ' ')
		if i < 0 {
			return false
		}
		line = line[i+1:]
	}
	if i := bytes.IndexByte(line, ' '); i >= 0 {
		line = line[:i]
	}
	if bytes.IndexByte(line, '\\') >= 0 {
		return unescape(string(line)) == abs
	}
	return string(line) == abs
}

// IsFUSE reports whether a mount's type is a FUSE one (fuse, fuse.NAME,
// fuseblk).
func (m Mount) IsFUSE() bool {
	return m.FSType == "fuse" || m.FSType == "fuseblk" || strings.HasPrefix(m.FSType, "fuse.")
}

// Memory is how much memory the calling process may use: the host's
// (MemTotal) or, when lower, its cgroup's (cgroup v2 memory.max of its
// own cgroup and those above it).
func Memory() (int64, error) {
	total, err := kBField("/proc/meminfo", "MemTotal:")
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return total, nil
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		path, ok := strings.CutPrefix(line, "0::")
		if !ok {
			continue
		}
		for dir := filepath.Join("/sys/fs/cgroup", filepath.Clean("/"+path)); strings.HasPrefix(dir, "/sys/fs/cgroup"); dir = filepath.Dir(dir) {
			if v, err := os.ReadFile(filepath.Join(dir, "memory.max")); err == nil {
				if n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64); err == nil && n < total {
					total = n
				}
			}
			if dir == "/sys/fs/cgroup" {
				break
			}
		}
	}
	return total, nil
}
