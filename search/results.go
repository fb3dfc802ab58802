package search

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Hit is one ranked page.
type Hit struct {
	Path  string  // the page's path in the mount
	Score float64 // higher is better; see the mode
	Text  string  // the page's best-matching chunk
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
//	<TAB>each line of the best-matching chunk
//	(an empty line)
//
// Scores: semantic and similar 1 − Chroma's distance, lexical BM25,
// hybrid reciprocal rank fusion.
func (r *Results) Report() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# chromafs search: %s mode=%s k=%d: %d results\n", strconv.Quote(r.Query.Text), r.Query.Mode, r.Query.K, len(r.Hits))
	if r.Note != "" {
		fmt.Fprintf(&b, "# %s\n", r.Note)
	}
	for i, h := range r.Hits {
		fmt.Fprintf(&b, "%d\t%.6g\t%s\n", i+1, h.Score, h.Path)
		text := strings.TrimRight(h.Text, "\n")
		for line := range strings.SplitSeq(text, "\n") {
			b.WriteByte('\t')
			b.WriteString(strings.TrimRight(line, "\r"))
			b.WriteByte('\n')
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
