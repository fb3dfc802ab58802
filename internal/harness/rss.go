package harness

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/chromafs/chromafs/internal/proc"
)

// RSS is the daemon's resident set size in bytes.
func (d *Daemon) RSS() (int64, error) { return proc.RSS(d.Pid) }

// SettledRSS waits until process pid has settled — its RSS stops moving
// and it uses no CPU (a big tree's snapshot is written, and its load
// garbage returned, after the mount answers): two readings 250 ms apart
// within 1% of RSS and 10 ms of CPU, after at least a second, at most
// 30 s. It returns the last reading, -1 once the process is gone.
func SettledRSS(pid int) int64 {
	rss := func() int64 {
		v, err := proc.RSS(pid)
		if err != nil {
			return -1
		}
		return v
	}
	time.Sleep(time.Second) // the least a settled process has been still
	prev, prevCPU := rss(), CPUTime(pid)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
		cur, cpu := rss(), CPUTime(pid)
		if cur < 0 || prev >= 0 && abs(cur-prev) <= prev/100 && cpu-prevCPU <= 10*time.Millisecond {
			return cur
		}
		prev, prevCPU = cur, cpu
	}
	return prev
}

// CPUTime is the CPU time process pid has used (user and system), or 0.
func CPUTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // after the command name
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
