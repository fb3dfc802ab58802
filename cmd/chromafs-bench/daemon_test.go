package main

import (
	"fmt"
	"slices"
	"testing"
)

// TestRestartKeep: the restart figure keeps n attachments, the first n/10
// private ones and the first shared ones, whatever their order.
func TestRestartKeep(t *testing.T) {
	var paths []string
	private := map[string]bool{}
	for i := range 30 {
		p := fmt.Sprintf("%05d", i)
		paths = append(paths, p)
		private[p] = i >= 25 // private ones last, as the attach figures make them
	}
	tests := []struct {
		n    int
		want []string // the kept ones, in order
	}{
		{n: 20, want: append(slices.Clone(paths[:18]), paths[25:27]...)},
		{n: 9, want: paths[:9]}, // 9/10: no private one
		{n: 10, want: append(slices.Clone(paths[:9]), paths[25])},
		{n: 40, want: paths[:29]}, // all shared, 4 of the 5 private
	}
	for _, tc := range tests {
		keep := restartKeep(paths, private, tc.n)
		var got []string
		for _, p := range paths {
			if keep[p] {
				got = append(got, p)
			}
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("restartKeep(n=%d) keeps %v, want %v", tc.n, got, tc.want)
		}
	}
}
