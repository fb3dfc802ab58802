package main

import (
	"strings"
	"testing"
)

// TestFullCacheFigure: the figure shown is the ratio the target judges
// (what the full cache added to the RSS, over the cache size), so a
// figure under its target is never marked as a miss.
func TestFullCacheFigure(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		full, empty, cache int64
		wantValue          string
		pass               bool
	}{
		// the row of issue 20 point 6: 41.4 MiB, empty 28.4 MiB, 8 MiB cache
		// (once shown as "1.13x ... ≤ 1.25x ❌", a ratio of another sum)
		{full: 414 * mib / 10, empty: 284 * mib / 10, cache: 8 * mib, wantValue: "41.4 MiB: +13.0 MiB over the empty mount's 28.4 MiB = 1.62x the cache size"},
		{full: 1346 * mib / 10, empty: 692 * mib / 10, cache: 64 * mib, wantValue: "= 1.02x the cache size", pass: true},
		{full: 38 * mib, empty: 28 * mib, cache: 8 * mib, wantValue: "= 1.25x the cache size", pass: true},
	}
	for _, tc := range tests {
		value, target := fullCacheFigure(tc.full, tc.empty, tc.cache)
		if !strings.Contains(value, tc.wantValue) {
			t.Errorf("value %q, want it to hold %q", value, tc.wantValue)
		}
		if got := strings.HasSuffix(target, "✅"); got != tc.pass || !strings.Contains(target, "growth ÷ cache-size ≤ 1.25x") {
			t.Errorf("%s: target %q, want pass=%v", value, target, tc.pass)
		}
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
