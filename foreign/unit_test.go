package foreign

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
)

// prose is n words of deterministic text in paragraphs, from words.
func prose(seed uint64, n int, words []string) string {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	var sb strings.Builder
	for i := 0; i < n; i++ {
		sb.WriteString(words[rng.IntN(len(words))])
		switch {
		case i%37 == 36:
			sb.WriteString("\n\n")
		case i%11 == 10:
			sb.WriteString("\n")
		default:
			sb.WriteString(" ")
		}
	}
	return sb.String()
}

var (
	asciiWords  = strings.Fields("the kernel page cache mounts a tree of chunks from the server")
	bmpWords    = append(strings.Fields("héllo wörld café 日本語 Grüße — “quoted” …"), asciiWords...)
	astralWords = append(strings.Fields("🚀 🎉 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 😀"), bmpWords...)
)

// cut splits text into chunks of n code points overlapping by o, with
// offsets counted in u (a float64, as JSON gives it) under offKey; trim
// strips white space at chunk edges (moving the offset past what it
// strips), as LangChain's and LlamaIndex's splitters do.
func cut(src, text string, n, o int, u Unit, trim bool, offKey string) []Record {
	var out []Record
	runes := []rune(text)
	for start := 0; start < len(runes); start += n - o {
		end := min(start+n, len(runes))
		doc := string(runes[start:end])
		off := unitsIn(string(runes[:start]), u)
		if trim {
			lead := doc[:len(doc)-len(strings.TrimLeftFunc(doc, unicode.IsSpace))]
			off += unitsIn(lead, u)
			doc = strings.TrimSpace(doc)
		}
		if doc != "" {
			out = append(out, Record{ID: fmt.Sprintf("%s#%03d", src, len(out)), Doc: doc,
				Meta: map[string]any{"source": src, offKey: float64(off), "chunk": float64(len(out))}})
		}
		if end == len(runes) {
			break
		}
	}
	return out
}

// files is the records of several files of one kind.
func files(count int, words []string, n, o int, u Unit, trim bool) ([]Record, map[string]string) {
	var recs []Record
	texts := map[string]string{}
	for i := 0; i < count; i++ {
		src := fmt.Sprintf("/docs/f%d.md", i)
		texts[src] = prose(uint64(i+1), 400, words)
		recs = append(recs, cut(src, texts[src], n, o, u, trim, "offset")...)
	}
	return recs, texts
}

// TestUnitDetected: the unit offsets count is the one in which chunk
// lengths and the differences of offsets agree, whatever the layout's
// default, for fixed chunks, overlapping ones and trimmed ones; where
// several units agree alike the default is kept (and the bytes are the
// same); with no telling seam the default is kept; an explicit unit is
// never second-guessed.
func TestUnitDetected(t *testing.T) {
	custom := func(def Unit) Layout {
		return Layout{Name: "custom", PathKey: "source", OffsetKey: "offset", OrderKey: "chunk", Unit: def}
	}
	trimmed := func(def Unit) Layout { l := custom(def); l.Trims = true; return l }
	tests := []struct {
		name    string
		words   []string
		unit    Unit // what the offsets count
		o       int  // overlap
		trim    bool
		layout  Layout
		want    Unit
		how     string
		agreein int
	}{
		{"code points, fixed chunks", astralWords, CodePoints, 0, false, custom(UTF16), CodePoints, UnitDetected, 1},
		{"utf16 (JavaScript), fixed chunks", astralWords, UTF16, 0, false, custom(CodePoints), UTF16, UnitDetected, 1},
		{"bytes, fixed chunks", astralWords, Bytes, 0, false, custom(CodePoints), Bytes, UnitDetected, 1},
		{"bytes, BMP text", bmpWords, Bytes, 0, false, custom(UTF16), Bytes, UnitDetected, 1},
		{"code points, overlapping", astralWords, CodePoints, 60, false, custom(UTF16), CodePoints, UnitDetected, 1},
		{"utf16, overlapping", astralWords, UTF16, 60, false, custom(CodePoints), UTF16, UnitDetected, 1},
		{"code points, overlapping and trimmed (LangChain)", astralWords, CodePoints, 60, true, trimmed(UTF16), CodePoints, UnitDetected, 1},
		{"utf16, overlapping and trimmed (LlamaIndex.TS)", astralWords, UTF16, 60, true, trimmed(CodePoints), UTF16, UnitDetected, 1},
		// stripped white space looks like characters a unit does not count:
		// without overlaps a trimming splitter's gaps tell nothing
		{"utf16, trimmed, no overlap", astralWords, UTF16, 0, true, trimmed(UTF16), UTF16, UnitTied, 2},
		// ... unless chunks cut inside a word show a unit wrong (an overlap
		// that is not one)
		{"code points, trimmed, no overlap", astralWords, CodePoints, 0, true, trimmed(UTF16), CodePoints, UnitDetected, 1},
		{"BMP text: code points and utf16 alike, default utf16", bmpWords, CodePoints, 40, false, custom(UTF16), UTF16, UnitTied, 2},
		{"BMP text: code points and utf16 alike, default code points", bmpWords, UTF16, 0, false, custom(CodePoints), CodePoints, UnitTied, 2},
		{"BMP text: tied, default bytes not among them", bmpWords, CodePoints, 0, false, custom(Bytes), CodePoints, UnitTied, 2},
		{"ASCII: no seam tells", asciiWords, UTF16, 30, false, custom(Bytes), Bytes, UnitDefault, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			recs, texts := files(4, tc.words, 97, tc.o, tc.unit, tc.trim)
			es, rep := Build(recs, tc.layout)
			got := rep.Offsets
			if got.Unit != tc.want || got.How != tc.how || len(got.Agreeing) != tc.agreein {
				t.Fatalf("offsets %+v (%s), want %s %s", got, got, tc.want, tc.how)
			}
			if tc.how != UnitDefault && got.Seams == 0 {
				t.Errorf("no telling seam counted: %+v", got)
			}
			if !strings.Contains(got.String(), tc.want.String()) || got.Warning() != "" {
				t.Errorf("String %q, Warning %q", got, got.Warning())
			}
			for src, text := range texts {
				p := strings.TrimPrefix(src, "/docs/")
				e := es[p]
				switch {
				case tc.trim:
					// white space at the edges is lost, and stripped white
					// space comes back as newlines: the words are all there
					if e.Reassembly != Edges && e.Reassembly != Gaps {
						t.Errorf("%s: mark %q, want edges or gaps", p, e.Reassembly)
					}
					if g := strings.Fields(content(t, e, recs)); strings.Join(g, " ") != strings.Join(strings.Fields(text), " ") {
						t.Errorf("%s: the words differ from the source's", p)
					}
				case e.Reassembly != Exact || content(t, e, recs) != text:
					t.Errorf("%s: mark %q, not byte-exact", p, e.Reassembly)
				}
			}
		})
	}
}

// TestUnitTieSameBytes: BMP text read as code points or as UTF-16 units
// gives the same files, so a tie between them is harmless.
func TestUnitTieSameBytes(t *testing.T) {
	recs, _ := files(3, bmpWords, 97, 25, UTF16, false)
	a, _ := Build(recs, Layout{Name: "custom", PathKey: "source", OffsetKey: "offset", Unit: CodePoints, FixedUnit: true})
	b, _ := Build(recs, Layout{Name: "custom", PathKey: "source", OffsetKey: "offset", Unit: UTF16, FixedUnit: true})
	for p, e := range a {
		if e.SHA256 != b[p].SHA256 || e.Reassembly != Exact {
			t.Errorf("%s: code points and utf16 give different files (%q, %q)", p, e.Reassembly, b[p].Reassembly)
		}
	}
}

// TestUnitGiven: --offset-unit is taken as it is, even when the data
// says otherwise: JavaScript offsets read as code points leave gaps in the
// files with characters outside the BMP.
func TestUnitGiven(t *testing.T) {
	recs, _ := files(3, astralWords, 97, 0, UTF16, false)
	es, rep := Build(recs, Layout{Name: "custom", PathKey: "source", OffsetKey: "offset", Unit: CodePoints, FixedUnit: true})
	if rep.Offsets.How != UnitGiven || rep.Offsets.Unit != CodePoints || rep.Offsets.Seams != 0 {
		t.Fatalf("offsets %+v", rep.Offsets)
	}
	if len(rep.Marked) != 3 || es["f0.md"].Reassembly != Gaps {
		t.Errorf("marked %v, want every file gaps", rep.Marked)
	}
	if !strings.HasSuffix(rep.Offsets.String(), "(--offset-unit)") {
		t.Errorf("String %q", rep.Offsets)
	}
}

// TestUnitUnsure: files written by two clients that count differently
// agree in no unit: the least wrong is used, the files it does not fit
// are reported, and the warning (for the mount's log and index's summary)
// asks for --offset-unit.
func TestUnitUnsure(t *testing.T) {
	js, _ := files(2, astralWords, 97, 0, UTF16, false)
	py, _ := files(3, astralWords, 97, 0, CodePoints, false)
	for i := range py { // other files
		py[i].Meta["source"] = strings.Replace(py[i].Meta["source"].(string), "/f", "/py", 1)
	}
	es, rep := Build(append(js, py...), Layout{Name: "custom", PathKey: "source", OffsetKey: "offset", Unit: UTF16})
	o := rep.Offsets
	if o.How != UnitUnsure || len(o.Agreeing) != 0 || o.Unit != CodePoints || o.Files != 5 || o.Agree != [3]int{3, 2, 0} {
		t.Fatalf("offsets %+v, want unsure, code points (agreed with by 3 files of the 5)", o)
	}
	if o.Conflicts[UTF16] == 0 || o.Conflicts[CodePoints] != 0 || o.Gaps[CodePoints] == 0 {
		t.Errorf("counts %+v: utf16 conflicts in the code-point files, code points leaves gaps in the utf16 ones", o)
	}
	if !strings.Contains(o.Warning(), "--offset-unit") {
		t.Errorf("warning %q does not name --offset-unit", o.Warning())
	}
	if r := viewReport(t, es); !strings.Contains(r, "gaps\tf0.md") || strings.Contains(r, "py0.md") {
		t.Errorf("report:\n%s", r)
	}
}

// TestUnitNoOffsets: files placed by order alone say nothing of units.
func TestUnitNoOffsets(t *testing.T) {
	recs := []Record{{ID: "a", Doc: "x 🚀", Meta: map[string]any{"source": "a.md", "chunk": 0.0}}}
	_, rep := Build(recs, Layout{Name: "custom", PathKey: "source", OrderKey: "chunk"})
	if rep.Offsets.How != "" || rep.Offsets.String() != "no offsets" {
		t.Errorf("offsets %+v", rep.Offsets)
	}
}

func TestJudge(t *testing.T) {
	tests := []struct {
		a, b string
		d    int64
		want [3]verdict // codepoints, utf16, bytes
	}{
		{"ab🚀", "cd", 3, [3]verdict{fits, conflicting, conflicting}},
		{"ab🚀", "cd", 4, [3]verdict{gapped, fits, conflicting}},
		{"ab🚀", "cd", 6, [3]verdict{gapped, gapped, fits}},
		{"ab🚀cd", "🚀cdef", 2, [3]verdict{fits, fits, fits}}, // overlap "🚀cd"
		{"ab🚀cd", "cdef", 3, [3]verdict{fits, conflicting, conflicting}},
		{"ab🚀cd", "cdef", 4, [3]verdict{conflicting, fits, conflicting}},
		{"ab🚀cd", "d", 4, [3]verdict{fits, conflicting, conflicting}},
		{"abc", "xyz", 3, [3]verdict{fits, fits, fits}},
		{"abc", "bcd", 1, [3]verdict{fits, fits, fits}},
		{"abc", "xcd", 1, [3]verdict{conflicting, conflicting, conflicting}},
		{"abcdef", "cd", 2, [3]verdict{fits, fits, fits}}, // wholly inside
	}
	for _, tc := range tests {
		n := lengths(tc.a)
		for _, u := range allUnits {
			if n[u] != unitsIn(tc.a, u) {
				t.Errorf("lengths(%q)[%s] = %d, unitsIn %d", tc.a, u, n[u], unitsIn(tc.a, u))
			}
			if got := judge(tc.a, tc.b, tc.d, u); got != tc.want[u] {
				t.Errorf("judge(%q, %q, %d, %s) = %d, want %d", tc.a, tc.b, tc.d, u, got, tc.want[u])
			}
		}
	}
}
