package treeload

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/foreign"
	"github.com/chromafs/chromafs/tree"
)

// records is a Scanner over fixed records.
type records []chroma.RawRecord

func (r records) Scan(_ context.Context, fn func([]chroma.RawRecord) error) (int, error) {
	return len(r), fn(r)
}

func (r records) Count(context.Context) (int, error) { return len(r), nil }

// jsLoader cuts text as a JavaScript loader does: chunks of n UTF-16
// units, offsets in UTF-16 units (it never cuts a surrogate pair here:
// the text's pairs sit at even offsets and n is even).
func jsLoader(src, text string, n int) records {
	units := utf16.Encode([]rune(text))
	var out records
	for off := 0; off < len(units); off += n {
		doc := string(utf16.Decode(units[off:min(off+n, len(units))]))
		out = append(out, chroma.RawRecord{ID: fmt.Sprintf("%s-%d", src, off), Doc: doc,
			Meta: map[string]any{"source": src, "chunk": float64(off / n), "offset": float64(off)}})
	}
	return out
}

// TestScannedDetectsOffsetUnit: a custom layout without --offset-unit
// reads JavaScript offsets as UTF-16 units (detected, and said in the
// report), so a file with emoji is exact; --offset-unit codepoints is
// taken as it is, and the file then is not.
func TestScannedDetectsOffsetUnit(t *testing.T) {
	text := strings.Repeat("🚀😀", 10) + strings.Repeat("plain text ", 30)
	src := jsLoader("/docs/a.md", text, 16)
	for _, tc := range []struct {
		unit  string
		fixed bool
		want  foreign.Unit
		how   string
		exact bool
	}{
		{"", false, foreign.UTF16, foreign.UnitDetected, true},
		{"codepoints", true, foreign.CodePoints, foreign.UnitGiven, false},
		{"utf16", true, foreign.UTF16, foreign.UnitGiven, true},
	} {
		var l Layout
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		l.RegisterFlags(fs, "layouts")
		args := []string{"--layout", "custom", "--path-key", "source", "--order-key", "chunk", "--offset-key", "offset"}
		if tc.unit != "" {
			args = append(args, "--offset-unit", tc.unit)
		}
		if err := fs.Parse(args); err != nil || l.Validate() != nil {
			t.Fatalf("flags %v: %v %v", args, err, l.Validate())
		}
		recs, err := Records(context.Background(), src)
		if err != nil {
			t.Fatal(err)
		}
		fl, err := Choose(l, recs)
		if err != nil || fl.FixedUnit != tc.fixed {
			t.Fatalf("--offset-unit %q: %+v %v", tc.unit, fl, err)
		}
		res, rep, err := Scanned(context.Background(), src, l, 100, nil, tree.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Offsets.Unit != tc.want || rep.Offsets.How != tc.how {
			t.Errorf("--offset-unit %q: offsets %s, want %s %s", tc.unit, rep.Offsets, tc.want, tc.how)
		}
		f := res.Tree.Lookup("a.md")
		if f == nil {
			t.Fatalf("--offset-unit %q: no a.md", tc.unit)
		}
		if size, _ := f.File.Size(); (size == int64(len(text))) != tc.exact || (len(rep.Marked) == 0) != tc.exact {
			t.Errorf("--offset-unit %q: a.md of %d bytes (the source's %d), marked %v; want exact %v", tc.unit, size, len(text), rep.Marked, tc.exact)
		}
	}
}
