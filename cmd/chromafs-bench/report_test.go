package main

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// TestFullCacheFigure: the figure shown is the ratio the target judges
// (what the full cache added to the settled RSS of an empty mount, over
// the cache size), so a figure under its target is never marked as a miss.
func TestFullCacheFigure(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		full, empty, cache int64
		wantValue          string
		pass               bool
	}{
		// the row of issue 20 point 6: 41.4 MiB, empty 28.4 MiB, 8 MiB cache
		// (once shown as "1.13x ... ≤ 1.25x ❌", a ratio of another sum)
		{full: 414 * mib / 10, empty: 284 * mib / 10, cache: 8 * mib, wantValue: "1.62x (settled RSS 28.4 MiB empty → 41.4 MiB full: +13.0 MiB)"},
		{full: 1346 * mib / 10, empty: 692 * mib / 10, cache: 64 * mib, wantValue: "1.02x (", pass: true},
		{full: 38 * mib, empty: 28 * mib, cache: 8 * mib, wantValue: "1.25x (", pass: true},
		{full: 39 * mib, empty: 28 * mib, cache: 8 * mib, wantValue: "1.38x ("},
	}
	for _, tc := range tests {
		value, target := fullCacheFigure(tc.full, tc.empty, tc.cache)
		if !strings.HasPrefix(value, tc.wantValue) {
			t.Errorf("value %q, want it to start with %q", value, tc.wantValue)
		}
		if got := strings.HasSuffix(target, "✅"); got != tc.pass || !strings.HasPrefix(target, "≤ 1.25x (RSS ≤ empty + 1.25x cache-size)") {
			t.Errorf("%s: target %q, want pass=%v", value, target, tc.pass)
		}
	}
}

// TestFullCacheMedianRep: the row shows the repetition of the median
// growth, its empty and full RSS together (never the median of each,
// which could come from two repetitions).
func TestFullCacheMedianRep(t *testing.T) {
	const mib = 1 << 20
	reps := []fullCacheRep{{empty: 30 * mib, full: 50 * mib}, {empty: 28 * mib, full: 38 * mib}, {empty: 20 * mib, full: 60 * mib}}
	m := reps[medianIndex(reps, func(x fullCacheRep) float64 { return x.growth(16 * mib) })]
	if m != reps[0] {
		t.Errorf("median repetition %+v, want %+v (growth 20 MiB of 10, 20, 40)", m, reps[0])
	}
}

func TestPass(t *testing.T) {
	if got := pass(true, "≤ 2.0x"); got != "≤ 2.0x ✅" {
		t.Errorf("pass(true) = %q", got)
	}
	if got := pass(false, "≤ 2.0x"); got != "≤ 2.0x ❌" {
		t.Errorf("pass(false) = %q", got)
	}
	for _, tc := range []struct {
		ratio float64
		ok    bool
	}{{1.13, true}, {1.5, true}, {1.51, false}} {
		if got := strings.HasSuffix(maxRatio(1.5)(tc.ratio, 0), "✅"); got != tc.ok {
			t.Errorf("maxRatio(1.5)(%.2f) passes = %v, want %v", tc.ratio, got, tc.ok)
		}
	}
}

// TestTargetsCheckEveryRepetition: a target on a count holds only if the
// count held in every repetition, not in the median or the last one.
func TestTargetsCheckEveryRepetition(t *testing.T) {
	for _, tc := range []struct {
		reqs []int64
		ok   bool
	}{{[]int64{1, 1, 1}, true}, {[]int64{1}, true}, {[]int64{1, 2, 1}, false}, {[]int64{2, 2, 1}, false}, {nil, false}} {
		if got := strings.HasSuffix(catTarget(tc.reqs)(1.0, 0), "✅"); got != tc.ok {
			t.Errorf("catTarget(%v) passes = %v, want %v", tc.reqs, got, tc.ok)
		}
		waited := make([]int64, len(tc.reqs)) // a restart waits for none: one less than cat's one
		for i, n := range tc.reqs {
			waited[i] = n - 1
		}
		if got := strings.HasSuffix(restartTarget(waited)(0, 20*time.Millisecond), "✅"); got != tc.ok {
			t.Errorf("restartTarget(%v) passes = %v, want %v", waited, got, tc.ok)
		}
	}
	if strings.HasSuffix(catTarget([]int64{1, 1})(1.6, 0), "✅") {
		t.Error("catTarget passes a ratio of 1.6x")
	}
	if strings.HasSuffix(restartTarget([]int64{0})(0, 51*time.Millisecond), "✅") {
		t.Error("restartTarget passes 51 ms")
	}
}

// TestPerEntry: the tree memory of one kind of corpus is the RSS
// difference of its largest and smallest mounts over their entries'.
func TestPerEntry(t *testing.T) {
	if _, _, _, ok := perEntry(map[int]int64{1004: 1 << 20}); ok {
		t.Error("perEntry of one size: ok")
	}
	lo, hi, per, ok := perEntry(map[int]int64{1100: 30 << 20, 11000: 40 << 20, 110000: 80 << 20})
	if !ok || lo != 1100 || hi != 110000 || math.Abs(per-float64(50<<20)/108900) > 1e-9 {
		t.Errorf("perEntry = %d, %d, %.1f, %v", lo, hi, per, ok)
	}
}

// TestTreeMemoryLikeCorpora: the report's tree memory compares mounts of
// one kind of corpus only, and says nothing of a kind measured at one
// size (the 489 bytes an entry of issue 29 subtracted a docs-like mount
// from a tiny-page one).
func TestTreeMemoryLikeCorpora(t *testing.T) {
	r := newReport(nil)
	r.treeRSS("docs-like pages (--files)", 1100, 28<<20)
	r.treeRSS("tiny pages (--tree-files)", 110000, 75<<20)
	md := r.markdown(&config{reps: 5})
	if strings.Contains(md, "Tree memory") {
		t.Errorf("a tree memory line from two kinds of corpora:\n%s", md)
	}
	r.treeRSS("tiny pages (--tree-files)", 11000, 25<<20)
	md = r.markdown(&config{reps: 5})
	want := fmt.Sprintf("Tree memory, tiny pages (--tree-files): %.0f bytes per entry", float64(50<<20)/99000)
	if !strings.Contains(md, want) || strings.Count(md, "Tree memory") != 1 {
		t.Errorf("report:\n%s\nwant one tree memory line, %q", md, want)
	}
}
