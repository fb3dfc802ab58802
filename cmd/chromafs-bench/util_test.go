package main

import (
	"os/exec"
	"testing"
	"time"
)

// TestMed: the median is one of the samples, the upper middle one for an
// even count, whatever their order; the input is left as it was.
func TestMed(t *testing.T) {
	xs := []int64{5, 1, 4, 2}
	if got := med(xs); got != 4 {
		t.Errorf("med(%v) = %d, want 4", xs, got)
	}
	if xs[0] != 5 || xs[3] != 2 {
		t.Errorf("med sorted its input: %v", xs)
	}
	if got := med([]int64{3, 9, 1}); got != 3 {
		t.Errorf("med(3, 9, 1) = %d, want 3", got)
	}
	if got := med[int64](nil); got != 0 {
		t.Errorf("med(nil) = %d", got)
	}
	if got := median([]time.Duration{3, 1, 2}); got != 2 {
		t.Errorf("median = %v, want 2", got)
	}
	type rep struct{ n int64 }
	if got := medianOfInt([]rep{{7}, {1}, {9}}, func(r rep) int64 { return r.n }); got != 7 {
		t.Errorf("medianOfInt = %d, want 7", got)
	}
}

// TestMedianIndex: the repetition whose key is the median, as med picks it.
func TestMedianIndex(t *testing.T) {
	key := func(f float64) float64 { return f }
	for _, tc := range []struct {
		xs   []float64
		want int
	}{{[]float64{3, 1, 2}, 2}, {[]float64{1.5}, 0}, {[]float64{4, 1, 3, 2}, 2}, {nil, -1}} {
		if got := medianIndex(tc.xs, key); got != tc.want {
			t.Errorf("medianIndex(%v) = %d, want %d", tc.xs, got, tc.want)
		}
	}
}

// TestCountOf: a count of every repetition, shown as one value only when
// all agree.
func TestCountOf(t *testing.T) {
	for _, tc := range []struct {
		xs   []int64
		want string
	}{
		{[]int64{1}, "1 request"},
		{[]int64{14}, "14 requests"},
		{[]int64{1, 1, 1, 1, 1}, "1 request in each of 5"},
		{[]int64{14, 13, 15, 14, 14}, "14 requests (median of 5; 13-15)"},
		{[]int64{1, 2}, "2 requests (median of 2; 1-2)"},
		{nil, "no requests"},
	} {
		if got := countOf(tc.xs, "request"); got != tc.want {
			t.Errorf("countOf(%v) = %q, want %q", tc.xs, got, tc.want)
		}
	}
}

func TestAllAre(t *testing.T) {
	if !allAre([]int64{1, 1}, 1) || allAre([]int64{1, 0}, 1) || allAre(nil, 1) || !allAre([]int64{0}, 0) {
		t.Error("allAre")
	}
}

// TestShellWord: a name bash would split or expand is quoted so that the
// shell hands it over as it is; a plain one is left alone.
func TestShellWord(t *testing.T) {
	for _, name := range []string{"guides/page-0001.md", "a b.mdx", "x;$(touch pwned).md", "it's.md", "*.md"} {
		out, err := exec.Command("bash", "-c", "printf %s "+shellWord(name)).Output()
		if err != nil || string(out) != name {
			t.Errorf("%q as %s: bash gave %q (%v)", name, shellWord(name), out, err)
		}
	}
	if w := shellWord("guides/page-0001.md"); w != "guides/page-0001.md" {
		t.Errorf("a plain name was quoted: %s", w)
	}
}
