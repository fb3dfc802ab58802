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
// The list of such files a mount shows (tree.ReportPath) is written by
// tree.BuildVisible for each view from the files it shows: Build stores no
// report among the entries, since one list for every view would name files
// a view may not see.
//
// Access (Layout.GroupsKeys) is decided per record and a file takes the
// strictest of its records': a view sees a file only when it may see every
// record the file is made of. Records are grouped into files by a metadata
// value a client may choose (a path key), and a file's chunks may be
// labelled differently, so the union of their groups would show a record to
// a view that may not see it (issue 28). A file is public when no record
// names groups (under any key); otherwise its groups are the intersection
// of the group sets its records name (a record naming none restricts
// nothing), and a view holding one of them holds a group of every set. An
// empty intersection hides the file from every view, and a malformed value
// anywhere hides it too. This is stricter than "every record visible" (a
// view holding a of {a, b} and c of {c} sees both records, yet no group is
// in both sets): it hides, never reveals. Records of one file that
// disagree on their groups are reported.
package foreign

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
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
	// GroupsKeys name the metadata holding a record's access groups (a
	// list, or a comma-separated string); none makes every file public.
	// With more than one (a view's key and the one an index was written
	// with), a record is restricted by each: a file's groups are those
	// every set names (see the package doc), so a mismatch of keys hides,
	// never reveals.
	GroupsKeys []string
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

// Report is what Build found, in the whole collection: for the operator
// (index's summary, a mount's log), never served to a view (a view's list
// of inexact files is tree.ReportPath's, of the files it shows).
type Report struct {
	Files, Records, Skipped int
	Marked                  map[string]string // display path -> mark, for files not exact
	Warnings                []string          // "path: what", reassembly's and access's
	// Disagree counts the files whose records disagree on their groups
	// (each has a warning): they are shown only where every record is.
	Disagree int
	// Offsets says what the offsets were read in, and why.
	Offsets UnitChoice
}

// ReportPath is where a mount shows the report of the files it shows that
// are not exact: tree.ReportPath, written per view by tree.BuildVisible.
const ReportPath = tree.ReportPath

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
// display path), each with the strictest access of its records (see the
// package doc). Records without a path are skipped and counted.
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
		var aw string
		var disagree bool
		e.IsPublic, e.Groups, aw, disagree = access(cs, l)
		if aw != "" {
			warn = append(warn, aw)
		}
		if disagree {
			rep.Disagree++
		}
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
	return entries, rep
}

// chunk is one record as a piece of its file.
type chunk struct {
	rec      *Record
	offset   int64 // in Layout.Unit; -1 unknown
	order    float64
	hasOrder bool
	lineFrom int64 // -1 unknown
	lineTo   int64
	// groups are the group sets the record names, one per groups key
	// that names some; groupsOK is false when a value is malformed.
	groups   [][]string
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
	for _, k := range l.GroupsKeys {
		g, ok := groupsMeta(r.Meta, k)
		c.groupsOK = c.groupsOK && ok
		if ok && len(g) > 0 {
			c.groups = append(c.groups, g)
		}
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
	return a.entry(), a.marked, a.warnings
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

// access is the file's: the strictest of its records' (see the package
// doc). Public without a groups key or when none of its records names
// groups (as a page without access frontmatter); else the groups every
// set its records name holds (a record naming none restricts nothing),
// hidden from every view (not public, no group) when no group is in all
// of them or when a value is malformed anywhere (fail closed). warn says
// why, when the records disagree (disagree) or a value is malformed.
func access(cs []*chunk, l Layout) (public bool, groups []string, warn string, disagree bool) {
	if len(l.GroupsKeys) == 0 {
		return true, nil, "", false
	}
	var common map[string]bool // nil until a record names groups
	kinds := map[string]int{}  // each record's sets, as one string -> records
	for _, c := range cs {
		if !c.groupsOK {
			return false, nil, fmt.Sprintf("record %q has a groups value that is neither a list of names nor a comma-separated string: the file is hidden from every view", c.rec.ID), false
		}
		kinds[setsKey(c.groups)]++
		for _, set := range c.groups {
			common = intersect(common, set)
		}
	}
	if common == nil {
		return true, nil, "", false
	}
	groups = sortedKeys(common)
	shown := "no group is named by all of them: the file is hidden from every view"
	if len(groups) > 0 {
		shown = "the file is shown only to the groups all of them name (" + strings.Join(groups, ", ") + ")"
	}
	switch {
	case len(kinds) > 1:
		warn = fmt.Sprintf("its %d records disagree on their groups (%d different sets; a view must see every record of a file): %s",
			len(cs), len(kinds), shown)
	case len(groups) == 0: // one record's keys (l.GroupsKeys) name sets with nothing in common
		warn = fmt.Sprintf("its records name groups under %s with none in common: the file is hidden from every view", strings.Join(l.GroupsKeys, " and "))
	}
	return false, groups, warn, len(kinds) > 1
}

// intersect is common ∩ set; a nil common is the first set.
func intersect(common map[string]bool, set []string) map[string]bool {
	in := make(map[string]bool, len(set))
	for _, g := range set {
		if common == nil || common[g] {
			in[g] = true
		}
	}
	return in
}

// setsKey names a record's group sets (sorted, each sorted), to tell
// records that name the same ones.
func setsKey(sets [][]string) string {
	parts := make([]string, len(sets))
	for i, s := range sets {
		s = slices.Clone(s)
		slices.Sort(s)
		parts[i] = strings.Join(slices.Compact(s), "\x00")
	}
	slices.Sort(parts)
	return strings.Join(parts, "\x01")
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
