package search

import (
	"bytes"
	"context"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/chromafs/chromafs/lexical"
	"github.com/chromafs/chromafs/tree"
)

// What a result shows of its page (.results): an agent pays for every
// byte it reads, so a result is its rank, score and path and the few lines
// of its passage that match the query best, numbered as grep -n numbers
// them; the whole page is one cat of the result's link away.
const (
	// maxSnippetLines is the most lines a result shows.
	maxSnippetLines = 3
	// maxSnippetRunes bounds the text of one line shown (characters).
	maxSnippetRunes = 200
	// maxResultBytes bounds a result in .results, its rank line, the
	// lines it shows (path and line numbers included) and the empty line
	// after it: ten results and the header (a query is at most 255 bytes)
	// stay under 10 KiB, unless a path alone is longer.
	maxResultBytes = 900
)

// Snippet is one line of a page shown in a result.
type Snippet struct {
	Line int    // from 1; 0 when the passage's place in its page is unknown
	Text string // at most maxSnippetRunes characters, "…" ending a cut one
}

// snippets picks the lines of text (a passage of a page whose first byte
// is on line first, 0 when unknown) that hold the most distinct words of
// the query (stemmed as the lexical index stems them), at most
// maxSnippetLines, in page order; when no line holds one (a semantic hit
// matches by meaning), the passage's first lines that are not blank.
func snippets(query, text string, first int) []Snippet {
	terms := map[string]bool{}
	for _, w := range lexical.Tokenize(query) {
		terms[w] = true
	}
	type line struct {
		no, score int
		text      string
	}
	var lines []line
	for i, l := range strings.Split(text, "\n") {
		l = strings.TrimRight(l, "\r")
		if strings.TrimSpace(l) == "" {
			continue
		}
		seen := map[string]bool{}
		for _, w := range lexical.Tokenize(l) {
			if terms[w] {
				seen[w] = true
			}
		}
		no := 0
		if first > 0 {
			no = first + i
		}
		lines = append(lines, line{no, len(seen), l})
	}
	// the best lines: most terms, earlier first; kept in page order
	best := make([]int, 0, maxSnippetLines)
	for range maxSnippetLines {
		pick := -1
		for i, l := range lines {
			if l.score > 0 && !slices.Contains(best, i) && (pick < 0 || l.score > lines[pick].score) {
				pick = i
			}
		}
		if pick < 0 {
			break
		}
		best = append(best, pick)
	}
	if len(best) == 0 { // nothing matched word for word: how the passage begins
		for i := range min(2, len(lines)) {
			best = append(best, i)
		}
	}
	slices.Sort(best)
	out := make([]Snippet, 0, len(best))
	for _, i := range best {
		out = append(out, Snippet{Line: lines[i].no, Text: cutRunes(lines[i].text, maxSnippetRunes)})
	}
	return out
}

// cutRunes is s cut to at most n characters, "…" the last when cut;
// invalid UTF-8 and every control character but the tab are shown as
// U+FFFD (see shown).
func cutRunes(s string, n int) string {
	s = shown(s)
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i, count := 0, 0
	for j := range s {
		if count == n-1 {
			i = j
			break
		}
		count++
	}
	return s[:i] + "…"
}

// shown is s as .results may show it: invalid UTF-8, control characters
// other than the tab (a lone CR, VT, FF, the file, group and record
// separators, C1's NEL) and the line and paragraph separators become
// U+FFFD, so that no reader splitting lines its own way (a lone CR,
// Python's splitlines) finds a line the report did not make.
func shown(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if !strings.ContainsFunc(s, unsafeRune) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if unsafeRune(r) {
			return '\uFFFD'
		}
		return r
	}, s)
}

func unsafeRune(r rune) bool {
	return r != '\t' && (r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0 || r == '\u2028' || r == '\u2029')
}

// snippetLine formats one line shown as grep -n does with a file name,
// after the tab that marks a result's lines: "\tPATH:LINE: TEXT" ("PATH:
// TEXT" when the line number is unknown).
func snippetLine(path string, s Snippet) string {
	path = shown(path)
	if s.Line > 0 {
		return "\t" + path + ":" + strconv.Itoa(s.Line) + ": " + s.Text + "\n"
	}
	return "\t" + path + ": " + s.Text + "\n"
}

// fitSnippets formats a result's lines within room bytes: lines are
// dropped from the end, and a first line still too long (a very long
// path) loses text, so a result never passes the bound by more than its
// path.
func fitSnippets(path string, ss []Snippet, room int) string {
	var b strings.Builder
	for _, s := range ss {
		l := snippetLine(path, s)
		if b.Len()+len(l) > room {
			if b.Len() > 0 {
				break
			}
			room := room - (len(l) - len(s.Text))
			s.Text = cutBytes(s.Text, max(room, 0))
			l = snippetLine(path, s)
		}
		b.WriteString(l)
	}
	return b.String()
}

// cutBytes is s cut to at most n bytes on a character boundary.
func cutBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// locate sets the line number of each hit whose passage's place in its
// page is not known (Line 0: a semantic hit of a chunk without
// chunk_line, written by another tool or by a chromafs-ingest before it
// wrote one): it reads the page (through the tiers, as a cat of the
// result would; within maxLocatedBytes for the whole search) and finds
// the passage in it. A page that cannot be read, or does not hold the
// passage, leaves the hit's lines unnumbered.
func (s *Searcher) locate(ctx context.Context, t *tree.Tree, hits []Hit) {
	budget := int64(maxLocatedBytes)
	for i := range hits {
		h := &hits[i]
		if h.Line != 0 || h.Text == "" {
			continue
		}
		n := t.Lookup(h.Path)
		if n == nil || n.File == nil {
			continue
		}
		if err := s.cfg.Reader.EnsureSize(ctx, n); err != nil {
			continue
		}
		size, _ := n.File.Size()
		if size <= 0 || size > budget {
			continue
		}
		budget -= size
		page, err := readRange(ctx, s.cfg.Reader, n.File, 0, size)
		if err != nil {
			s.cfg.Log.Debug("search: a result's page could not be read to number its lines", "path", h.Path, "err", err)
			continue
		}
		if off := bytes.Index(page, []byte(h.Text)); off >= 0 {
			h.Line = 1 + bytes.Count(page[:off], []byte{'\n'})
		}
	}
}

// maxLocatedBytes bounds what locate reads for one search's results.
const maxLocatedBytes = 4 << 20
