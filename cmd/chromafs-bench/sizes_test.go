package main

import (
	"slices"
	"testing"
)

// TestSizeFigures: the figures of benchSize, in the order of the report
// (refresh last: it edits the source), and only ready and walk on the
// tree-bound corpora of --tree-files.
func TestSizeFigures(t *testing.T) {
	want := []string{"ready", "walk", "grep", "cat", "accesslog", "session", "fullcache", "refresh"}
	if got := sizeFigureNames(); !slices.Equal(got, want) {
		t.Errorf("sizeFigureNames() = %v, want %v", got, want)
	}
	var tree []string
	for _, f := range sizeFigures {
		if f.treeToo {
			tree = append(tree, f.name)
		}
	}
	if want := []string{"ready", "walk"}; !slices.Equal(tree, want) {
		t.Errorf("tree-bound figures %v, want %v", tree, want)
	}
}
