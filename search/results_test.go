package search

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestReport(t *testing.T) {
	r := &Results{
		Query: Query{Text: `rotate "api" keys`, K: 5, Mode: Hybrid},
		Hits: []Hit{
			{Path: "guides/keys.md", Score: 0.0327868852459, Text: "Rotate keys.\r\nEvery 90 days.\n\n"},
			{Path: "ref/api.md", Score: 12.5, Text: "one line"},
		},
		Note: "semantic search is not available here: lexical ranking only",
	}
	want := "# chromafs search: \"rotate \\\"api\\\" keys\" mode=hybrid k=5: 2 results\n" +
		"# semantic search is not available here: lexical ranking only\n" +
		"1\t0.0327869\tguides/keys.md\n" +
		"\tRotate keys.\n" +
		"\tEvery 90 days.\n" +
		"\n" +
		"2\t12.5\tref/api.md\n" +
		"\tone line\n" +
		"\n"
	if got := string(r.Report()); got != want {
		t.Errorf("Report:\n%s\nwant:\n%s", got, want)
	}
}

func TestReportEmpty(t *testing.T) {
	r := &Results{Query: Query{Text: "nothing", K: 10, Mode: Lexical}}
	want := "# chromafs search: \"nothing\" mode=lexical k=10: 0 results\n"
	if got := string(r.Report()); got != want {
		t.Errorf("Report = %q, want %q", got, want)
	}
}

// Every line of a hit's text is indented, so a text cannot fake a result
// line of its own.
func TestReportTextCannotForgeResults(t *testing.T) {
	r := &Results{Query: Query{Text: "q", K: 10, Mode: Semantic}, Hits: []Hit{
		{Path: "a.md", Score: 1, Text: "x\n2\t1\tsecret.md\n\n3\t1\tother.md"},
	}}
	for i, line := range strings.Split(strings.TrimSuffix(string(r.Report()), "\n"), "\n") {
		if i <= 1 || line == "" {
			continue // the header and the result line
		}
		if !strings.HasPrefix(line, "\t") {
			t.Errorf("line %d %q is not indented", i, line)
		}
	}
}

func TestLinkName(t *testing.T) {
	for _, tc := range []struct {
		i, n int
		base string
		want string
	}{
		{0, 1, "a.md", "01-a.md"},
		{0, 5, "keys.md", "01-keys.md"},
		{9, 10, "x.md", "10-x.md"},
		{98, 99, "x.md", "99-x.md"},
		{0, 100, "x.md", "001-x.md"},
		{99, 100, "x.md", "100-x.md"},
		{41, 300, "y", "042-y"},
	} {
		if got := LinkName(tc.i, tc.n, tc.base); got != tc.want {
			t.Errorf("LinkName(%d, %d, %q) = %q, want %q", tc.i, tc.n, tc.base, got, tc.want)
		}
	}
}

func TestLinkNameLong(t *testing.T) {
	for _, base := range []string{
		strings.Repeat("a", 300),
		"a" + strings.Repeat("é", 200),  // 2-byte runes, cut at an odd length
		"ab" + strings.Repeat("€", 100), // 3-byte runes
		strings.Repeat("😀", 70),         // 4-byte runes
		strings.Repeat("b", 252),        // exactly 255 with "01-"
	} {
		got := LinkName(0, 10, base)
		full := "01-" + base
		switch {
		case len(got) > 255:
			t.Errorf("LinkName of a %d-byte name is %d bytes", len(base), len(got))
		case len(got) < 252 && len(full) >= 255:
			t.Errorf("LinkName of a %d-byte name cut to %d bytes: more than one rune lost", len(base), len(got))
		case !utf8.ValidString(got):
			t.Errorf("LinkName of a %d-byte name is not UTF-8: %q", len(base), got[len(got)-8:])
		case !strings.HasPrefix(full, got):
			t.Errorf("LinkName of a %d-byte name is not a prefix of %q", len(base), full)
		case len(full) <= 255 && got != full:
			t.Errorf("LinkName cut a name of %d bytes", len(full))
		}
	}
}
