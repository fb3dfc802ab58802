package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/harness"
)

// The daemon figures (issue 22): chromafsd serving the views of one
// collection to conversations through the chromafs client, behind the
// quota proxy, as a host runs it: attach times, the footprint of many
// attachments, many conversations at once in bubblewrap sandboxes, and a
// restart under hundreds of attachments.

// daemonView is one of the four views measured: public pages only, and
// three sets of groups. The corpus marks every 5th page [team]
// (corpus.Spec.Private); makeGroupCorpus marks others [billing] and
// [admin] in their frontmatter.
type daemonView struct {
	name   string
	groups []string
}

var daemonViews = []daemonView{{"public", nil}, {"team", []string{"team"}}, {"billing", []string{"billing"}}, {"admin+billing", []string{"admin", "billing"}}}

// daemonScale is how much of each figure a run measures.
type daemonScale struct {
	timed    int // attaches of existing views timed
	shared   int // shared attachments for the footprint
	private  int // private ones
	convs    int // conversations at once
	restart  int // attachments restarted under
	nextReps int // repetitions of the next conversations
	// think is the agent's think time between commands of the conversations
	// at once (not counted as waiting); the next conversations think a third
	// of it (they read a warm view)
	think time.Duration
}

func daemonScaleFor(c *config) daemonScale {
	if c.smoke { // the CI's smoke run: short
		return daemonScale{timed: 20, shared: 50, private: 4, convs: 5, restart: 20, nextReps: 1, think: 20 * time.Millisecond}
	}
	return daemonScale{timed: 200, shared: 1000, private: 50, convs: 50, restart: 200, nextReps: min(c.reps, 3), think: 300 * time.Millisecond}
}

// daemonMissing says why the daemon figures cannot run here, or "".
func daemonMissing() string {
	if os.Geteuid() != 0 {
		return "not root (a daemon's shared attachments are root's)"
	}
	if _, err := os.Stat("/dev/fuse"); err != nil {
		return "no /dev/fuse"
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		return "no bwrap (Debian's bubblewrap)"
	}
	return ""
}

// benchDaemon measures the daemon figures at every --files size (--only
// warm: the warm-conversation figures alone); where they cannot run it
// says so in the report (and fails under CI=true).
func benchDaemon(c *config, r *report) error {
	if why := daemonMissing(); why != "" {
		if os.Getenv("CI") == "true" {
			return fmt.Errorf("CI=true: the daemon figures cannot run: %s", why)
		}
		logf("SKIPPED: the daemon figures: %s", why)
		r.note("The daemon figures were SKIPPED: %s.", why)
		return nil
	}
	if err := harness.Build(c.root, c.bin, false, "./cmd/chromafsd", "./cmd/chromafs"); err != nil {
		return err
	}
	for _, n := range c.files {
		if err := benchDaemonSize(c, r, n); err != nil {
			return err
		}
	}
	return nil
}

func benchDaemonSize(c *config, r *report, n int) error {
	sc := daemonScaleFor(c)
	dir := filepath.Join(c.work, fmt.Sprintf("daemon-%d", n))
	src := filepath.Join(dir, "src")
	logf("daemon: generating %d files with groups", n)
	files, corpusBytes, err := makeGroupCorpus(src, n)
	if err != nil {
		return err
	}
	coll := fmt.Sprintf("bench-daemon-%d-%d", n, time.Now().Unix())
	took, err := ingest(c, coll, src)
	if err != nil {
		return err
	}
	label := fmt.Sprintf("%d files", files)
	locals := make([]string, len(daemonViews))
	var sizes []string
	for i, v := range daemonViews {
		locals[i] = filepath.Join(dir, "local-"+v.name)
		nv, err := visibleCopy(src, locals[i], v.groups)
		if err != nil {
			return err
		}
		sizes = append(sizes, fmt.Sprintf("%s %d", v.name, nv))
	}
	r.note("daemon, %s: %.1f MiB, ingested in %s; files per view: %s", label, float64(corpusBytes)/(1<<20), took.Round(time.Millisecond), strings.Join(sizes, ", "))
	// the daemon's own proxy, to count what it asks: in front of the
	// server itself, with --rtt's network (one proxy: a daemon's new
	// connections pay their handshakes)
	q, err := harness.StartCloudProxy(c.rawURL, c.network)
	if err != nil {
		return err
	}
	defer q.Close()
	if c.wants("daemon") {
		if err := daemonAttachFigures(c, r, sc, q, label, coll, dir, locals); err != nil {
			return err
		}
		if err := daemonConversations(c, r, sc, q, label, coll, dir, locals, corpusBytes); err != nil {
			return err
		}
	}
	return warmFigures(c, r, label, coll, dir, locals)
}

// makeGroupCorpus writes a docs-like corpus of n pages (and the big pages
// of the other figures) whose pages belong to groups: every 5th to
// [team] (corpus.Spec.Private), and of the public ones every 7th to
// [billing] and every 11th to [admin], in their frontmatter. It returns
// the files and bytes written.
func makeGroupCorpus(src string, n int) (int, int64, error) {
	if err := os.MkdirAll(src, 0o755); err != nil {
		return 0, 0, err
	}
	st, err := corpus.Generate(src, corpus.Spec{Files: n, PerDir: 10, MaxDepth: 5, Seed: uint64(n) + 22, Private: 5, Large: largeSizes(n)})
	if err != nil {
		return 0, 0, err
	}
	pages, err := harness.Pages(src)
	if err != nil {
		return 0, 0, err
	}
	for j, rel := range pages {
		group := ""
		switch {
		case j%7 == 3:
			group = "billing"
		case j%11 == 6:
			group = "admin"
		default:
			continue
		}
		p := filepath.Join(src, rel)
		b, err := os.ReadFile(p)
		if err != nil {
			return 0, 0, err
		}
		end := bytes.Index(b, []byte("\n---\n"))
		if !bytes.HasPrefix(b, []byte("---\ntitle: Page ")) || end < 0 {
			continue // a page of [team] already
		}
		marked := append(append(append([]byte(nil), b[:end+1]...), "public: false\ngroups: ["+group+"]\n"...), b[end+1:]...)
		if err := os.WriteFile(p, marked, 0o644); err != nil {
			return 0, 0, err
		}
	}
	var total int64
	err = filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			info, ierr := e.Info()
			if ierr != nil {
				return ierr
			}
			total += info.Size()
		}
		return err
	})
	return st.Files, total, err
}

// visibleTo reports whether a page of makeGroupCorpus is visible to groups:
// public, or one of its frontmatter groups is among them.
func visibleTo(head []byte, groups []string) bool {
	end := bytes.Index(head, []byte("\n---\n"))
	if !bytes.HasPrefix(head, []byte("---\n")) || end < 0 || !bytes.Contains(head[:end], []byte("\npublic: false\n")) {
		return true
	}
	_, list, ok := bytes.Cut(head[:end], []byte("\ngroups: ["))
	if !ok {
		return false
	}
	list, _, _ = bytes.Cut(list, []byte("]"))
	for _, g := range strings.Split(string(list), ",") {
		for _, want := range groups {
			if strings.TrimSpace(g) == want {
				return true
			}
		}
	}
	return false
}

// visibleCopy makes dst the local copy of the view of groups: the files of
// src they may see (hard links), and the directories holding them. It
// returns how many files it holds.
func visibleCopy(src, dst string, groups []string) (int, error) {
	n := 0
	err := filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil || !e.Type().IsRegular() {
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		head := make([]byte, 512)
		k, _ := io.ReadFull(f, head)
		f.Close()
		if !visibleTo(head[:k], groups) {
			return nil
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		n++
		return os.Link(p, out)
	})
	if err != nil {
		return 0, fmt.Errorf("local copy of the view: %w", err)
	}
	return n, nil
}

// hostDaemon is a chromafsd run by the bench as root, with a socket, state,
// cache and log of its own under dir.
type hostDaemon struct {
	c      *config
	dir    string
	socket string
	args   []string
	cmd    *exec.Cmd
	done   chan struct{}
}

func newHostDaemon(c *config, dir, url string) (*hostDaemon, error) {
	if err := os.MkdirAll(filepath.Join(dir, "conv"), 0o755); err != nil {
		return nil, err
	}
	h := &hostDaemon{c: c, dir: dir, socket: filepath.Join(dir, "chromafsd.sock")}
	h.args = []string{"--chroma-url", url, "--socket", h.socket, "--state-dir", filepath.Join(dir, "state"),
		"--cache-dir", filepath.Join(dir, "cache"), "--log-file", filepath.Join(dir, "chromafsd.log"), "--refresh", "0"}
	return h, nil
}

// start runs the daemon and returns when it was started; ready waits until
// its socket answers.
func (h *hostDaemon) start(ready bool) (time.Time, error) {
	cmd := exec.Command(filepath.Join(h.c.bin, "chromafsd"), h.args...)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return start, fmt.Errorf("start chromafsd: %w", err)
	}
	h.cmd, h.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); close(h.done) }()
	if !ready {
		return start, nil
	}
	err := harness.Poll(30*time.Second, 5*time.Millisecond, func() bool {
		return exec.Command(filepath.Join(h.c.bin, "chromafs"), "--socket", h.socket, "list").Run() == nil
	})
	if err != nil {
		b, _ := os.ReadFile(filepath.Join(h.dir, "chromafsd.log"))
		return start, fmt.Errorf("chromafsd does not answer: %w\n%s", err, lastLines(b, 20))
	}
	return start, nil
}

// kill SIGKILLs the daemon (its pid) and waits for its exit.
func (h *hostDaemon) kill() {
	if h.cmd == nil {
		return
	}
	_ = h.cmd.Process.Kill()
	<-h.done
	h.cmd = nil
}

// cleanup kills the daemon and takes away every mount it left under dir.
func (h *hostDaemon) cleanup() {
	h.kill()
	for range 4 {
		for _, mp := range mountsUnder(h.dir) {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	}
}

// attach runs `chromafs attach` and returns its wall time, the client's
// exec included.
func (h *hostDaemon) attach(coll string, v daemonView, private bool, path string) (time.Duration, error) {
	args := []string{"--socket", h.socket, "attach", "--collection", coll}
	if len(v.groups) > 0 {
		args = append(args, "--groups", strings.Join(v.groups, ","))
	}
	if private {
		args = append(args, "--private")
	}
	cmd := exec.Command(filepath.Join(h.c.bin, "chromafs"), append(args, path)...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	took := time.Since(start)
	if err != nil {
		return took, fmt.Errorf("chromafs attach %s: %w: %s", path, err, bytes.TrimSpace(out))
	}
	return took, nil
}

func (h *hostDaemon) detach(path string) error {
	if out, err := exec.Command(filepath.Join(h.c.bin, "chromafs"), "--socket", h.socket, "detach", path).CombinedOutput(); err != nil {
		return fmt.Errorf("chromafs detach %s: %w: %s", path, err, bytes.TrimSpace(out))
	}
	return nil
}

// settle waits until the daemon uses no CPU and its RSS stops moving
// (harness.SettledRSS).
func (h *hostDaemon) settle() { harness.SettledRSS(h.cmd.Process.Pid) }

// footprint is the daemon's settled RSS, its threads and descriptors.
type footprint struct {
	rss          int64
	threads, fds int
}

func (h *hostDaemon) footprint() footprint {
	pid := h.cmd.Process.Pid
	f := footprint{rss: harness.SettledRSS(pid)}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Threads:"); ok {
				fmt.Sscan(strings.TrimSpace(v), &f.threads)
			}
		}
	}
	if ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid)); err == nil {
		f.fds = len(ents)
	}
	return f
}

// mountsUnder lists mount points at or below dir, the last mounted first.
func mountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// answers reports whether the mount at p has a server: statfs always
// reaches it (a dead mount's listings may come from the kernel's caches).
func answers(p string) bool {
	var st syscall.Statfs_t
	return syscall.Statfs(p, &st) == nil
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	k := int(float64(len(s))*p+0.999999) - 1
	return s[min(max(k, 0), len(s)-1)]
}

func atMost(limit time.Duration) target {
	return func(_ float64, v time.Duration) string { return pass(v <= limit, "≤ "+dur(limit)) }
}

// attachRun is the state shared by the steps of daemonAttachFigures: one
// daemon behind the quota proxy, the baseline its attaches are compared to,
// and the attachments made on it, in order.
type attachRun struct {
	c      *config
	r      *report
	sc     daemonScale
	h      *hostDaemon
	label  string
	coll   string
	locals []string
	// mountReady is the median mount-ready of a new chromafs-mount --daemon
	// of the view, the baseline of the attach times.
	mountReady time.Duration
	paths      []string        // the attachments, in order
	private    map[string]bool // path: a private attachment
	viewOf     map[string]int  // path: its view (an index of daemonViews)
}

// daemonAttachFigures measures, on one daemon behind the quota proxy:
// the first attach of each view, attaches of existing views, the footprint
// of many shared and private attachments, and restarts under them.
func daemonAttachFigures(c *config, r *report, sc daemonScale, q *harness.CloudProxy, label, coll, dir string, locals []string) error {
	logf("%s: daemon attaches", label)
	// measured before the daemon runs, through the same proxy
	mountReady, err := mountReadyBaseline(c, q.URL, coll, dir)
	if err != nil {
		return err
	}
	h, err := newHostDaemon(c, filepath.Join(dir, "host-a"), q.URL)
	if err != nil {
		return err
	}
	defer h.cleanup()
	if _, err := h.start(true); err != nil {
		return err
	}
	// a host's daemon runs long before a collection's first attach: its
	// connection to Chroma is open by then (chroma.Pool's heartbeat)
	if err := harness.Poll(10*time.Second, 5*time.Millisecond, func() bool { return q.Heartbeats.Load() > 0 }); err != nil {
		return fmt.Errorf("the daemon sent no heartbeat: %w", err)
	}
	a := &attachRun{c: c, r: r, sc: sc, h: h, label: label, coll: coll, locals: locals, mountReady: mountReady,
		private: map[string]bool{}, viewOf: map[string]int{}}
	if err := a.newViews(); err != nil {
		return err
	}
	f0 := h.footprint()
	if err := a.existingViews(); err != nil {
		return err
	}
	f1, err := a.sharedFootprint(f0)
	if err != nil {
		return err
	}
	if err := a.privateFootprint(f1); err != nil {
		return err
	}
	return a.restarts()
}

// mountReadyBaseline is the median mount-ready of chromafs-mount over
// --reps runs: a new mount process of the view, the cost each conversation
// paid before the daemon, with Chroma at url (the quota proxy the daemon
// is behind).
func mountReadyBaseline(c *config, url, coll, dir string) (time.Duration, error) {
	proxied := *c
	proxied.url = url
	var readies []time.Duration
	for range c.reps {
		d, ready, err := mountDaemon(&proxied, coll, filepath.Join(dir, "mnt-baseline"))
		if err != nil {
			return 0, err
		}
		d.unmount()
		readies = append(readies, ready)
	}
	return median(readies), nil
}

// attach attaches view v (private or shared) at the next path under the
// daemon's conv directory and records it; it returns the attach's wall time.
func (a *attachRun) attach(v int, priv bool) (time.Duration, error) {
	p := filepath.Join(a.h.dir, "conv", fmt.Sprintf("%05d", len(a.paths)))
	took, err := a.h.attach(a.coll, daemonViews[v], priv, p)
	if err == nil {
		a.paths = append(a.paths, p)
		a.private[p], a.viewOf[p] = priv, v
	}
	return took, err
}

// newViews measures the first attach of the collection, then the first
// attach of each other view of the loaded collection.
func (a *attachRun) newViews() error {
	first, err := a.attach(0, false)
	if err != nil {
		return err
	}
	a.h.settle() // the first view's background prefetch is done: a new view costs its own work only
	var newViews []time.Duration
	for v := 1; v < len(daemonViews); v++ {
		took, err := a.attach(v, false)
		if err != nil {
			return err
		}
		newViews = append(newViews, took)
	}
	a.r.value(a.label, "daemon: first `chromafs attach` of the collection (opens it, loads the tree through the quota proxy, the daemon's connection open; one run; lower is better)", dur(first), "(none)")
	slowest := slices.Max(newViews)
	var each []string
	for i, d := range newViews {
		each = append(each, daemonViews[i+1].name+" "+dur(d))
	}
	a.r.note("daemon, %s: the first attach of each new view: %s", a.label, strings.Join(each, ", "))
	a.r.ratio(a.label, fmt.Sprintf("daemon: a new view of the loaded collection, `chromafs attach` wall time (slowest of %d new views, one run; lower is better)", len(newViews)),
		slowest, "a new chromafs-mount --daemon (mount-ready)", a.mountReady, atMost(50*time.Millisecond))
	return nil
}

// existingViews times sc.timed attaches of the views already attached (p50
// and p99), and notes the time of the client's exec alone.
func (a *attachRun) existingViews() error {
	var timed []time.Duration
	for i := 0; i < a.sc.timed; i++ {
		took, err := a.attach(i%len(daemonViews), false)
		if err != nil {
			return err
		}
		timed = append(timed, took)
	}
	p50, p99 := percentile(timed, 0.5), percentile(timed, 0.99)
	a.r.ratio(a.label, fmt.Sprintf("daemon: `chromafs attach` of an existing view, wall time incl. the client's exec, p50 of %d (lower is better)", len(timed)),
		p50, "a new chromafs-mount --daemon (mount-ready)", a.mountReady, atMost(10*time.Millisecond))
	a.r.ratio(a.label, fmt.Sprintf("daemon: same, p99 of %d (lower is better)", len(timed)), p99, "a new chromafs-mount --daemon (mount-ready)", a.mountReady, atMost(30*time.Millisecond))
	exec0 := medianOf(make([]int, 21), func(int) time.Duration {
		start := time.Now()
		_ = exec.Command(filepath.Join(a.c.bin, "chromafs"), "--version").Run()
		return time.Since(start)
	})
	a.r.note("daemon, %s: `chromafs --version` (the client's exec alone) takes %s here (median of 21)", a.label, dur(exec0))
	return nil
}

// sharedFootprint attaches shared views up to sc.shared attachments and
// reports what they added to the daemon's footprint f0 (that of the views'
// mounts alone); it returns the footprint after them.
func (a *attachRun) sharedFootprint(f0 footprint) (footprint, error) {
	var later []time.Duration
	for len(a.paths) < a.sc.shared {
		took, err := a.attach(len(a.paths)%len(daemonViews), false)
		if err != nil {
			return footprint{}, err
		}
		later = append(later, took)
	}
	if len(later) > 0 {
		logf("  the last %d shared attaches: median %s (with up to %d attachments)", len(later), dur(median(later)), len(a.paths))
	}
	f1 := a.h.footprint()
	shared := len(a.paths) - len(daemonViews)
	perShared := float64(f1.rss-f0.rss) / float64(shared)
	a.r.value(a.label, fmt.Sprintf("daemon: RSS growth per shared attachment (%d of them, %d in all; one run; lower is better)", shared, len(a.paths)),
		fmt.Sprintf("%.1f KiB (settled RSS %s → %s)", perShared/1024, mib(f0.rss), mib(f1.rss)), pass(perShared <= 1<<20, "≤ 1 MiB"))
	a.r.value(a.label, fmt.Sprintf("daemon: threads and fds, %d views' mounts → %d shared attachments (one run; lower is better)", len(daemonViews), len(a.paths)),
		fmt.Sprintf("threads %d → %d, fds %d → %d", f0.threads, f1.threads, f0.fds, f1.fds), pass(f1.threads <= f0.threads+4 && f1.fds <= f0.fds+4, "none per attachment (≤ +4 in all)"))
	return f1, nil
}

// privateFootprint makes sc.private private attachments and reports what
// each added to the daemon's footprint f1.
func (a *attachRun) privateFootprint(f1 footprint) error {
	for i := 0; i < a.sc.private; i++ {
		if _, err := a.attach(i%len(daemonViews), true); err != nil {
			return err
		}
	}
	f2 := a.h.footprint()
	perPrivate := float64(f2.rss-f1.rss) / float64(a.sc.private)
	a.r.value(a.label, fmt.Sprintf("daemon: RSS growth per private attachment (%d of them; one run; lower is better)", a.sc.private),
		fmt.Sprintf("%.2f MiB (settled RSS %s → %s)", perPrivate/(1<<20), mib(f1.rss), mib(f2.rss)), pass(perPrivate <= 4<<20, "≤ 4 MiB"))
	// a private attachment is a FUSE mount: its /dev/fuse descriptor, and
	// go-fuse's readers (one while idle, up to min(GOMAXPROCS, 16) under
	// load, each an OS thread while blocked in read(2): the daemon's bound)
	threadsEach, fdsEach := float64(f2.threads-f1.threads)/float64(a.sc.private), float64(f2.fds-f1.fds)/float64(a.sc.private)
	maxThreads := 1 + min(runtime.GOMAXPROCS(0), 16)
	a.r.value(a.label, fmt.Sprintf("daemon: threads and fds per private attachment (%d of them; one run; lower is better)", a.sc.private),
		fmt.Sprintf("%.2f threads, %.2f fds each (threads %d → %d, fds %d → %d)", threadsEach, fdsEach, f1.threads, f2.threads, f1.fds, f2.fds),
		pass(threadsEach <= float64(maxThreads) && fdsEach <= 2, fmt.Sprintf("≤ %d threads (1 + go-fuse's readers), ≤ 2 fds each", maxThreads)))
	return nil
}

// restarts measures a SIGKILL and a new start of the daemon under all the
// attachments, then under sc.restart of them (the others detached), and
// checks that a restarted shared and private attachment show their view.
func (a *attachRun) restarts() error {
	all, err := restartUntilAnswered(a.h, a.paths)
	if err != nil {
		return err
	}
	a.r.value(a.label, fmt.Sprintf("daemon: SIGKILL and a new start with %d attachments (%d private): all answer (statfs) after (one run; lower is better)", len(a.paths), a.sc.private), dur(all), "(none)")
	kept, err := a.keepForRestart()
	if err != nil {
		return err
	}
	took, err := restartUntilAnswered(a.h, kept)
	if err != nil {
		return err
	}
	nPriv := a.sc.restart / 10
	a.r.value(a.label, fmt.Sprintf("daemon: SIGKILL and a new start with %d attachments (%d private): all answer (statfs) after (one run; lower is better)", len(kept), nPriv), dur(took), pass(took <= 2*time.Second, "≤ 2 s"))
	// what a restarted shared and private attachment show is their view
	for _, p := range []string{kept[0], kept[len(kept)-1]} {
		if err := sameListing(p, a.locals[a.viewOf[p]]); err != nil {
			return fmt.Errorf("after the restart, %s (private %v): %w", p, a.private[p], err)
		}
	}
	return nil
}

// keepForRestart keeps sc.restart of the attachments, a tenth of them
// private (restartKeep), detaches the others and returns those kept, in
// order.
func (a *attachRun) keepForRestart() ([]string, error) {
	keep := restartKeep(a.paths, a.private, a.sc.restart)
	var kept []string
	for _, p := range a.paths {
		if keep[p] {
			kept = append(kept, p)
			continue
		}
		if err := a.h.detach(p); err != nil {
			return nil, err
		}
	}
	return kept, nil
}

// sameListing compares the files and their sums under mnt and local.
func sameListing(mnt, local string) error {
	const list = "find . -type f | sort | xargs -d '\\n' md5sum"
	run := func(dir string) (string, error) {
		cmd := exec.Command("bash", "-o", "pipefail", "-c", list)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	got, err := run(mnt)
	if err != nil {
		return fmt.Errorf("%s: %w: %.300s", list, err, got)
	}
	want, err := run(local)
	if err != nil {
		return fmt.Errorf("%s on the local copy: %w", list, err)
	}
	if got != want {
		return fmt.Errorf("differs from its local copy: %s", firstDifference(got, want))
	}
	return nil
}

// restartUntilAnswered SIGKILLs the daemon, starts it again and returns how
// long after its start every path answered.
func restartUntilAnswered(h *hostDaemon, paths []string) (time.Duration, error) {
	logf("  restart with %d attachments", len(paths))
	h.kill()
	start, err := h.start(false)
	if err != nil {
		return 0, err
	}
	left := append([]string(nil), paths...)
	err = harness.Poll(60*time.Second, time.Millisecond, func() bool {
		var still []string
		for _, p := range left {
			if !answers(p) {
				still = append(still, p)
			}
		}
		left = still
		return len(left) == 0
	})
	took := time.Since(start)
	if err != nil {
		return took, fmt.Errorf("%d of %d attachments do not answer %s after the restart", len(left), len(paths), took.Round(time.Millisecond))
	}
	return took, nil
}

// sandbox is a long-lived bash in a bubblewrap sandbox over a directory
// bound at /docs (the README's recipe): a conversation's shell, to which
// the agent's commands are sent one by one.
type sandbox struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// bwrapArgs is the sandbox recipe of the README, as integration_test's:
// the attachment bound read-only at /docs, nothing else of the host but
// /usr, a new /proc.
func bwrapArgs(path string, extra ...string) []string {
	args := []string{"--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
		"--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--ro-bind", path, "/docs", "--unshare-all", "--die-with-parent"}
	return append(args, extra...)
}

func startSandbox(path string) (*sandbox, error) {
	cmd := exec.Command("bwrap", bwrapArgs(path, "--chdir", "/docs", "bash", "--norc", "--noprofile")...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "LC_ALL=C", "TZ=UTC", "HOME=/tmp"}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bwrap: %w", err)
	}
	return &sandbox{cmd: cmd, in: in, out: bufio.NewReaderSize(out, 1<<16)}, nil
}

// end marks the end of a command's output (no command prints it).
const endMark = '\x1e'

// run sends one command and returns its output, whether it exited 0, and
// the time until its output ended.
func (s *sandbox) run(command string) (string, bool, time.Duration, error) {
	start := time.Now()
	if _, err := fmt.Fprintf(s.in, "( %s ) </dev/null 2>&1; printf '\\036%%d\\n' $?\n", command); err != nil {
		return "", false, 0, fmt.Errorf("sandbox: %w", err)
	}
	out, err := s.out.ReadString(endMark)
	if err != nil {
		return out, false, 0, fmt.Errorf("sandbox ended during %q: %w", command, err)
	}
	status, err := s.out.ReadString('\n')
	took := time.Since(start)
	if err != nil {
		return out, false, took, fmt.Errorf("sandbox ended during %q: %w", command, err)
	}
	return strings.TrimSuffix(out, string(endMark)), status == "0\n", took, nil
}

func (s *sandbox) close() {
	_ = s.in.Close()
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

// sandboxSession runs the agent's session (session.go) in a sandbox over
// path, with think time between commands, as runSession does outside.
func sandboxSession(path string, cmds []string, think time.Duration) (sessionResult, error) {
	var res sessionResult
	s, err := startSandbox(path)
	if err != nil {
		return res, err
	}
	defer s.close()
	var out strings.Builder
	for i, c := range cmds {
		if i > 0 {
			time.Sleep(think)
		}
		o, ok, took, err := s.run(c)
		if err != nil {
			return res, err
		}
		res.each = append(res.each, took)
		res.waited += took
		fmt.Fprintf(&out, "$ %s (%v)\n%s", c, ok, o)
	}
	res.output = out.String()
	return res, nil
}

// conversation is one result of many at once.
type conversation struct {
	view   int
	attach time.Duration
	res    sessionResult
	err    error
}

// convRun is the state shared by the steps of daemonConversations: the
// agent session of each view and its output in a sandbox over the view's
// local copy, and the daemon the conversations attach to.
type convRun struct {
	c           *config
	r           *report
	sc          daemonScale
	q           *harness.CloudProxy
	label, coll string
	locals      []string
	corpusBytes int64
	cmds        [][]string // per view: the agent session's commands
	want        []string   // per view: the session's output over the local copy
	h           *hostDaemon
}

// daemonConversations measures many conversations at once, each the agent
// session in a sandbox over its own attachment of a fresh daemon (empty
// caches) behind the quota proxy, against the same sessions at once in
// sandboxes over the local copies; then the next conversation of each view.
func daemonConversations(c *config, r *report, sc daemonScale, q *harness.CloudProxy, label, coll, dir string, locals []string, corpusBytes int64) error {
	logf("%s: daemon, %d conversations at once in sandboxes", label, sc.convs)
	cv := &convRun{c: c, r: r, sc: sc, q: q, label: label, coll: coll, locals: locals, corpusBytes: corpusBytes}
	if err := cv.references(); err != nil {
		return err
	}
	local := atOnce(sc.convs, cv.localConversation)
	h, err := newHostDaemon(c, filepath.Join(dir, "host-b"), q.URL)
	if err != nil {
		return err
	}
	defer h.cleanup()
	if _, err := h.start(true); err != nil {
		return err
	}
	cv.h = h
	q.Reset()
	mounted := atOnce(sc.convs, cv.mountedConversation)
	if err := cv.reportAtOnce(mounted, local); err != nil {
		return err
	}
	logf("%s: daemon, the next conversation of each view", label)
	h.settle() // what the conversations at once started in the background is done
	return cv.nextConversations()
}

// references makes the agent session of each view and runs it once in a
// sandbox over the view's local copy: the reference output, and a warm
// local page cache.
func (cv *convRun) references() error {
	cv.cmds = make([][]string, len(daemonViews))
	cv.want = make([]string, len(daemonViews))
	for v := range daemonViews {
		pages, err := sourcePages(cv.locals[v], false)
		if err != nil || len(pages) == 0 {
			return fmt.Errorf("pages of view %s: %v (%d)", daemonViews[v].name, err, len(pages))
		}
		cv.cmds[v] = agentSession(pages)
		res, err := sandboxSession(cv.locals[v], cv.cmds[v], 0)
		if err != nil {
			return err
		}
		cv.want[v] = res.output
	}
	return nil
}

// atOnce runs n conversations at once and returns their results.
func atOnce(n int, run func(i int) conversation) []conversation {
	out := make([]conversation, n)
	var wg sync.WaitGroup
	for i := range out {
		wg.Add(1)
		go func() { defer wg.Done(); out[i] = run(i) }()
	}
	wg.Wait()
	return out
}

// localConversation is conversation i in a sandbox over its view's local
// copy.
func (cv *convRun) localConversation(i int) conversation {
	v := i % len(daemonViews)
	res, err := sandboxSession(cv.locals[v], cv.cmds[v], cv.sc.think)
	return conversation{view: v, res: res, err: err}
}

// mountedConversation is conversation i in a sandbox over its own new
// attachment of its view.
func (cv *convRun) mountedConversation(i int) conversation {
	v := i % len(daemonViews)
	p := filepath.Join(cv.h.dir, "conv", fmt.Sprintf("%05d", i))
	took, err := cv.h.attach(cv.coll, daemonViews[v], false, p)
	if err != nil {
		return conversation{view: v, attach: took, err: err}
	}
	res, err := sandboxSession(p, cv.cmds[v], cv.sc.think)
	return conversation{view: v, attach: took, res: res, err: err}
}

// reportAtOnce reports the conversations at once over the attachments
// (mounted) against those over the local copies: their waits, their
// outputs, the quota proxy's violations and the corpus they pulled. It
// fails if any of them failed.
func (cv *convRun) reportAtOnce(mounted, local []conversation) error {
	same, slowestAttach, err := cv.compare(mounted, local)
	if err != nil {
		return err
	}
	r, q, sc := cv.r, cv.q, cv.sc
	waited := func(cs []conversation) time.Duration {
		return medianOf(cs, func(x conversation) time.Duration { return x.res.waited })
	}
	n := len(cv.cmds[0])
	r.ratio(cv.label, fmt.Sprintf("daemon: %d conversations at once, each the agent session (%d commands) in a bwrap sandbox over its own attachment (4 views, empty caches): median time waited of the %d, one run (lower is better)", sc.convs, n, sc.convs),
		waited(mounted), fmt.Sprintf("%d at once in sandboxes over the local copies", sc.convs), waited(local), func(float64, time.Duration) string { return "(none)" })
	r.value(cv.label, fmt.Sprintf("daemon: those %d conversations' outputs equal to the same session in a sandbox over the local copy (higher is better)", sc.convs),
		fmt.Sprintf("%d of %d (slowest attach under load %s)", same, sc.convs, dur(slowestAttach)), pass(same == sc.convs, "all"))
	r.value(cv.label, "daemon: quota violations during them (reads Chroma Cloud would refuse; lower is better)",
		fmt.Sprintf("%d (%d refused for concurrency, %d for size; peak %d reads in flight, %d reads)", q.Violations(), q.Refused.Load(), q.TooBig.Load(), q.Peak.Load(), q.Reads.Load()),
		pass(q.Violations() == 0, "0"))
	pulled := float64(q.Content.Load()) / float64(cv.corpusBytes)
	r.value(cv.label, "daemon: corpus pulled from Chroma by them (document bytes the daemon fetched ÷ corpus bytes; lower is better)",
		fmt.Sprintf("%.2fx (%s of %s; %s on the wire)", pulled, mib(q.Content.Load()), mib(cv.corpusBytes), mib(q.Wire.Load())), pass(pulled <= 1.1, "≤ 1.1x"))
	logSlowest("conversation 0 of those at once", cv.cmds[0], mounted[0].res, local[0].res)
	return nil
}

// compare counts the mounted conversations whose output equals their
// view's reference (logging those that differ) and returns the slowest
// attach among them; the error joins those of every conversation that
// failed.
func (cv *convRun) compare(mounted, local []conversation) (int, time.Duration, error) {
	same, slowestAttach := 0, time.Duration(0)
	var errs []error
	for i, m := range mounted {
		switch {
		case m.err != nil:
			errs = append(errs, fmt.Errorf("conversation %d (%s): %w", i, daemonViews[m.view].name, m.err))
		case m.res.output == cv.want[m.view]:
			same++
		default:
			logf("  conversation %d (%s): output differs: %s", i, daemonViews[m.view].name, firstDifference(m.res.output, cv.want[m.view]))
		}
		slowestAttach = max(slowestAttach, m.attach)
	}
	for i, l := range local {
		if l.err != nil {
			errs = append(errs, fmt.Errorf("local conversation %d: %w", i, l.err))
		}
	}
	return same, slowestAttach, errors.Join(errs...)
}

// nextConversations measures the next conversation of each view, one
// after the other on the warm daemon (a new attachment each), against the
// same session over the local copy, sc.nextReps times.
func (cv *convRun) nextConversations() error {
	var mountWaits, localWaits []time.Duration
	for rep := 0; rep < cv.sc.nextReps; rep++ {
		var mw, lw time.Duration
		for v := range daemonViews {
			mres, lres, err := cv.nextConversation(rep, v)
			if err != nil {
				return err
			}
			if rep == cv.sc.nextReps-1 {
				logSlowest("next conversation of "+daemonViews[v].name, cv.cmds[v], mres, lres)
			}
			mw, lw = mw+mres.waited, lw+lres.waited
		}
		mountWaits, localWaits = append(mountWaits, mw), append(localWaits, lw)
	}
	cv.r.ratio(cv.label, fmt.Sprintf("daemon: the next conversation of each of the 4 views (a new attachment of the view; session in a sandbox): time waited, summed over the views, median of %d (lower is better)", cv.sc.nextReps),
		median(mountWaits), "same in sandboxes over the local copies", median(localWaits), maxRatio(1.1))
	return nil
}

// nextConversation runs the session of view v over its local copy, then
// over a new attachment of it (think time a third of sc.think: they read a
// warm view), and checks that their outputs agree.
func (cv *convRun) nextConversation(rep, v int) (mounted, local sessionResult, err error) {
	local, err = sandboxSession(cv.locals[v], cv.cmds[v], cv.sc.think/3)
	if err != nil {
		return mounted, local, err
	}
	p := filepath.Join(cv.h.dir, "conv", fmt.Sprintf("next-%d-%d", rep, v))
	if _, err := cv.h.attach(cv.coll, daemonViews[v], false, p); err != nil {
		return mounted, local, err
	}
	mounted, err = sandboxSession(p, cv.cmds[v], cv.sc.think/3)
	if err != nil {
		return mounted, local, err
	}
	if mounted.output != cv.want[v] {
		return mounted, local, fmt.Errorf("the next conversation of view %s: output differs from the local copy's: %s", daemonViews[v].name, firstDifference(mounted.output, cv.want[v]))
	}
	return mounted, local, nil
}

// restartKeep picks n of paths to keep for a restart: the first n/10
// private ones, then the first shared ones up to n in all.
func restartKeep(paths []string, private map[string]bool, n int) map[string]bool {
	keep := map[string]bool{}
	nPriv := n / 10
	for _, p := range paths {
		if private[p] && nPriv > 0 {
			keep[p] = true
			nPriv--
		}
	}
	for _, p := range paths {
		if !private[p] && len(keep) < n {
			keep[p] = true
		}
	}
	return keep
}
