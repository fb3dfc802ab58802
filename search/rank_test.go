package search

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/chromafs/chromafs/tree"
)

// foldPages: four public pages, one hidden, one mapped onto another
// tool's records r1 and r2.
var foldPages = []pg{
	{slug: "a", path: "docs/a.md", text: "page a"},
	{slug: "b", path: "docs/b.md", text: "page b"},
	{slug: "c", path: "c.md", text: "page c"},
	{slug: "nosha", path: "nosha.md", text: "no digest", noSHA: true},
	{slug: "secret", path: "secret.md", text: "hidden", groups: []string{"admin"}},
	{slug: "mapped", path: "mapped.md", text: "mappedtext", records: []tree.Part{{ID: "r1", From: 0, To: 6}, {ID: "r2", From: 2, To: 6}}},
}

func TestFold(t *testing.T) {
	tr := treeOf(t, foldPages)
	st := newState(tr)
	sha := func(slug string) string {
		for _, p := range foldPages {
			if p.slug == slug {
				return digestOf(p.text)
			}
		}
		panic(slug)
	}
	for _, tc := range []struct {
		name   string
		groups [][]Neighbor
		k      int
		skip   string
		want   []Hit
	}{{
		name: "best chunk per page",
		groups: [][]Neighbor{{
			{ID: "a#0", Page: "a", Distance: 0.3, Text: "a0"},
			{ID: "a#1", Page: "a", Distance: 0.1, Text: "a1"},
			{ID: "b#0", Page: "b", Distance: 0.2, Text: "b0"},
		}},
		k:    10,
		want: []Hit{{"docs/a.md", 0.9, "a1", 0}, {"docs/b.md", 0.8, "b0", 0}},
	}, {
		name: "best chunk over every group",
		groups: [][]Neighbor{
			{{ID: "a#0", Page: "a", Distance: 0.5, Text: "a0"}, {ID: "b#0", Page: "b", Distance: 0.4, Text: "b0"}},
			{{ID: "a#1", Page: "a", Distance: 0.05, Text: "a1"}},
		},
		k:    10,
		want: []Hit{{"docs/a.md", 0.95, "a1", 0}, {"docs/b.md", 0.6, "b0", 0}},
	}, {
		name: "a page the view does not show is dropped",
		groups: [][]Neighbor{{
			{ID: "s#0", Page: "secret", Distance: 0, Text: "hidden"},
			{ID: "x#0", Page: "gone", Distance: 0, Text: "no such page"},
			{ID: "c#0", Page: "c", Distance: 0.5, Text: "c0"},
		}},
		k:    10,
		want: []Hit{{"c.md", 0.5, "c0", 0}},
	}, {
		name: "a chunk of another version of the page is dropped",
		groups: [][]Neighbor{{
			{ID: "a#0", Page: "a", PageSHA: digestOf("old a"), Distance: 0.01, Text: "old"},
			{ID: "a#1", Page: "a", PageSHA: sha("a"), Distance: 0.2, Text: "current"},
			{ID: "b#0", Page: "b", PageSHA: digestOf("old b"), Distance: 0.01, Text: "old"},
			{ID: "c#0", Page: "c", Distance: 0.3, Text: "no sha: kept"},
			{ID: "n#0", Page: "nosha", PageSHA: digestOf("whatever"), Distance: 0.4, Text: "page without sha: kept"},
		}},
		k:    10,
		want: []Hit{{"docs/a.md", 0.8, "current", 0}, {"c.md", 0.7, "no sha: kept", 0}, {"nosha.md", 0.6, "page without sha: kept", 0}},
	}, {
		name: "ties by path",
		groups: [][]Neighbor{{
			{ID: "c#0", Page: "c", Distance: 0.25, Text: "c"},
			{ID: "b#0", Page: "b", Distance: 0.25, Text: "b"},
			{ID: "a#0", Page: "a", Distance: 0.25, Text: "a"},
		}},
		k:    10,
		want: []Hit{{"c.md", 0.75, "c", 0}, {"docs/a.md", 0.75, "a", 0}, {"docs/b.md", 0.75, "b", 0}},
	}, {
		name: "k best",
		groups: [][]Neighbor{{
			{ID: "c#0", Page: "c", Distance: 0.3, Text: "c"},
			{ID: "b#0", Page: "b", Distance: 0.2, Text: "b"},
			{ID: "a#0", Page: "a", Distance: 0.1, Text: "a"},
		}},
		k:    2,
		want: []Hit{{"docs/a.md", 0.9, "a", 0}, {"docs/b.md", 0.8, "b", 0}},
	}, {
		name: "the skipped page is excluded",
		groups: [][]Neighbor{{
			{ID: "a#0", Page: "a", Distance: 0, Text: "itself"},
			{ID: "b#0", Page: "b", Distance: 0.2, Text: "b"},
		}},
		k:    10,
		skip: "docs/a.md",
		want: []Hit{{"docs/b.md", 0.8, "b", 0}},
	}, {
		name: "records map onto their page by id",
		groups: [][]Neighbor{{
			{ID: "r2", Distance: 0.3, Text: "r2"},
			{ID: "r1", Distance: 0.2, Text: "r1"},
			{ID: "unknown", Distance: 0, Text: "no page"},
			{ID: "a#0", Distance: 0, Text: "no page metadata, not a record id"},
		}},
		k:    10,
		want: []Hit{{"mapped.md", 0.8, "r1", 0}},
	}, {
		name:   "nothing",
		groups: [][]Neighbor{{}, nil},
		k:      10,
		want:   []Hit{},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var skip *tree.Node
			if tc.skip != "" {
				if skip = tr.Lookup(tc.skip); skip == nil {
					t.Fatalf("no %s", tc.skip)
				}
			}
			got := st.fold(tc.groups, tc.k, skip)
			if !hitsNear(got, tc.want) {
				t.Errorf("fold =\n%v\nwant\n%v", got, tc.want)
			}
		})
	}
}

// hitsNear: the same paths and texts, scores within float error.
func hitsNear(a, b []Hit) bool {
	return slices.EqualFunc(a, b, func(x, y Hit) bool {
		return x.Path == y.Path && x.Text == y.Text && math.Abs(x.Score-y.Score) < 1e-12
	})
}

func TestFuse(t *testing.T) {
	lex := []Hit{{"a", 10, "lex a", 0}, {"b", 9, "lex b", 0}, {"c", 8, "lex c", 0}}
	sem := []Hit{{"b", 0.9, "sem b", 0}, {"d", 0.8, "sem d", 0}}
	got := fuse(10, lex, sem)
	want := []Hit{
		{"b", 1.0/62 + 1.0/61, "sem b", 0}, // rank 1 semantic beats rank 2 lexical: its text
		{"a", 1.0 / 61, "lex a", 0},
		{"d", 1.0 / 62, "sem d", 0},
		{"c", 1.0 / 63, "lex c", 0},
	}
	if !hitsNear(got, want) {
		t.Errorf("fuse =\n%v\nwant\n%v", got, want)
	}
	if got := fuse(2, lex, sem); !hitsNear(got, want[:2]) {
		t.Errorf("fuse k=2 = %v, want %v", got, want[:2])
	}

	// The text comes from the ranking that placed the page higher,
	// whichever comes first.
	got = fuse(10, []Hit{{"x", 1, "first list, rank 3", 0}, {"y", 1, "", 0}, {"p", 1, "lex p", 0}}, []Hit{{"p", 1, "second list, rank 1", 0}})
	if got[0].Path != "p" || got[0].Text != "second list, rank 1" {
		t.Errorf("fuse: top %+v, want p with the second list's text", got[0])
	}
	if want := 1.0/63 + 1.0/61; math.Abs(got[0].Score-want) > 1e-15 {
		t.Errorf("p scores %v, want %v", got[0].Score, want)
	}

	// Equal scores rank by path.
	got = fuse(10, []Hit{{"z", 0, "", 0}, {"m", 0, "", 0}}, []Hit{{"m", 0, "", 0}, {"z", 0, "", 0}})
	if got[0].Path != "m" || got[1].Path != "z" || got[0].Score != got[1].Score {
		t.Errorf("fuse of mirrored rankings = %v, want m then z with equal scores", got)
	}
	if got := fuse(10); len(got) != 0 {
		t.Errorf("fuse of nothing = %v", got)
	}
}

func TestScope(t *testing.T) {
	pages := func(n int, hidden int) []pg {
		var ps []pg
		for i := range n {
			ps = append(ps, pg{slug: fmt.Sprintf("p%05d", i), text: "x"})
		}
		for i := range hidden {
			ps = append(ps, pg{slug: fmt.Sprintf("h%05d", i), text: "y", groups: []string{"admin"}})
		}
		return ps
	}
	slugs := func(prefix string, n int) []string {
		var out []string
		for i := range n {
			out = append(out, fmt.Sprintf("%s%05d", prefix, i))
		}
		return out
	}
	unknownHidden := func(tr *tree.Tree) *tree.Tree {
		t2, err := tree.FromSnapshot(tr.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		if !t2.HiddenKnown || !slices.Equal(t2.Hidden, tr.Hidden) {
			t.Fatal("a tree from a snapshot does not know its hidden pages")
		}
		t2.Hidden, t2.HiddenKnown = nil, false // as a tree that does not know them
		return t2
	}
	for _, tc := range []struct {
		name      string
		tr        func() *tree.Tree
		in, notIn []string
		exact     bool
	}{
		{name: "nothing hidden", tr: func() *tree.Tree { return treeOf(t, pages(5, 0)) }, exact: true},
		{name: "hidden slugs", tr: func() *tree.Tree { return treeOf(t, pages(5, 3)) }, notIn: slugs("h", 3), exact: true},
		{name: "the admin sees all", tr: func() *tree.Tree { return treeOf(t, pages(5, 3), "admin") }, exact: true},
		{name: "hidden unknown: the visible slugs", tr: func() *tree.Tree { return unknownHidden(treeOf(t, pages(5, 3))) }, in: slugs("p", 5), exact: true},
		{name: "many hidden: the visible slugs", tr: func() *tree.Tree { return treeOf(t, pages(5, maxFilterSlugs+1)) }, in: slugs("p", 5), exact: true},
		{name: "hidden unknown, many visible: no filter", tr: func() *tree.Tree { return unknownHidden(treeOf(t, pages(maxFilterSlugs+1, 3))) }},
		{name: "many of both: no filter", tr: func() *tree.Tree { return treeOf(t, pages(maxFilterSlugs+1, maxFilterSlugs+1)) }},
		{name: "at the bound: a filter", tr: func() *tree.Tree { return treeOf(t, pages(2, maxFilterSlugs)) }, notIn: slugs("h", maxFilterSlugs), exact: true},
		{name: "mapped records: no filter", tr: func() *tree.Tree { return treeOf(t, foldPages) }},
		{name: "mapped records, nothing hidden", tr: func() *tree.Tree { return treeOf(t, foldPages, "admin") }, exact: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := newState(tc.tr())
			if !slices.Equal(st.in, tc.in) || !slices.Equal(st.notIn, tc.notIn) || st.exact != tc.exact {
				t.Errorf("scope: in %s, notIn %s, exact %v; want in %s, notIn %s, exact %v",
					short(st.in), short(st.notIn), st.exact, short(tc.in), short(tc.notIn), tc.exact)
			}
			if st.in != nil && st.notIn != nil {
				t.Error("both filters set")
			}
		})
	}
}

func short(s []string) string {
	if len(s) > 6 {
		return fmt.Sprintf("%v... (%d)", s[:6], len(s))
	}
	return fmt.Sprint(s)
}

func TestPassages(t *testing.T) {
	file := func(chunks ...int64) *tree.File { return &tree.File{Chunks: chunks} }
	// Chunks that add up are the passages; empty chunks are skipped.
	data := []byte("aaaabbcccccc")
	if got, want := passages(file(4, 0, 2, 6), data), []span{{0, 4}, {4, 2}, {6, 6}}; !reflect.DeepEqual(got, want) {
		t.Errorf("passages by chunks = %v, want %v", got, want)
	}
	// Chunks that do not add up are ignored.
	if got, want := passages(file(4, 2), data), []span{{0, 12}}; !reflect.DeepEqual(got, want) {
		t.Errorf("passages by wrong chunks = %v, want %v", got, want)
	}

	// Unknown chunks: pieces end at a line break, at most
	// maxPassageBytes (plus a rune's tail), on a UTF-8 boundary.
	var b strings.Builder
	for i := 0; b.Len() < 40<<10; i++ {
		fmt.Fprintf(&b, "line %d of the page, with ünïcödé to cut %s\n", i, strings.Repeat("€", i%50))
	}
	b.WriteString(strings.Repeat("€", 5000)) // a long last line, no break
	for _, data := range [][]byte{[]byte(b.String()), []byte(strings.Repeat("é", 9000)), []byte("short"), {}} {
		sp := passages(file(), data)
		off := int64(0)
		for i, s := range sp {
			end := s.off + s.n
			switch {
			case s.off != off:
				t.Fatalf("passage %d starts at %d, want %d", i, s.off, off)
			case s.n <= 0:
				t.Fatalf("passage %d is empty", i)
			case s.n > maxPassageBytes+utf8.UTFMax:
				t.Fatalf("passage %d is %d bytes", i, s.n)
			case !utf8.Valid(data[s.off:end]):
				t.Fatalf("passage %d [%d, %d) is cut inside a rune", i, s.off, end)
			case end < int64(len(data)) && data[end-1] != '\n' && s.n < maxPassageBytes:
				t.Fatalf("passage %d [%d, %d) ends mid-line", i, s.off, end)
			}
			off = end
		}
		if off != int64(len(data)) {
			t.Fatalf("passages cover %d of %d bytes", off, len(data))
		}
	}
}
