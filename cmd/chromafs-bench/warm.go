package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/internal/floorfs"
	"github.com/chromafs/chromafs/internal/harness"
)

// The warm-conversation figures (issue 30): a conversation's first
// `grep -r` over the daemon in the cases a fleet meets, while the daemon's
// memory holds every page the view shows: another attachment of a view
// that is attached (same view), a view no conversation had (new view),
// the view's next conversation after its last one detached (after a
// pause: --linger keeps its mount), and a view served to another uid
// (--owner: an idmapped copy of the view's one mount). Each is the median of --reps cases, each
// case a fresh one, against the local copy's warm grep and the protocol's
// floor: a new mount of internal/floorfs holding the view in memory, with
// chromafs's kernel options, measured the same way in the same run. Beside
// them, the same floor with FUSE passthrough (the local copy as backing
// files: one page cache for every mount, an OPEN per open), and what
// writing the view into new memory costs here (a tmpfs file): the copy
// every new mount's page cache needs, whatever answers its reads.

// warmView is the view measured: [team] (daemonViews[1]). The views that
// make new mounts of it add a group no page has, so they show the very
// pages [team] shows, all in the daemon's memory.
const warmView = 1

// pauseFor is the pause between a view's last detach and its next attach.
const pauseFor = time.Second

// warmRun is the state of the warm figures: the daemon, the view's local
// copy and the local grep's output.
type warmRun struct {
	c       *config
	h       *hostDaemon
	metrics string // the daemon's --metrics address
	coll    string
	local   string
	want    string
	nextID  int
	// undo takes away the floor's mounts and the memory-fill files, all
	// kept until the figures end, so that each case takes new memory for
	// its page cache as a lingering view does, none reusing what another
	// just freed (a VM's host still backs that: faster)
	undo []func()
}

func warmFigures(c *config, r *report, label, coll, dir string, locals []string) error {
	logf("%s: daemon, warm conversations", label)
	w := &warmRun{c: c, coll: coll, local: locals[warmView]}
	defer func() {
		for i := len(w.undo) - 1; i >= 0; i-- {
			w.undo[i]()
		}
	}()
	reps := c.reps
	// the local copy's warm grep (after one that warms it)
	want, _, err := grepIn(w.local)
	if err != nil {
		return err
	}
	w.want = want
	localT, err := medianRuns(reps, func(int) (time.Duration, error) {
		_, took, err := grepIn(w.local)
		return took, err
	})
	if err != nil {
		return err
	}
	ft, err := floorfs.Load(w.local)
	if err != nil {
		return err
	}
	floorT, err := w.floor(ft, reps, filepath.Join(dir, "floor"))
	if err != nil {
		return err
	}
	r.ratio(label, "warm: the protocol's floor: first `grep -rc` of a new mount of an in-memory go-fuse file system (internal/floorfs, chromafs's kernel options) holding the view [team] (median of --reps new mounts, each kept)",
		floorT, "the local copy's warm grep", localT, func(float64, time.Duration) string { return "(none)" })
	for _, push := range []bool{false, true} {
		took, err := w.layer(ft, reps, filepath.Join(dir, "layer"), push)
		if err != nil {
			return err
		}
		how := "pushes off (--push-pages=false)"
		if push {
			how = "pushes on (a listing under a directory being read hands the kernel its files' pages before grep opens them)"
		}
		r.ratio(label, fmt.Sprintf("warm: chromafs's FUSE layer alone (fusefs over the view's pages in memory, internal/floorfs), first `grep -rc` of a new mount, %s; %.2fx the floor (median of --reps new mounts, each kept)", how, took.Seconds()/floorT.Seconds()),
			took, "the local copy's warm grep", localT, func(float64, time.Duration) string { return "(none)" })
	}
	if err := w.passthrough(ft, reps, filepath.Join(dir, "passthrough"), r, label, localT); err != nil {
		return err
	}

	h, err := newHostDaemon(c, filepath.Join(dir, "host-warm"), c.url)
	if err != nil {
		return err
	}
	port, err := harness.FreePort()
	if err != nil {
		return err
	}
	w.metrics = fmt.Sprintf("127.0.0.1:%d", port)
	h.args = append(h.args, "--metrics", w.metrics)
	defer h.cleanup()
	if _, err := h.start(true); err != nil {
		return err
	}
	w.h = h
	// every view's pages into the daemon's memory; [team] stays attached
	for v := range daemonViews {
		p, err := w.attach(daemonViews[v].groups)
		if err != nil {
			return err
		}
		if _, _, err := grepIn(p); err != nil {
			return err
		}
	}
	h.settle()

	cases := []struct {
		name, figure string
		run          func(i int) (string, error) // makes case i's attachment; returns its path
		target       func(local, floor float64) string
	}{
		{"same view", "another attachment of a view that is attached (its mount, warm)", w.sameView,
			func(local, _ float64) string { return pass(local <= 1.1, "≤ 1.1x") }},
		{"new view", "a view no conversation had, its pages all in the daemon's memory (a new mount)", w.newView,
			func(local, floor float64) string {
				return pass(local <= 3 && floor <= 1.3, "≤ 3x local, ≤ 1.3x the floor")
			}},
		{"after a pause", fmt.Sprintf("the view's next conversation, %s after its last one detached (--linger keeps the mount)", pauseFor), w.afterPause,
			func(local, _ float64) string { return pass(local <= 1.1, "≤ 1.1x") }},
		{"per uid", "the view, attached, served to another uid (--owner: an idmapped copy of the view's one mount)", w.perUID,
			func(local, _ float64) string { return pass(local <= 1.1, "≤ 1.1x, as the same view") }},
	}
	// best effort: a small /dev/shm (a container's 64 MiB) costs the row only
	fillBefore, fillErr := w.memoryFill(ft.Bytes(), reps)
	for _, k := range cases {
		var cached, reads []int64
		took, err := medianRuns(reps, func(i int) (time.Duration, error) {
			p, err := k.run(i)
			if err != nil {
				return 0, err
			}
			readsBefore, err := w.reads()
			if err != nil {
				return 0, err
			}
			before := pageCache()
			got, took, err := grepIn(p)
			if err != nil {
				return 0, err
			}
			cachedNow := pageCache()
			readsNow, err := w.reads()
			if err != nil {
				return 0, err
			}
			cached, reads = append(cached, cachedNow-before), append(reads, readsNow-readsBefore)
			// every case starts from the same daemon: its attachment goes
			// (a new view's mount lingers, as it would for a fleet)
			if err := w.h.detach(p); err != nil {
				return 0, err
			}
			if got != w.want {
				return 0, fmt.Errorf("%s: the grep's output differs from the local copy's: %s", k.name, firstDifference(got, w.want))
			}
			return took, nil
		})
		if err != nil {
			return err
		}
		local, floor := took.Seconds()/localT.Seconds(), took.Seconds()/floorT.Seconds()
		r.ratio(label, fmt.Sprintf("warm, %s: first `grep -rc` of %s; %.2fx the floor (median of --reps)", k.name, k.figure, floor),
			took, "the local copy's warm grep", localT, func(float64, time.Duration) string { return k.target(local, floor) })
		r.value(label, fmt.Sprintf("warm, %s: page cache the grep added, reads that reached the daemon (medians of --reps; /proc/meminfo Cached, chromafs list)", k.name),
			fmt.Sprintf("%s, %d reads", mib(med(cached)), med(reads)), "(none)")
	}
	fillAfter, err := time.Duration(0), fillErr
	if err == nil {
		fillAfter, err = w.memoryFill(ft.Bytes(), reps)
	}
	if err != nil {
		r.note("%s: no new-memory figure: %v", label, err)
	} else {
		r.value(label, fmt.Sprintf("warm: new memory: writing the view's %s into tmpfs files, each kept (the copy into new page cache that a new mount's first grep pays, however few requests answer its reads), before the cases and after them (medians of --reps)", mib(ft.Bytes())),
			fmt.Sprintf("%s, %s", dur(fillBefore), dur(fillAfter)), "(none)")
	}
	return w.profileNewView(reps, r, label)
}

// profileNewView takes a CPU profile of the daemon during one more new
// view's first grep, writes it beside the bench's report (--out's
// directory, else the work directory) and logs its top functions.
func (w *warmRun) profileNewView(i int, r *report, label string) error {
	p, err := w.newView(i)
	if err != nil {
		return err
	}
	seconds := 3
	type result struct {
		body []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", w.metrics, seconds))
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		done <- result{b, err}
	}()
	// no state says the profile has started: it runs for seconds from
	// its request, and the grep starts a moment after it is sent
	time.Sleep(100 * time.Millisecond)
	_, took, err := grepIn(p)
	if err != nil {
		return err
	}
	res := <-done
	if res.err != nil {
		return fmt.Errorf("the daemon's profile: %w", res.err)
	}
	dir := w.c.work
	if w.c.out != "" {
		dir = filepath.Dir(w.c.out)
	}
	file := filepath.Join(dir, fmt.Sprintf("warm-new-view-%s.pprof", strings.ReplaceAll(label, " ", "-")))
	if err := os.WriteFile(file, res.body, 0o644); err != nil {
		return err
	}
	top, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount", "30", file).CombinedOutput()
	if err != nil { // the profile is written; only its summary is missing
		top = []byte(fmt.Sprintf("(go tool pprof: %v: %s)", err, top))
	}
	logf("%s: the daemon's CPU profile during a new view's first grep (%s; %s):\n%s", label, dur(took), file, top)
	r.note("%s: a CPU profile of the daemon during a new view's first grep -r (%s) is %s (`go tool pprof -top %s`)", label, dur(took), filepath.Base(file), filepath.Base(file))
	return nil
}

// reads is how many reads reached the daemon, every view together
// (chromafs list).
func (w *warmRun) reads() (int64, error) {
	out, err := exec.Command(filepath.Join(w.c.bin, "chromafs"), "--socket", w.h.socket, "list", "--json").Output()
	if err != nil {
		return 0, fmt.Errorf("chromafs list: %w", err)
	}
	var st api.Status
	if err := json.Unmarshal(out, &st); err != nil {
		return 0, fmt.Errorf("chromafs list --json: %w", err)
	}
	var n int64
	for _, v := range st.Views {
		n += v.Reads
	}
	return n, nil
}

// floor mounts the view's local copy as internal/floorfs reps times, a new
// mount each, and returns the median time of its first grep. Each mount
// stays until the figures end, as a lingering view's does (w.undo).
func (w *warmRun) floor(t *floorfs.Tree, reps int, dir string) (time.Duration, error) {
	return w.firstGreps(reps, dir, "the floor", func(mnt string) (func(), error) {
		s, err := t.Mount(mnt)
		if err != nil {
			return nil, err
		}
		return func() { _ = s.Unmount() }, nil
	})
}

// layer mounts the view's local copy through chromafs's own FUSE layer
// alone (floorfs.MountChromafs: fusefs over the pages in memory), pushes
// on or off, as floor does, and returns the median time of the first grep.
func (w *warmRun) layer(t *floorfs.Tree, reps int, dir string, push bool) (time.Duration, error) {
	return w.firstGreps(reps, filepath.Join(dir, fmt.Sprint(push)), "chromafs's FUSE layer", func(mnt string) (func(), error) {
		s, f, err := t.MountChromafs(mnt, push)
		if err != nil {
			return nil, err
		}
		return func() { _ = s.Unmount(); f.Close() }, nil
	})
}

// firstGreps makes reps new mounts with mount, kept until the figures
// end, and returns the median time of their first grep.
func (w *warmRun) firstGreps(reps int, dir, what string, mount func(mnt string) (func(), error)) (time.Duration, error) {
	var took []time.Duration
	err := w.newMounts(reps, dir, mount, func(mnt string) error {
		d, err := w.grepSame(mnt, what)
		took = append(took, d)
		return err
	})
	return median(took), err
}

// newMounts runs each of reps new mounts (mount returns how to take it
// away) through use; they are taken away when the figures end (w.undo).
func (w *warmRun) newMounts(reps int, dir string, mount func(mnt string) (func(), error), use func(mnt string) error) error {
	for i := range reps {
		mnt := filepath.Join(dir, strconv.Itoa(i))
		if err := os.MkdirAll(mnt, 0o755); err != nil {
			return err
		}
		u, err := mount(mnt)
		if err != nil {
			return fmt.Errorf("mount %s: %w", mnt, err)
		}
		w.undo = append(w.undo, u)
		if err := use(mnt); err != nil {
			return err
		}
	}
	return nil
}

// memoryFill writes n bytes into a new tmpfs file (/dev/shm) reps times,
// each kept until the figures end, and returns the median time: what
// copying a view into new page cache costs on this machine (on a VM whose
// host takes back free memory, mostly the host's first touch of each
// page), the part of a new mount's first grep that answering reads in
// fewer requests does not save.
func (w *warmRun) memoryFill(n int64, reps int) (time.Duration, error) {
	dir, err := os.MkdirTemp("/dev/shm", "chromafs-bench-fill-")
	if err != nil {
		return 0, fmt.Errorf("memory fill (a tmpfs at /dev/shm): %w", err)
	}
	w.undo = append(w.undo, func() { _ = os.RemoveAll(dir) })
	buf := bytes.Repeat([]byte("chromafs "), (1<<20)/9+1)[:1<<20]
	return medianRuns(reps, func(i int) (time.Duration, error) {
		f, err := os.Create(filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			return 0, fmt.Errorf("memory fill: %w", err)
		}
		defer f.Close()
		start := time.Now()
		for left := n; left > 0; left -= int64(len(buf)) {
			if _, err := f.Write(buf[:min(left, int64(len(buf)))]); err != nil {
				return 0, fmt.Errorf("memory fill: %w", err)
			}
		}
		return time.Since(start), nil
	})
}

// grepSame greps dir and fails when its output is not the local copy's.
func (w *warmRun) grepSame(dir, what string) (time.Duration, error) {
	got, took, err := grepIn(dir)
	if err == nil && got != w.want {
		err = fmt.Errorf("%s: the grep's output differs from the local copy's: %s", what, firstDifference(got, w.want))
	}
	return took, err
}

// passthrough measures the floor with FUSE passthrough (floorfs's
// MountPassthrough, the view's local copy as the backing files): a new
// mount's first grep, its second (the mount warm), and the page cache the
// first added, each the median of reps mounts. It reports nothing but a
// note where the kernel or the privileges refuse passthrough.
func (w *warmRun) passthrough(t *floorfs.Tree, reps int, dir string, r *report, label string, localT time.Duration) error {
	var first, second []time.Duration
	var cached []int64
	reads := t.Reads()
	err := w.newMounts(reps, dir, func(mnt string) (func(), error) {
		s, err := t.MountPassthrough(mnt)
		if err != nil {
			return nil, err
		}
		return func() { _ = s.Unmount() }, nil
	}, func(mnt string) error {
		before := pageCache()
		d1, err := w.grepSame(mnt, "passthrough")
		if err != nil {
			return err
		}
		cached = append(cached, pageCache()-before)
		d2, err := w.grepSame(mnt, "passthrough, warm")
		first, second = append(first, d1), append(second, d2)
		return err
	})
	if err != nil {
		return err
	}
	if n := t.Reads() - reads; n > 0 {
		r.note("%s: FUSE passthrough is not in use here (%d reads reached the floor's passthrough mounts: Linux 6.9+ and root needed); no figure", label, n)
		return nil
	}
	none := func(float64, time.Duration) string { return "(none)" }
	r.ratio(label, "warm: the floor with FUSE passthrough (internal/floorfs, the local copy as backing files, an OPEN per open): first `grep -rc` of a new mount (median of --reps)",
		median(first), "the local copy's warm grep", localT, none)
	r.ratio(label, "warm: the floor with FUSE passthrough: a second `grep -rc` of the same mount (its caches warm; compare *same view*)",
		median(second), "the local copy's warm grep", localT, none)
	r.value(label, "warm: the floor with FUSE passthrough: page cache the first grep added (median; /proc/meminfo Cached)", mib(med(cached)), "(none)")
	return nil
}

// attach makes a new attachment of the view with groups (and extra client
// flags) and returns its path.
func (w *warmRun) attach(groups []string, extra ...string) (string, error) {
	w.nextID++
	p := filepath.Join(w.h.dir, "conv", fmt.Sprintf("warm-%d", w.nextID))
	args := []string{"--socket", w.h.socket, "attach", "--collection", w.coll}
	if len(groups) > 0 {
		args = append(args, "--groups", strings.Join(groups, ","))
	}
	args = append(append(args, extra...), p)
	if out, err := exec.Command(filepath.Join(w.c.bin, "chromafs"), args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("chromafs attach %s: %w: %s", p, err, bytes.TrimSpace(out))
	}
	return p, nil
}

func (w *warmRun) sameView(int) (string, error) { return w.attach(daemonViews[warmView].groups) }

func (w *warmRun) newView(i int) (string, error) {
	return w.attach(append(slices.Clone(daemonViews[warmView].groups), fmt.Sprintf("new%d", i)))
}

// afterPause runs a conversation of a view of its own (its grep warms the
// mount), detaches it, waits pauseFor and attaches the view again.
func (w *warmRun) afterPause(i int) (string, error) {
	groups := append(slices.Clone(daemonViews[warmView].groups), fmt.Sprintf("pause%d", i))
	p, err := w.attach(groups)
	if err != nil {
		return "", err
	}
	if _, _, err := grepIn(p); err != nil {
		return "", err
	}
	if err := w.h.detach(p); err != nil {
		return "", err
	}
	time.Sleep(pauseFor) // the pause measured, not a wait for a state
	return w.attach(groups)
}

func (w *warmRun) perUID(i int) (string, error) {
	id := strconv.Itoa(61000 + i)
	return w.attach(daemonViews[warmView].groups, "--owner", id+":"+id)
}

// grepIn runs `grep -rc chromafs .` in dir and returns its output, lines
// sorted (a listing's order is the file system's), and its wall time.
func grepIn(dir string) (string, time.Duration, error) {
	cmd := exec.Command("grep", "-rc", "chromafs", ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	start := time.Now()
	out, err := cmd.Output()
	took := time.Since(start)
	if err != nil {
		return "", took, fmt.Errorf("grep -rc in %s: %w", dir, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n"), took, nil
}

// medianRuns runs case i for i < reps and returns the median time.
func medianRuns(reps int, run func(i int) (time.Duration, error)) (time.Duration, error) {
	var ds []time.Duration
	for i := range reps {
		d, err := run(i)
		if err != nil {
			return 0, err
		}
		ds = append(ds, d)
	}
	return median(ds), nil
}

// pageCache is the host's page cache in bytes (/proc/meminfo Cached).
func pageCache() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "Cached:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
