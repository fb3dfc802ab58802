// Package proc finds chromafs processes through /proc, for tests and the
// benchmark (the daemon of --daemon is not the caller's child).
package proc

import (
	"fmt"
	"os"
	"path/filepath"
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
