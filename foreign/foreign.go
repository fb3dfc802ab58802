// Package foreign turns a collection written by another tool — LangChain's
// or LlamaIndex's Chroma vector store, or any loader that stores chunks with
// a path in their metadata — into chromafs path-tree entries, without
// touching a record: each file is mapped onto byte ranges of the records'
// documents (tree.Entry.Records), plus literal parts for what no record
// holds.
//
// Reassembly is honest about what it knows:
//
//   - With start offsets (LangChain's start_index, LlamaIndex's
//     start_char_idx, a custom --offset-key), every chunk is placed at its
//     offset; overlapping characters must agree (a disagreement is a
//     conflict, reported; the earlier text stays). Offsets count code points
//     (Python), UTF-16 units (JavaScript) or bytes: the unit is the one the
//     seams between chunks agree in (unit.go), and they are converted.
//     A gap between chunks (whitespace the splitter stripped) holds bytes no
//     record has: it is filled with newlines of the gap's length and the file
//     is marked.
//   - With an order only (LangChain.js's loc.lines, flattened to locFrom; a
//     custom --order-key; else LlamaIndex's PREVIOUS/NEXT links, when they
//     chain all of a file's chunks), consecutive chunks
//     are joined at their longest suffix/prefix overlap; where there is none,
//     the separator is guessed (the line numbers tell how many newlines) and
//     the file is marked.
//   - With neither, chunks are ordered by id and the file is marked
//     unordered.
//
// Every file records which of these it took (tree.Entry.Reassembly: "" for
// exact), so that a mount can say so: the sizes it serves are exact for the
// bytes it serves, and never presented as the source's when they may not be.
package foreign

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/chromafs/chromafs/tree"
)

// Record is one record of a collection.
type Record struct {
	ID   string
	Doc  string
	Meta map[string]any
}

// Unit is what offsets count.
type Unit int

// Offset units.
const (
	CodePoints Unit = iota // Python clients
	UTF16                  // JavaScript clients
	Bytes
)

// Layout says where a record's path, position and access are.
type Layout struct {
	Name      string // langchain, llamaindex, custom
	PathKey   string // metadata key naming the file (a path or a URL)
	OffsetKey string // start offset of the chunk in the file; "" for none
	// Unit is what offsets count (OffsetKey's, LlamaIndex's) where the
	// data does not tell (see chooseUnit); with FixedUnit (--offset-unit)
	// it is taken as it is.
	Unit      Unit
	FixedUnit bool
	OrderKey  string // position of the chunk among the file's; "" for none
	// LineKeys are the first and last line of a chunk (LangChain.js's
	// locFrom/locTo), used to guess a stripped separator.
	LineFrom, LineTo string
	// GroupsKey names the metadata holding a record's access groups (a
	// list, or a comma-separated string); "" makes every file public.
	GroupsKey string
	// Node reads LlamaIndex's _node_content for offsets and neighbours.
	Node bool
	// DocKeys name a record's document when it has no PathKey (LlamaIndex
	// nodes of documents not read from files): it is documents/<id>.
	DocKeys []string
	// Trims says the splitter strips white space at the edges of chunks
	// (LangChain's do): white space at the start and end of a file is
	// unknowable, so no file is exact.
	Trims bool
}

// Marks a file's reassembly may carry (tree.Entry.Reassembly).
const (
	Exact     = ""
	Joined    = "joined"    // seams found by overlap, not by offsets
	Edges     = "edges"     // the splitter strips white space at chunk edges: the file's first and last may be lost
	Gaps      = "gaps"      // bytes no record holds were filled in
	Ambiguous = "ambiguous" // repeated text: a seam could be in more than one place
	Conflict  = "conflict"  // overlapping chunks disagreed
	Unordered = "unordered" // no offsets, no order: ordered by id
)

// Report is what Build found.
type Report struct {
	Files, Records, Skipped int
	Marked                  map[string]string // display path -> mark, for files not exact
	Warnings                []string
	// Offsets says what the offsets were read in, and why.
	Offsets UnitChoice
}

// ReportPath is where a mount shows the report of files that are not exact.
const ReportPath = ".chromafs-reassembly.txt"

// sourceOf is the file a record belongs to: its PathKey, else the
// document its DocKeys name (LlamaIndex.TS writes "None" for none), as a
// URL that displayPaths maps to documents/<id>.
func sourceOf(r *Record, l Layout) (string, bool) {
	if s, ok := stringMeta(r.Meta, l.PathKey); ok && s != "" {
		return s, true
	}
	for _, k := range l.DocKeys {
		if id, ok := stringMeta(r.Meta, k); ok && id != "" && id != "None" {
			return "document://documents/" + url.PathEscape(id), true
		}
	}
	return "", false
}

// Build maps recs onto tree entries, one per file, keyed by slug (the
// display path). Records without a path are skipped and counted.
func Build(recs []Record, l Layout) (map[string]tree.Entry, Report) {
	rep := Report{Records: len(recs), Marked: map[string]string{}}
	byPath := map[string][]*chunk{}
	for i := range recs {
		r := &recs[i]
		src, ok := sourceOf(r, l)
		if !ok {
			rep.Skipped++
			continue
		}
		byPath[src] = append(byPath[src], newChunk(r, l))
	}
	rep.Offsets = chooseUnit(byPath, l)
	l.Unit = rep.Offsets.Unit
	paths := displayPaths(keys(byPath))
	entries := make(map[string]tree.Entry, len(byPath))
	for src, cs := range byPath {
		p := paths[src]
		e, mark, warn := assemble(cs, l)
		if l.Trims && mark == Exact {
			mark, e.Reassembly = Edges, Edges
		}
		e.Path = p
		entries[p] = e
		if mark != Exact {
			rep.Marked[p] = mark
		}
		for _, w := range warn {
			rep.Warnings = append(rep.Warnings, p+": "+w)
		}
	}
	rep.Files = len(entries)
	if len(rep.Marked) > 0 {
		entries[ReportPath] = reportEntry(rep)
	}
	return entries, rep
}

// reportEntry is a page made of one literal part: the list of files that
// are not exact, and why.
func reportEntry(rep Report) tree.Entry {
	var sb strings.Builder
	sb.WriteString("# Files of this collection whose bytes chromafs could not reassemble exactly\n")
	sb.WriteString("# (see chromafs docs/FORMAT.md, \"Collections written by other tools\")\n")
	if w := rep.Offsets.Warning(); w != "" {
		sb.WriteString("# " + w + "\n")
	}
	for _, p := range sortedKeys(rep.Marked) {
		fmt.Fprintf(&sb, "%s\t%s\n", rep.Marked[p], p)
	}
	return literalEntry(ReportPath, sb.String(), true, nil)
}

func literalEntry(path, text string, public bool, groups []string) tree.Entry {
	size := int64(len(text))
	sum := sha256.Sum256([]byte(text))
	d := hex.EncodeToString(sum[:])
	return tree.Entry{IsPublic: public, Groups: groups, Path: path, Size: &size, SHA256: d,
		Records: []tree.Part{{Text: text, To: size}}, Chunks: []int64{size}, ChunkSHA256: []string{d}}
}

// chunk is one record as a piece of its file.
type chunk struct {
	rec      *Record
	offset   int64 // in Layout.Unit; -1 unknown
	order    float64
	hasOrder bool
	lineFrom int64 // -1 unknown
	lineTo   int64
	groups   []string
	groupsOK bool
	// node, prev and next are LlamaIndex's node id and its neighbours'.
	node, prev, next string
}

func newChunk(r *Record, l Layout) *chunk {
	c := &chunk{rec: r, offset: -1, lineFrom: -1, lineTo: -1, groupsOK: true}
	if l.OffsetKey != "" {
		if v, ok := numberMeta(r.Meta, l.OffsetKey); ok && v >= 0 {
			c.offset = int64(v)
		}
	}
	if l.Node {
		nodeMeta(c, r)
	}
	if l.OrderKey != "" {
		c.order, c.hasOrder = numberMeta(r.Meta, l.OrderKey)
	}
	if v, ok := numberMeta(r.Meta, l.LineFrom); ok {
		c.lineFrom = int64(v)
	}
	if v, ok := numberMeta(r.Meta, l.LineTo); ok {
		c.lineTo = int64(v)
	}
	if l.GroupsKey != "" {
		c.groups, c.groupsOK = groupsMeta(r.Meta, l.GroupsKey)
	}
	return c
}

// assemble builds one file's entry from its chunks.
func assemble(cs []*chunk, l Layout) (tree.Entry, string, []string) {
	a := &assembler{unit: l.Unit}
	switch {
	case placedByOffsets(cs):
		sortByOffset(cs)
		for _, c := range cs {
			a.place(c)
		}
	case all(cs, func(c *chunk) bool { return c.hasOrder }):
		sort.SliceStable(cs, func(i, j int) bool {
			return cs[i].order < cs[j].order || cs[i].order == cs[j].order && cs[i].rec.ID < cs[j].rec.ID
		})
		for _, c := range cs {
			a.join(c)
		}
	case chained(cs):
		for _, c := range cs {
			a.join(c)
		}
	default:
		sort.SliceStable(cs, func(i, j int) bool { return cs[i].rec.ID < cs[j].rec.ID })
		for _, c := range cs {
			a.join(c)
		}
		a.mark(Unordered)
	}
	e := a.entry()
	e.IsPublic, e.Groups = access(cs, l)
	return e, a.marked, a.warnings
}

// chained orders cs by their PREVIOUS/NEXT links, when those make one
// chain through all of them (one first chunk, no branch, no loop); else
// it leaves cs as they are and reports false.
func chained(cs []*chunk) bool {
	byNode := make(map[string]*chunk, len(cs))
	for _, c := range cs {
		if c.node == "" || byNode[c.node] != nil {
			return false
		}
		byNode[c.node] = c
	}
	var first *chunk
	for _, c := range cs {
		if byNode[c.prev] == nil { // no previous chunk in this file
			if first != nil {
				return false
			}
			first = c
		}
	}
	order := make([]*chunk, 0, len(cs))
	seen := map[*chunk]bool{}
	for c := first; c != nil && !seen[c]; c = byNode[c.next] {
		if next := byNode[c.next]; next != nil && next.prev != c.node {
			return false // the links disagree: a branch
		}
		seen[c] = true
		order = append(order, c)
	}
	if len(order) != len(cs) {
		return false
	}
	copy(cs, order)
	return true
}

// access is the file's: public without a groups key or when none of its
// records names groups (as a page without access frontmatter), else the
// union of its records' groups; a malformed value anywhere fails closed
// (hidden).
func access(cs []*chunk, l Layout) (bool, []string) {
	if l.GroupsKey == "" {
		return true, nil
	}
	set := map[string]bool{}
	for _, c := range cs {
		if !c.groupsOK {
			return false, nil
		}
		for _, g := range c.groups {
			set[g] = true
		}
	}
	if len(set) == 0 {
		return true, nil
	}
	return false, sortedKeys(set)
}

func all(cs []*chunk, f func(*chunk) bool) bool {
	for _, c := range cs {
		if !f(c) {
			return false
		}
	}
	return true
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := keys(m)
	sort.Strings(out)
	return out
}

// unitsIn counts the units of s.
func unitsIn(s string, u Unit) int64 {
	switch u {
	case Bytes:
		return int64(len(s))
	case UTF16:
		var n int64
		for _, r := range s {
			n++
			if r >= 0x10000 {
				n++
			}
		}
		return n
	}
	return int64(utf8.RuneCountInString(s))
}

// byteAt is the byte offset in s of unit k (len(s) past the end). A unit in
// the middle of a surrogate pair rounds up to the next rune.
func byteAt(s string, k int64, u Unit) int {
	if u == Bytes {
		return int(min(k, int64(len(s))))
	}
	var n int64
	for i, r := range s {
		if n >= k {
			return i
		}
		n++
		if u == UTF16 && r >= 0x10000 {
			n++
		}
	}
	return len(s)
}

func shortHash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}
