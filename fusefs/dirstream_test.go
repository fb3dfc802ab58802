package fusefs

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromafs/chromafs/tree"
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
		s := newDirStream(&dirVersion{n: dir})
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
	if errno := newDirStream(&dirVersion{n: dir}).Seekdir(t.Context(), 1003); errno == 0 {
		t.Error("a seek past the end succeeded")
	}
}

// bigDir is a tree whose directory d holds the pages named.
func bigDir(t *testing.T, names []string) *tree.Node {
	t.Helper()
	var b strings.Builder
	b.WriteString("{")
	for i, n := range names {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"d/%s":{"isPublic":true,"path":"d/%s"}`, n, n)
	}
	b.WriteString("}")
	return build(t, b.String()).Lookup("d")
}

// TestDirStreamAcrossRefresh: a listing read in parts, with a refresh
// between two parts that adds and removes names before and after where it
// stands, lists every name present in both versions exactly once (as a
// readdir on a local disk does while files come and go).
func TestDirStreamAcrossRefresh(t *testing.T) {
	var v1, v2 []string
	for i := range 600 {
		name := fmt.Sprintf("p%04d", i*2)
		v1 = append(v1, name)
		if i%7 != 3 { // some removed, before and after the cut
			v2 = append(v2, name)
		}
		if i%5 == 0 {
			v2 = append(v2, fmt.Sprintf("p%04d", i*2+1)) // some added
		}
	}
	old := &dirVersion{n: bigDir(t, v1), gen: 4}
	cur := &dirVersion{n: bigDir(t, v2), gen: 5, before: childNames(old.n)}
	seen := map[string]int{}
	s := newDirStream(old)
	var off uint64
	for range 250 { // the first part, in the old version
		e, _ := s.Readdirent(t.Context())
		seen[e.Name]++
		off = e.Off
	}
	s = newDirStream(cur) // the refresh, then the next READDIR
	if errno := s.Seekdir(t.Context(), off); errno != 0 {
		t.Fatalf("seek to %x: %v", off, errno)
	}
	for {
		e, _ := s.Readdirent(t.Context())
		if e == nil {
			break
		}
		seen[e.Name]++
	}
	in2 := map[string]bool{}
	for _, n := range v2 {
		in2[n] = true
	}
	for _, n := range v1 {
		if in2[n] && seen[n] != 1 {
			t.Errorf("%s, in both versions, listed %d times", n, seen[n])
		}
	}
	for n, k := range seen {
		if k > 1 {
			t.Errorf("%s listed %d times", n, k)
		}
	}
}
