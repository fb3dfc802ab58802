package fusefs

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestDirStreamResumes: a listing read in parts, each part from a fresh
// stream seeked to the offset the previous part ended at (as noOpendir
// serves every READDIR), is the whole listing once, in order.
func TestDirStreamResumes(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 1000 {
		fmt.Fprintf(&b, `%s"d/p%04d":{"isPublic":true,"path":"d/p%04d.md"}`, map[bool]string{true: "", false: ","}[i == 0], i, i)
	}
	b.WriteString("}")
	dir := build(t, b.String()).Lookup("d")
	var names []string
	var off uint64
	for part := 0; ; part++ {
		s := newDirStream(dir)
		if errno := s.Seekdir(t.Context(), off); errno != 0 {
			t.Fatalf("seek to %d: %v", off, errno)
		}
		n := 0
		for ; n < 7+part%5; n++ {
			e, errno := s.Readdirent(t.Context())
			if errno != 0 || e == nil {
				break
			}
			names, off = append(names, e.Name), e.Off
		}
		if n == 0 {
			break
		}
	}
	want := []string{".", ".."}
	for _, c := range dir.Children {
		want = append(want, c.Name)
	}
	if !slices.Equal(names, want) || len(names) != 1002 {
		t.Fatalf("%d names read in parts; want the %d of the listing, in order", len(names), len(want))
	}
	if errno := newDirStream(dir).Seekdir(t.Context(), 1003); errno == 0 {
		t.Error("a seek past the end succeeded")
	}
}
