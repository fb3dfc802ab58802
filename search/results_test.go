package search

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestReport(t *testing.T) {
	r := &Results{
		Query: Query{Text: `rotate "api" keys`, K: 5, Mode: Hybrid},
		Hits: []Hit{
			{Path: "guides/keys.md", Score: 0.0327868852459, Text: "Rotate keys.\r\nEvery 90 days.\n\n", Line: 7},
			{Path: "ref/api.md", Score: 12.5, Text: "one line"},
		},
		Note: "semantic search is not available here: lexical ranking only",
	}
	want := "# chromafs search: \"rotate \\\"api\\\" keys\" mode=hybrid k=5: 2 results\n" +
		"# semantic search is not available here: lexical ranking only\n" +
		"1\t0.0327869\tguides/keys.md\n" +
		"\tguides/keys.md:7: Rotate keys.\n" + // the line that holds query words
		"\n" +
		"2\t12.5\tref/api.md\n" +
		"\tref/api.md: one line\n" + // no word matches: how it begins; no line number known
		"\n"
	if got := string(r.Report()); got != want {
		t.Errorf("Report:\n%s\nwant:\n%s", got, want)
	}
	r.Query.NoSnippets = true
	want = "# chromafs search: \"rotate \\\"api\\\" keys\" mode=hybrid k=5: 2 results\n" +
		"# semantic search is not available here: lexical ranking only\n" +
		"1\t0.0327869\tguides/keys.md\n\n" +
		"2\t12.5\tref/api.md\n\n"
	if got := string(r.Report()); got != want {
		t.Errorf("Report with snippets=0:\n%s\nwant:\n%s", got, want)
	}
}

// TestSnippets: the 1-3 lines of a passage holding the most query words
// (stemmed), in page order, numbered from the passage's first line; the
// first lines not blank when none holds one; each cut to 200 characters.
func TestSnippets(t *testing.T) {
	text := "# Timers\n\nA timer fires once.\nCallbacks run in order of their deadlines.\n" +
		"Unrelated line.\nTimers order callbacks by deadline, then by creation.\nThe end.\n"
	got := snippets("how do timers order their callbacks", text, 40)
	want := []Snippet{{40, "# Timers"}, {43, "Callbacks run in order of their deadlines."}, {45, "Timers order callbacks by deadline, then by creation."}}
	if !slices.Equal(got, want) {
		t.Errorf("snippets = %+v, want %+v", got, want)
	}
	if got := snippets("zebra", "\n\nfirst\nsecond\nthird\n", 1); !slices.Equal(got, []Snippet{{3, "first"}, {4, "second"}}) {
		t.Errorf("no word matches: %+v, want the first two lines not blank", got)
	}
	if got := snippets("zebra", "", 1); len(got) != 0 {
		t.Errorf("an empty passage shows %+v", got)
	}
	long := strings.Repeat("é", 500) + " zebra"
	got = snippets("zebra", long, 0)
	if len(got) != 1 || got[0].Line != 0 || utf8.RuneCountInString(got[0].Text) != maxSnippetRunes || !strings.HasSuffix(got[0].Text, "…") {
		t.Errorf("a long line: %d characters %+v", utf8.RuneCountInString(got[0].Text), got)
	}
	if got := snippets("x", "x \xff\xfe x", 1); !utf8.ValidString(got[0].Text) {
		t.Errorf("invalid UTF-8 shown as is: %q", got[0].Text)
	}
}

// TestReportAffordable: ten results of 8 KiB passages, every line a match
// and very long, stay under 10 KiB, in ASCII and in three-byte
// characters; each result (its rank line included) within 900 bytes,
// but for a path longer than that.
func TestReportAffordable(t *testing.T) {
	for _, word := range []string{"rotate", "回転"} {
		line := strings.Repeat(word+" the api keys every ninety days ", 12) + "\n"
		passage := strings.Repeat(line, 8<<10/len(line))
		r := &Results{Query: Query{Text: word + " api keys", K: 10, Mode: Hybrid}}
		for i := range 10 {
			r.Hits = append(r.Hits, Hit{Path: fmt.Sprintf("guides/security/key-rotation-%02d.md", i), Score: 1, Text: passage, Line: 100})
		}
		out := string(r.Report())
		if len(out) >= 10<<10 {
			t.Errorf("%s: 10 results of 8 KiB passages: .results is %d bytes, want < 10 KiB", word, len(out))
		}
		blocks := strings.Split(strings.SplitN(out, "\n", 2)[1], "\n\n")
		for i, h := range r.Hits {
			if n := strings.Count(blocks[i], "\t"+h.Path+":"); n < 2 || n > maxSnippetLines {
				t.Errorf("%s: %s shows %d lines, want 2 or 3", word, h.Path, n)
			}
			if len(blocks[i])+2 > maxResultBytes {
				t.Errorf("%s: result %d is %d bytes, want at most %d", word, i+1, len(blocks[i])+2, maxResultBytes)
			}
		}
		huge := strings.Repeat("d/", 500) + "p.md"
		got := fitSnippets(huge, snippets(word, passage, 1), 900)
		if !strings.HasPrefix(got, "\t"+huge+":1: ") || strings.Count(got, "\n") != 1 || len(got) > len(huge)+12 {
			t.Errorf("%s: a result with a 1,000-byte path: %q", word, got)
		}
	}
}

// A result's lines are indented and begin with its own path, so a page's
// text cannot fake a result line of its own: not by a newline, nor by
// what other readers take for one (a lone CR, VT, FF, NEL, U+2028), nor by
// a path that holds a newline.
func TestReportTextCannotForgeResults(t *testing.T) {
	r := &Results{Query: Query{Text: "secret other", K: 10, Mode: Semantic}, Hits: []Hit{
		{Path: "a.md", Score: 1, Text: "x\n2\t1\tsecret.md\n\n3\t1\tother.md secret\r4\t1\tcr.md\v\f\u0085\u2028\u2029\x1c other", Line: 1},
		{Path: "b\n5\t1\tforged.md", Score: 0.5, Text: "secret", Line: 1},
	}}
	rep := string(r.Report())
	for _, c := range []string{"\r", "\v", "\f", "\u0085", "\u2028", "\u2029", "\x1c"} {
		if strings.Contains(rep, c) {
			t.Errorf(".results holds %q:\n%q", c, rep)
		}
	}
	if strings.Contains(rep, "\n5\t") {
		t.Errorf("a path forges a result line:\n%q", rep)
	}
	for i, line := range strings.Split(strings.TrimSuffix(rep, "\n"), "\n") {
		if i <= 1 || line == "" {
			continue // the header and the result line
		}
		if !strings.HasPrefix(line, "\ta.md:") && !strings.HasPrefix(line, "\tb\uFFFD5\t1\tforged.md:") && !strings.HasPrefix(line, "2\t0.5\tb\uFFFD5") {
			t.Errorf("line %d %q is not one of a.md's or b's, indented", i, line)
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

// TestSemanticLines: a semantic hit's lines are numbered from its chunk's
// chunk_line without reading its page; without one, the page is read and
// the passage found in it (its first line's number); a passage the page
// does not hold stays unnumbered. Lexical hits are numbered from their
// passage's offset.
func TestSemanticLines(t *testing.T) {
	tr := treeOf(t, corpus)
	vec := &fakeVectors{near: func(ctx context.Context, c nearCall) ([][]Neighbor, error) {
		return [][]Neighbor{{
			{ID: "k#1", Page: "guides/keys", Distance: 0.1, Text: "To rotate a key, open the console and revoke it.\n"},
			{ID: "t#0", Page: "guides/tokens", Distance: 0.2, Text: "Tokens expire after an hour.", Line: 12},
			{ID: "a#0", Page: "ref/api", Distance: 0.3, Text: "not in the page"},
		}}, nil
	}}
	rd := newReader(corpus)
	s := newSearcher(t, Config{Reader: rd, Vectors: vec, Embedder: &fakeEmbedder{}})
	r := mustSearch(t, s, tr, "rotate keys?mode=semantic&k=5")
	lines := map[string]int{}
	for _, h := range r.Hits {
		lines[h.Path] = h.Line
	}
	if want := map[string]int{"guides/keys.md": 2, "guides/tokens.md": 12, "ref/api.md": 0}; !reflect.DeepEqual(lines, want) {
		t.Errorf("lines %v, want %v", lines, want)
	}
	if _, reads, _ := rd.counts(); reads["guides/tokens"] != 0 || reads["guides/keys"] == 0 {
		t.Errorf("reads %v: the page with chunk_line was read, or the one without was not", reads)
	}
	if rep := string(r.Report()); !strings.Contains(rep, "\tguides/keys.md:2: To rotate a key, open the console and revoke it.\n") ||
		!strings.Contains(rep, "\tref/api.md: not in the page\n") {
		t.Errorf(".results:\n%s", rep)
	}
	lex := mustSearch(t, s, tr, "revoke console?mode=lexical&k=1")
	if len(lex.Hits) != 1 || lex.Hits[0].Path != "guides/keys.md" || lex.Hits[0].Line != 2 {
		t.Errorf("lexical hits %+v, want guides/keys.md from line 2", lex.Hits)
	}
	// snippets=0 is answered from the same results, paths only
	bare := mustSearch(t, s, tr, "rotate keys?mode=semantic&k=5&snippets=0")
	if st := s.Stats(); st.ChromaQueries != 1 || strings.Contains(string(bare.Report()), "guides/keys.md:") || !strings.Contains(string(bare.Report()), "\tguides/keys.md\n") {
		t.Errorf("snippets=0: %d Chroma queries in all; .results:\n%s", st.ChromaQueries, bare.Report())
	}
	if !strings.Contains(string(r.Report()), "guides/keys.md:2:") {
		t.Error("the kept results lost their snippets to the snippets=0 answer")
	}
}
