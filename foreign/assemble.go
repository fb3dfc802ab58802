package foreign

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/chromafs/chromafs/tree"
)

// minJoin is the shortest suffix/prefix overlap trusted as a seam: shorter
// matches ("e", "the ") happen by chance.
const minJoin = 8

// maxJoin bounds the overlap searched for (splitters overlap by a few
// hundred characters).
const maxJoin = 4096

// assembler builds one file from its chunks, part by part.
type assembler struct {
	unit     Unit
	parts    []tree.Part
	text     strings.Builder // the content so far
	units    int64           // its length in units
	prev     *chunk
	marked   string
	warnings []string
}

// rank orders marks: the worst one is kept.
var rank = map[string]int{Exact: 0, Joined: 1, Edges: 2, Gaps: 3, Ambiguous: 4, Conflict: 5, Unordered: 6}

func (a *assembler) mark(m string) {
	if rank[m] > rank[a.marked] {
		a.marked = m
	}
}

func (a *assembler) add(p tree.Part, s string) {
	if s == "" {
		return
	}
	a.parts = append(a.parts, p)
	a.text.WriteString(s)
	a.units += unitsIn(s, a.unit)
}

func (a *assembler) literal(s string) { a.add(tree.Part{Text: s, To: int64(len(s))}, s) }

// place puts a chunk at its offset (chunks come sorted by offset).
func (a *assembler) place(c *chunk) {
	doc := c.rec.Doc
	switch {
	case c.offset > a.units: // stripped whitespace, or a missing chunk
		a.literal(strings.Repeat("\n", int(min(c.offset-a.units, 1<<20))))
		a.mark(Gaps)
	case c.offset < a.units: // an overlap: it must agree
		k := a.units - c.offset
		have := a.text.String()
		cut := byteAt(doc, k, a.unit)
		tailStart := byteAt(have, a.units-k, a.unit)
		if overlapOf := have[tailStart:]; !agrees(overlapOf, doc[:cut]) {
			a.mark(Conflict)
			a.warnings = append(a.warnings, fmt.Sprintf("record %q disagrees with the text before it at offset %d", c.rec.ID, c.offset))
		}
		if cut >= len(doc) {
			return // wholly inside what is placed
		}
		a.add(tree.Part{ID: c.rec.ID, From: int64(cut), To: int64(len(doc))}, doc[cut:])
		return
	}
	a.add(tree.Part{ID: c.rec.ID, From: 0, To: int64(len(doc))}, doc)
}

// agrees reports whether two views of the same characters are equal
// (the shorter is a prefix of the longer when one chunk ends early).
func agrees(have, got string) bool {
	if len(got) < len(have) {
		return strings.HasPrefix(have, got)
	}
	return have == got
}

// join appends a chunk after the previous one at their longest overlap,
// or after a guessed separator.
func (a *assembler) join(c *chunk) {
	doc := c.rec.Doc
	if a.prev == nil {
		a.add(tree.Part{ID: c.rec.ID, To: int64(len(doc))}, doc)
		a.prev = c
		return
	}
	have := a.text.String()
	tail := have[max(0, len(have)-maxJoin):]
	if n, ambiguous := seam(tail, doc); n >= minJoin || (n == len(doc) && n > 0) {
		a.add(tree.Part{ID: c.rec.ID, From: int64(n), To: int64(len(doc))}, doc[n:])
		a.mark(Joined)
		if ambiguous {
			a.mark(Ambiguous)
			a.warnings = append(a.warnings, fmt.Sprintf("record %q overlaps the text before it in more than one way (repeated text): the seam is a guess", c.rec.ID))
		}
	} else {
		a.literal(separator(a.prev, c))
		a.add(tree.Part{ID: c.rec.ID, To: int64(len(doc))}, doc)
		a.mark(Gaps)
	}
	a.prev = c
}

// separator guesses what a splitter stripped between two chunks: as many
// newlines as their line numbers say, else a space on the same line, else
// one newline.
func separator(prev, next *chunk) string {
	if prev.lineTo >= 0 && next.lineFrom >= 0 {
		if n := next.lineFrom - prev.lineTo; n > 0 {
			return strings.Repeat("\n", int(min(n, 1<<16)))
		} else if n == 0 {
			return " "
		}
	}
	return "\n"
}

// seam chooses where b continues a: among the prefixes of b that are
// suffixes of a and at least minJoin long, the longest that is at most
// half of b (splitters overlap chunks by less than half a chunk); it is
// ambiguous when there is more than one (repeated text).
func seam(a, b string) (int, bool) {
	k, fail := overlap(a, b)
	var cands []int
	for n := k; n > 0; n = fail[n-1] {
		if n >= minJoin || n == len(b) {
			cands = append(cands, n)
		}
	}
	switch len(cands) {
	case 0:
		return k, false
	case 1:
		return cands[0], false
	}
	for _, n := range cands {
		if n <= len(b)/2 {
			return n, true
		}
	}
	return cands[len(cands)-1], true
}

// overlap is the length of the longest prefix of b that is a suffix of a,
// and b's failure function (Knuth–Morris–Pratt's, run along a).
func overlap(a, b string) (int, []int) {
	b = b[:min(len(b), len(a))]
	if b == "" {
		return 0, nil
	}
	fail := make([]int, len(b))
	for i, k := 1, 0; i < len(b); i++ {
		for k > 0 && b[i] != b[k] {
			k = fail[k-1]
		}
		if b[i] == b[k] {
			k++
		}
		fail[i] = k
	}
	k := 0
	for i := 0; i < len(a); i++ {
		for k > 0 && (k == len(b) || a[i] != b[k]) {
			k = fail[k-1]
		}
		if a[i] == b[k] {
			k++
		}
	}
	return k, fail
}

// entry is the tree entry of the assembled file.
func (a *assembler) entry() tree.Entry {
	text := a.text.String()
	size := int64(len(text))
	sum := sha256.Sum256([]byte(text))
	e := tree.Entry{Size: &size, SHA256: hex.EncodeToString(sum[:]), Records: a.parts, Reassembly: a.marked}
	e.Chunks = make([]int64, len(a.parts))
	e.ChunkSHA256 = make([]string, len(a.parts))
	off := 0
	for i, p := range a.parts {
		n := int(p.To - p.From)
		ps := sha256.Sum256([]byte(text[off : off+n]))
		e.Chunks[i], e.ChunkSHA256[i] = int64(n), hex.EncodeToString(ps[:])
		off += n
	}
	if len(a.parts) == 0 {
		e.Records, e.Chunks, e.ChunkSHA256 = nil, []int64{}, nil
	}
	return e
}
