package main

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/chromafs/chromafs/internal/proc"
)

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// medianOf is the median of f over xs.
func medianOf[T any](xs []T, f func(T) time.Duration) time.Duration {
	ds := make([]time.Duration, 0, len(xs))
	for _, x := range xs {
		ds = append(ds, f(x))
	}
	return median(ds)
}

// timeN runs fn reps times and returns the median duration.
func timeN(reps int, fn func() error) (time.Duration, error) {
	var ds []time.Duration
	for i := 0; i < reps; i++ {
		start := time.Now()
		if err := fn(); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(start))
	}
	return median(ds), nil
}

// shell runs a bash command in dir, discarding output.
func shell(dir, script string) error {
	cmd := exec.Command("bash", "-o", "pipefail", "-c", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s in %s: %v: %.300s", script, dir, err, out)
	}
	return nil
}

// daemon is one chromafs-mount --daemon.
type daemon struct {
	dir     string
	pid     int
	metrics string
}

func mountDaemon(c *config, collection, dir string, args ...string) (*daemon, time.Duration, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, 0, err
	}
	port, err := freePort()
	if err != nil {
		return nil, 0, err
	}
	all := append([]string{"--daemon", "--chroma-url", c.url, "--collection", collection,
		"--metrics-addr", fmt.Sprintf("127.0.0.1:%d", port)}, args...)
	if !slices.Contains(args, "--prefetch") { // the figures of the per-directory machinery; sessions say auto
		all = append(all, "--prefetch", "dir")
	}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--cache-dir") }) {
		cacheDir, err := os.MkdirTemp(c.work, "hostcache-") // a cold host unless the case says otherwise
		if err != nil {
			return nil, 0, err
		}
		all = append(all, "--cache-dir", cacheDir)
	}
	start := time.Now()
	out, err := exec.Command(filepath.Join(c.bin, "chromafs-mount"), append(all, dir)...).CombinedOutput()
	if err != nil {
		return nil, 0, fmt.Errorf("chromafs-mount: %v: %s", err, out)
	}
	if err := exec.Command("ls", dir).Run(); err != nil {
		return nil, 0, fmt.Errorf("ls of the new mount: %w", err)
	}
	ready := time.Since(start)
	d := &daemon{dir: dir, metrics: fmt.Sprintf("http://127.0.0.1:%d/metrics", port)}
	d.pid, err = proc.MountDaemon(dir)
	return d, ready, err
}

func (d *daemon) unmount() {
	_ = exec.Command("fusermount3", "-u", d.dir).Run()
	for i := 0; i < 500; i++ {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", d.pid)); err != nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (d *daemon) metric(name string) int64 {
	resp, err := http.Get(d.metrics)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && f[0] == name {
			v, _ := strconv.ParseFloat(f[1], 64)
			return int64(v)
		}
	}
	return -1
}

func (d *daemon) requests() int64 { return d.metric("chromafs_chroma_requests_total") }

// rss is the daemon's resident set size in bytes, or -1.
func (d *daemon) rss() int64 {
	rss, err := proc.RSS(d.pid)
	if err != nil {
		return -1
	}
	return rss
}

// settledRSS waits until the daemon has settled — its RSS stops moving
// and it uses no CPU (a big tree's snapshot is written, and its load
// garbage returned, after the mount answers): two readings 250 ms apart
// within 1% of RSS and 10 ms of CPU, after at least a second, at most 30 s.
func (d *daemon) settledRSS() int64 {
	time.Sleep(time.Second)
	prev, prevCPU := d.rss(), cpuTime(d.pid)
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		time.Sleep(250 * time.Millisecond)
		cur, cpu := d.rss(), cpuTime(d.pid)
		if cur < 0 || prev >= 0 && abs(cur-prev) <= prev/100 && cpu-prevCPU <= 10*time.Millisecond {
			return cur
		}
		prev, prevCPU = cur, cpu
	}
	return prev
}

// cpuTime is the CPU time process pid has used (user and system), or 0.
func cpuTime(pid int) time.Duration {
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
