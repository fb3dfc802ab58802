package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/chromafs/chromafs/internal/harness"
)

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
	*harness.Daemon
	dir string
	pid int
}

// mountDaemon mounts collection at dir with the bench's defaults (the
// per-directory prefetch, a cold host cache of its own) unless args say
// otherwise, and returns the daemon and its mount-ready time.
func mountDaemon(c *config, collection, dir string, args ...string) (*daemon, time.Duration, error) {
	all := append([]string{"--chroma-url", c.url, "--collection", collection}, args...)
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
	hd, ready, err := harness.StartDaemon(filepath.Join(c.bin, "chromafs-mount"), all, dir)
	if err != nil {
		return nil, 0, err
	}
	return &daemon{Daemon: hd, dir: hd.Dir, pid: hd.Pid}, ready, nil
}

// unmount unmounts the daemon and waits for its exit; a failure is logged
// (the figure was measured already).
func (d *daemon) unmount() {
	if err := d.Unmount(); err != nil {
		logf("unmount: %v", err)
	}
}

// metric is the daemon's metric name, or -1.
func (d *daemon) metric(name string) int64 {
	v, err := d.Metric(name)
	if err != nil {
		return -1
	}
	return v
}

func (d *daemon) requests() int64 { return d.metric("chromafs_chroma_requests_total") }

// rss is the daemon's resident set size in bytes, or -1.
func (d *daemon) rss() int64 {
	rss, err := d.RSS()
	if err != nil {
		return -1
	}
	return rss
}

// settledRSS is the daemon's RSS once it has settled (harness.SettledRSS).
func (d *daemon) settledRSS() int64 { return harness.SettledRSS(d.pid) }
