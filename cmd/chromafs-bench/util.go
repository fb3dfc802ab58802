package main

import (
	"cmp"
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

// med is the median of xs: the middle one, the upper of the two middle
// ones for an even count (always one of the samples); the zero value for
// none.
func med[T cmp.Ordered](xs []T) T {
	if len(xs) == 0 {
		var zero T
		return zero
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

func median(ds []time.Duration) time.Duration { return med(ds) }

// medianOf is the median of f over xs.
func medianOf[T any](xs []T, f func(T) time.Duration) time.Duration {
	ds := make([]time.Duration, 0, len(xs))
	for _, x := range xs {
		ds = append(ds, f(x))
	}
	return median(ds)
}

// medianOfInt is the median of the counts f gives over xs.
func medianOfInt[T any](xs []T, f func(T) int64) int64 {
	ns := make([]int64, 0, len(xs))
	for _, x := range xs {
		ns = append(ns, f(x))
	}
	return med(ns)
}

// medianIndex is the index of the repetition whose key is the median (as
// med picks it), so that a row can show that repetition's own parts
// beside the median; -1 for none.
func medianIndex[T any](xs []T, key func(T) float64) int {
	if len(xs) == 0 {
		return -1
	}
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return key(xs[idx[a]]) < key(xs[idx[b]]) })
	return idx[len(idx)/2]
}

// countOf shows a count taken in every repetition, with its word
// (plural unless 1): the value when all agree ("1 request in each of 5";
// "14 requests" for one repetition), else their median and range ("14
// requests (median of 5; 13-15)").
func countOf(xs []int64, word string) string {
	if len(xs) == 0 {
		return "no " + word + "s"
	}
	lo, hi, m := slices.Min(xs), slices.Max(xs), med(xs)
	switch {
	case lo != hi:
		return fmt.Sprintf("%d %s (median of %d; %d-%d)", m, plural(m, word), len(xs), lo, hi)
	case len(xs) > 1:
		return fmt.Sprintf("%d %s in each of %d", m, plural(m, word), len(xs))
	}
	return fmt.Sprintf("%d %s", m, plural(m, word))
}

// allAre reports whether every repetition counted want (and there was
// one).
func allAre(xs []int64, want int64) bool {
	return len(xs) > 0 && !slices.ContainsFunc(xs, func(x int64) bool { return x != want })
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

// settledRSS is the daemon's RSS once it has settled (harness.SettledRSS:
// RSS and CPU still), -1 once it is gone. Every RSS figure is read so,
// baselines too.
func (d *daemon) settledRSS() int64 { return harness.SettledRSS(d.pid) }
