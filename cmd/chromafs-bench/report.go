package main

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

type row struct {
	size, figure, value, baseline, ratio, target string
}

type report struct {
	rows  []row
	notes []string
	// trees holds, per kind of corpus (one generator and shape of page),
	// the settled RSS of an empty-cache mount by the entries of its tree:
	// the tree memory line compares corpora of one kind only
	trees map[string]map[int]int64
	start time.Time
}

func newReport(c *config) *report {
	return &report{trees: map[string]map[int]int64{}, start: time.Now()}
}

// treeRSS records the settled RSS of an empty-cache mount of a corpus of
// kind whose tree has entries entries.
func (r *report) treeRSS(kind string, entries int, rss int64) {
	if r.trees[kind] == nil {
		r.trees[kind] = map[int]int64{}
	}
	r.trees[kind][entries] = rss
}

// perEntry is the tree memory of one kind of corpus: the difference of
// the settled RSS of its largest and smallest mounts over the difference
// of their entries; ok is false unless there are two sizes.
func perEntry(rss map[int]int64) (lo, hi int, bytes float64, ok bool) {
	if len(rss) < 2 {
		return 0, 0, 0, false
	}
	lo, hi = minMaxKeys(rss)
	return lo, hi, float64(rss[hi]-rss[lo]) / float64(hi-lo), true
}

func (r *report) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// target checks a ratio and says whether the target holds.
type target func(ratio float64, v time.Duration) string

func maxRatio(max float64) target {
	return func(ratio float64, _ time.Duration) string { return pass(ratio <= max, fmt.Sprintf("≤ %.1fx", max)) }
}

func readyTarget(files int) target {
	return func(ratio float64, v time.Duration) string {
		switch {
		case files >= 100000:
			return pass(v <= time.Second, "≤ 1 s")
		case files >= 10000:
			return pass(v <= 100*time.Millisecond && ratio <= 0.05, "≤ 100 ms and ≤ 1/20")
		}
		return "(none)"
	}
}

// catTarget judges the cold cat: one request in every repetition, and
// the median within 1.5x the raw get.
func catTarget(reqs []int64) target {
	return func(ratio float64, _ time.Duration) string {
		return pass(allAre(reqs, 1) && ratio <= 1.5, "1 request, ≤ 1.5x")
	}
}

func rssTarget(files int, rss int64) string {
	if files >= 100000 {
		return pass(rss <= 200<<20, "≤ 200 MiB")
	}
	return "(none)"
}

func pass(ok bool, target string) string {
	if ok {
		return target + " ✅"
	}
	return target + " ❌"
}

func (r *report) ratio(size, figure string, v time.Duration, baseline string, b time.Duration, t target) {
	ratio := v.Seconds() / b.Seconds()
	r.rows = append(r.rows, row{size, figure, dur(v), baseline + ": " + dur(b), fmt.Sprintf("%.2fx", ratio), t(ratio, v)})
	fmt.Fprintf(os.Stderr, "  %-12s %-60s %10s  vs %10s  = %6.2fx  %s\n", size, figure, dur(v), dur(b), ratio, t(ratio, v))
}

func (r *report) value(size, figure, value, target string) {
	r.rows = append(r.rows, row{size, figure, value, "", "", target})
	fmt.Fprintf(os.Stderr, "  %-12s %-60s %s  %s\n", size, figure, value, target)
}

func dur(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.1f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func (r *report) write(c *config) error {
	md := r.markdown(c)
	fmt.Print(md)
	if c.out != "" {
		return os.WriteFile(c.out, []byte(md), 0o644)
	}
	return nil
}

// markdown is the report: its header, the table, the tree memory of each
// kind of corpus measured at two sizes or more, and the notes.
func (r *report) markdown(c *config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run %s, %s, %d repetitions (medians, unless a row says otherwise), %s.\n\n", time.Now().UTC().Format("2006-01-02 15:04 MST"), machine(), c.reps, time.Since(r.start).Round(time.Second))
	fmt.Fprintln(&b, "| corpus | figure | chromafs | baseline | ratio | target |")
	fmt.Fprintln(&b, "|---|---|---|---|---|---|")
	for _, x := range r.rows {
		cell := func(s string) string { return strings.ReplaceAll(s, "|", "\\|") }
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", x.size, cell(x.figure), cell(x.value), cell(x.baseline), x.ratio, x.target)
	}
	for _, kind := range slices.Sorted(maps.Keys(r.trees)) {
		if lo, hi, per, ok := perEntry(r.trees[kind]); ok {
			fmt.Fprintf(&b, "\nTree memory, %s: %.0f bytes per entry (files and directories): the difference of the settled RSS of the empty-cache mounts of the %d- and %d-entry trees (medians), over the difference of their entries.\n",
				kind, per, hi, lo)
		}
	}
	fmt.Fprintln(&b)
	for _, n := range r.notes {
		fmt.Fprintf(&b, "- %s\n", n)
	}
	return b.String()
}

func machine() string {
	kernel, _ := exec.Command("uname", "-r").Output()
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
		if len(f) > 1 {
			mem = f[1] + " kB RAM"
		}
	}
	return fmt.Sprintf("%d cores, %s, Linux %s, %s", runtime.NumCPU(), mem, strings.TrimSpace(string(kernel)), runtime.Version())
}

func minMaxKeys(m map[int]int64) (lo, hi int) {
	for k := range m {
		if lo == 0 || k < lo {
			lo = k
		}
		hi = max(hi, k)
	}
	return lo, hi
}
