package search

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Hit is one ranked page.
type Hit struct {
	Path  string  // the page's path in the mount
	Score float64 // higher is better; see the mode
	Text  string  // the page's best-matching passage
	// Line is the line of the page Text begins on; 0 when unknown, -1
	// when unknown and not to be looked for (see Searcher.locate).
	Line int
}

// Results are a search's ranked pages, best first.
type Results struct {
	Query Query // for Similar, Text is the page's path
	Hits  []Hit
	// Note is a remark for .results (how hybrid ran, for one).
	Note string
	// partial marks an answer that is not kept (hybrid without its
	// lexical half while the index builds).
	partial bool
}

// bytes is about what r holds in memory.
func (r *Results) bytes() int64 {
	n := int64(len(r.Query.Text) + len(r.Note) + 64)
	for _, h := range r.Hits {
		n += int64(len(h.Path) + len(h.Text) + 48)
	}
	return n
}

// Report is the .results file:
//
//	# chromafs search: "QUERY" mode=MODE k=K: N results
//	RANK<TAB>SCORE<TAB>PATH
//	<TAB>PATH:LINE: one of the 1-3 lines of the passage that match best
//	(an empty line)
//
// A result's lines are grep -n's (after the tab that marks them; "PATH:
// TEXT" when the line number is unknown), each at most 200 characters of
// the page, a result at most 900 bytes with its rank line, so ten results
// stay under 10 KiB: the whole page is one cat of the result's link
// away. Without snippets (?snippets=0) a result is its first line alone.
// Paths and text show control characters as U+FFFD, so nothing a page
// holds reads as a line of the report's own.
//
// Scores: semantic and similar 1 − Chroma's distance, lexical BM25,
// hybrid reciprocal rank fusion.
func (r *Results) Report() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# chromafs search: %s mode=%s k=%d: %d results\n", strconv.Quote(r.Query.Text), r.Query.Mode, r.Query.K, len(r.Hits))
	if r.Note != "" {
		fmt.Fprintf(&b, "# %s\n", r.Note)
	}
	terms := r.Query.Text
	if r.Query.Mode == Similar {
		terms = "" // a page's path, not words to match: the passage's first lines
	}
	for i, h := range r.Hits {
		rank := fmt.Sprintf("%d\t%.6g\t%s\n", i+1, h.Score, shown(h.Path))
		b.WriteString(rank)
		if !r.Query.NoSnippets {
			b.WriteString(fitSnippets(h.Path, snippets(terms, h.Text, h.Line), maxResultBytes-len(rank)-1))
		}
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// LinkName is the name of result i (0-based) of a search for k: "01-name",
// with as many digits as k needs (at least two); a name that would pass 255 bytes
// loses bytes of its end (on a UTF-8 boundary).
func LinkName(i, k int, base string) string {
	width := max(2, len(strconv.Itoa(k)))
	name := fmt.Sprintf("%0*d-%s", width, i+1, base)
	for len(name) > 255 {
		_, size := utf8.DecodeLastRuneInString(name)
		name = name[:len(name)-size]
	}
	return name
}
