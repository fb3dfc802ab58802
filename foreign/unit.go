package foreign

import (
	"fmt"
	"sort"
	"strings"
)

// What offsets count is not written anywhere: Python clients count code
// points, JavaScript clients UTF-16 units, a loader in Go or Rust may count
// bytes, and a layout's default is only a guess about which client wrote
// the collection. The data tells. Between two chunks of a file that follow
// each other by offset (a seam), the difference of their offsets d and the
// length L of the first chunk, counted in the right unit, fit: d == L
// (adjacent chunks), or d < L and the last L-d units of the first chunk
// are the first L-d of the second (an overlap, verified as the assembler
// verifies it), or d > L (a gap: white space a splitter stripped). Counted
// in a wrong unit, a seam whose first chunk holds characters the units
// count differently shows a gap where there is none, or an overlap whose
// text disagrees (a conflict).
//
// So every seam is judged in each unit (fits, gap, conflict); the seams
// judged alike in all units say nothing and are left out. In one file, the
// units that agree with its seams are those with the fewest conflicts,
// then the fewest gaps: gaps are allowed (stripped white space is real),
// they just must not be more than another unit explains. Where the layout's
// splitter strips white space at chunk edges (Layout.Trims: LangChain,
// LlamaIndex), a gap is as likely as adjacent chunks (d == L), so a gap
// counts as fitting and only overlaps tell (a splitter without overlap
// keeps the layout's default unless an overlap that is not one, d < L
// with text that disagrees, shows a unit wrong). A unit agrees
// with the data when it agrees with every file (a file without a telling
// seam agrees with any). Exactly one such unit is taken (UnitDetected).
// When several agree alike (text in the Basic Multilingual Plane is
// counted the same in code points and UTF-16 units, and then gives the
// same bytes), the layout's default is kept if it is among them, else the
// first in the order code points, UTF-16, bytes (UnitTied). No telling
// seam keeps the layout's default (UnitDefault). When no unit agrees with
// every file (files written by clients that count differently, or text
// changed after its offsets were taken), the unit most files agree with
// is used, and the mount's log and index's summary ask for --offset-unit
// (UnitUnsure).

// String is the unit's --offset-unit name.
func (u Unit) String() string {
	switch u {
	case UTF16:
		return "utf16"
	case Bytes:
		return "bytes"
	}
	return "codepoints"
}

// allUnits is the order ties are broken in (after the layout's default).
var allUnits = [...]Unit{CodePoints, UTF16, Bytes}

// How a UnitChoice was made.
const (
	UnitGiven    = "given"    // --offset-unit: not detected
	UnitDetected = "detected" // the one unit every file's seams agree with
	UnitTied     = "tied"     // several agree alike: the layout's default, else the first
	UnitDefault  = "default"  // no seam tells the units apart: the layout's
	UnitUnsure   = "unsure"   // no unit agrees with every file: the one most files agree with, and a warning
)

// UnitChoice says what a collection's offsets were read in, and why.
type UnitChoice struct {
	Unit Unit
	How  string // UnitGiven, UnitDetected, UnitTied, UnitDefault, UnitUnsure; "" when no file was placed by offsets
	// Seams counts the seams that tell units apart, Files the files that
	// have one; Gaps and Conflicts count, per unit (indexed by Unit), the
	// seams that do not fit in it; Agree the files that agree with it.
	Seams, Files int
	Gaps         [len(allUnits)]int
	Conflicts    [len(allUnits)]int
	Agree        [len(allUnits)]int
	// Agreeing are the units that agree with every file (more than one
	// when tied; none when unsure).
	Agreeing []Unit
}

// String says it in one line, for a log or a summary.
func (c UnitChoice) String() string {
	switch c.How {
	case "":
		return "no offsets"
	case UnitGiven:
		return c.Unit.String() + " (--offset-unit)"
	case UnitDefault:
		return c.Unit.String() + " (the layout's default: no seam between chunks tells the units apart)"
	case UnitDetected:
		return fmt.Sprintf("%s (detected: the one unit that fits the seams between chunks in every file; %d seams in %d files tell units apart)", c.Unit, c.Seams, c.Files)
	case UnitTied:
		names := make([]string, len(c.Agreeing))
		for i, u := range c.Agreeing {
			names[i] = u.String()
		}
		return fmt.Sprintf("%s (detected: the seams between chunks agree in %s alike)", c.Unit, strings.Join(names, " and "))
	}
	return fmt.Sprintf("%s (the seams between chunks agree in no one unit: of %d files that tell, %s agree); pass --offset-unit codepoints, utf16 or bytes, the one the collection's writer counts (Python clients code points, JavaScript clients UTF-16 units)",
		c.Unit, c.Files, c.counts())
}

func (c UnitChoice) counts() string {
	parts := make([]string, len(allUnits))
	for i, u := range allUnits {
		parts[i] = fmt.Sprintf("%d in %s", c.Agree[u], u)
	}
	return strings.Join(parts, ", ")
}

// Warning is what a reader must be told, or "": the offsets agree in no
// unit.
func (c UnitChoice) Warning() string {
	if c.How != UnitUnsure {
		return ""
	}
	return "offsets read as " + c.String()
}

// verdict is how a seam fits in one unit.
type verdict uint8

const (
	fits verdict = iota
	gapped
	conflicting
)

// judge is the verdict on the seam between chunks a and b whose offsets
// differ by d, counted in u.
func judge(a, b string, d int64, u Unit) verdict {
	return judgeLen(a, b, d, unitsIn(a, u), u)
}

// judgeLen is judge with a's length in u, n.
func judgeLen(a, b string, d, n int64, u Unit) verdict {
	switch {
	case d > n:
		return gapped
	case d == n:
		return fits
	}
	if agrees(a[byteAt(a, d, u):], b[:byteAt(b, n-d, u)]) {
		return fits
	}
	return conflicting
}

// placedByOffsets reports whether assemble places cs by their offsets.
func placedByOffsets(cs []*chunk) bool {
	return len(cs) > 0 && all(cs, func(c *chunk) bool { return c.offset >= 0 })
}

// sortByOffset is the order assemble places chunks in.
func sortByOffset(cs []*chunk) {
	sort.SliceStable(cs, func(i, j int) bool {
		return cs[i].offset < cs[j].offset || cs[i].offset == cs[j].offset && cs[i].rec.ID < cs[j].rec.ID
	})
}

// chooseUnit is what the offsets of files (chunks by file) count: l.Unit
// when l.FixedUnit, else what the seams between their chunks say. It sorts
// the chunks of files placed by offsets.
func chooseUnit(files map[string][]*chunk, l Layout) UnitChoice {
	c := UnitChoice{Unit: l.Unit}
	placed := false
	every := [len(allUnits)]bool{true, true, true} // agrees with every file so far
	for _, cs := range files {
		if !placedByOffsets(cs) {
			continue
		}
		placed = true
		if l.FixedUnit {
			continue
		}
		agree, ok := c.judgeFile(cs, l.Trims)
		if !ok {
			continue
		}
		c.Files++
		for _, u := range allUnits {
			if agree[u] {
				c.Agree[u]++
			}
			every[u] = every[u] && agree[u]
		}
	}
	switch {
	case !placed:
		return UnitChoice{}
	case l.FixedUnit:
		c.How = UnitGiven
		return c
	case c.Seams == 0:
		c.How = UnitDefault
		return c
	}
	for _, u := range allUnits {
		if every[u] {
			c.Agreeing = append(c.Agreeing, u)
		}
	}
	switch len(c.Agreeing) {
	case 0:
		c.How, c.Unit = UnitUnsure, c.mostAgreed(l.Unit)
	case 1:
		c.How, c.Unit = UnitDetected, c.Agreeing[0]
	default:
		c.How, c.Unit = UnitTied, c.Agreeing[0]
		for _, u := range c.Agreeing {
			if u == l.Unit {
				c.Unit = u
			}
		}
	}
	return c
}

// judgeFile sorts one file's chunks by offset, counts its telling seams
// into c, and returns the units that agree with them (the fewest
// conflicts, then gaps); ok is false when no seam tells. When the splitter
// trims (trims), a gap fits.
func (c *UnitChoice) judgeFile(cs []*chunk, trims bool) (agree [len(allUnits)]bool, ok bool) {
	sortByOffset(cs)
	var gaps, conflicts [len(allUnits)]int
	for i := 1; i < len(cs); i++ {
		a, b := cs[i-1], cs[i]
		var v [len(allUnits)]verdict
		n := lengths(a.rec.Doc)
		for _, u := range allUnits {
			if v[u] = judgeLen(a.rec.Doc, b.rec.Doc, b.offset-a.offset, n[u], u); v[u] == gapped && trims {
				v[u] = fits // stripped white space is as likely as none
			}
		}
		if v[CodePoints] == v[UTF16] && v[UTF16] == v[Bytes] {
			continue // says nothing
		}
		ok = true
		c.Seams++
		for _, u := range allUnits {
			switch v[u] {
			case gapped:
				gaps[u]++
			case conflicting:
				conflicts[u]++
			}
		}
	}
	best := CodePoints
	for _, u := range allUnits {
		if conflicts[u] < conflicts[best] || conflicts[u] == conflicts[best] && gaps[u] < gaps[best] {
			best = u
		}
	}
	for _, u := range allUnits {
		c.Gaps[u] += gaps[u]
		c.Conflicts[u] += conflicts[u]
		agree[u] = conflicts[u] == conflicts[best] && gaps[u] == gaps[best]
	}
	return agree, ok
}

// mostAgreed is the unit the most files agree with; the layout's default
// first among equals, then the order of allUnits.
func (c UnitChoice) mostAgreed(def Unit) Unit {
	best := def
	for _, u := range allUnits {
		if c.Agree[u] > c.Agree[best] {
			best = u
		}
	}
	return best
}

// lengths is s's length in each unit (unitsIn's, in one pass).
func lengths(s string) (n [len(allUnits)]int64) {
	for _, r := range s {
		n[CodePoints]++
		n[UTF16]++
		if r >= 0x10000 {
			n[UTF16]++
		}
	}
	n[Bytes] = int64(len(s))
	return n
}
