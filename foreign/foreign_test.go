package foreign

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromafs/chromafs/tree"
)

// content reassembles an entry as a reader would, from recs.
func content(t *testing.T, e tree.Entry, recs []Record) string {
	t.Helper()
	docs := map[string]string{}
	for _, r := range recs {
		docs[r.ID] = r.Doc
	}
	var sb strings.Builder
	for _, p := range e.Records {
		if p.ID == "" {
			sb.WriteString(p.Text)
			continue
		}
		sb.WriteString(docs[p.ID][p.From:p.To])
	}
	if int64(sb.Len()) != *e.Size {
		t.Fatalf("size %d, content %d bytes", *e.Size, sb.Len())
	}
	return sb.String()
}

// viewTree builds the tree of es a view of groups gets (as an index,
// then a mount, would: encoded, decoded, pruned).
func viewTree(t *testing.T, es map[string]tree.Entry, groups ...string) *tree.Tree {
	t.Helper()
	raw, err := tree.Encode(es)
	if err != nil {
		t.Fatal(err)
	}
	d, err := tree.Decode(raw, tree.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return tree.BuildVisible(d, groups, tree.DefaultLimits)
}

// viewReport is the text of the report of inexact files a view of groups
// gets, "" when it has none.
func viewReport(t *testing.T, es map[string]tree.Entry, groups ...string) string {
	t.Helper()
	n := viewTree(t, es, groups...).Lookup(ReportPath)
	if n == nil {
		return ""
	}
	var sb strings.Builder
	for _, p := range n.File.Records() {
		sb.WriteString(p.Text)
	}
	return sb.String()
}

// split cuts text into chunks of n units overlapping by o, the way a
// splitter with offsets would, and returns records with start offsets.
func split(src, text string, n, o int, unit Unit, offKey string) []Record {
	var out []Record
	runes := []rune(text)
	for start := 0; start < len(runes); start += n - o {
		end := min(start+n, len(runes))
		off := int64(start)
		if unit == UTF16 {
			off = unitsIn(string(runes[:start]), UTF16)
		}
		out = append(out, Record{ID: src + "#" + string(rune('a'+len(out))), Doc: string(runes[start:end]),
			Meta: map[string]any{"source": src, offKey: float64(off)}})
		if end == len(runes) {
			break
		}
	}
	return out
}

func TestOffsetsExact(t *testing.T) {
	text := "# Title\n\nUnicode: héllo wörld 🚀 emoji, 日本語.\n" + strings.Repeat("line of text\n", 40)
	for _, unit := range []Unit{CodePoints, UTF16} {
		recs := split("/docs/a.md", text, 50, 12, unit, "start_index")
		l := Layout{Name: "custom", PathKey: "source", OffsetKey: "start_index", Unit: unit}
		es, rep := Build(recs, l)
		e, ok := es["a.md"]
		if !ok || rep.Files != 1 || e.Reassembly != Exact || len(es) != 1 {
			t.Fatalf("unit %d: entries %v, report %+v", unit, keys(es), rep)
		}
		if got := content(t, e, recs); got != text {
			t.Errorf("unit %d: reassembled %q", unit, got)
		}
		// LangChain's splitter strips chunk edges: never exact
		lc := layouts["langchain"]
		lc.Unit = unit
		if es, _ := Build(recs, lc); es["a.md"].Reassembly != Edges {
			t.Errorf("langchain layout: mark %q, want edges", es["a.md"].Reassembly)
		}
	}
}

func TestGapsAndConflicts(t *testing.T) {
	recs := []Record{
		{ID: "1", Doc: "first part", Meta: map[string]any{"source": "x.md", "start_index": 0.0}},
		{ID: "2", Doc: "second", Meta: map[string]any{"source": "x.md", "start_index": 12.0}}, // 2 stripped chars
		{ID: "3", Doc: "OND and more", Meta: map[string]any{"source": "x.md", "start_index": 15.0}},
	}
	es, rep := Build(recs, layouts["langchain"])
	e := es["x.md"]
	if got := content(t, e, recs); got != "first part\n\nsecond and more" {
		t.Errorf("got %q", got)
	}
	if e.Reassembly != Conflict || rep.Marked["x.md"] != Conflict || len(rep.Warnings) != 1 {
		t.Errorf("mark %q, report %+v", e.Reassembly, rep)
	}
	if _, ok := es[ReportPath]; ok {
		t.Errorf("Build stored a report entry: one list for every view")
	}
	if r := viewReport(t, es); !strings.Contains(r, "conflict\tx.md") {
		t.Errorf("no report page naming x.md:\n%s", r)
	}
}

func TestOrderJoinAndSeparators(t *testing.T) {
	// LangChain.js: no offsets, line numbers; chunks overlap and are trimmed
	recs := []Record{
		{ID: "b", Doc: "Para two starts here and goes on.\nIt ends.", Meta: map[string]any{"source": "s.md", "locFrom": 3.0, "locTo": 4.0}},
		{ID: "a", Doc: "# Head\n\nPara two starts", Meta: map[string]any{"source": "s.md", "locFrom": 1.0, "locTo": 3.0}},
		{ID: "c", Doc: "Para three.", Meta: map[string]any{"source": "s.md", "locFrom": 6.0, "locTo": 6.0}},
	}
	es, _ := Build(recs, layouts["langchain"])
	e := es["s.md"]
	if got := content(t, e, recs); got != "# Head\n\nPara two starts here and goes on.\nIt ends.\n\nPara three." {
		t.Errorf("got %q", got)
	}
	if e.Reassembly != Gaps {
		t.Errorf("mark %q, want gaps (a separator was guessed)", e.Reassembly)
	}
	es, _ = Build([]Record{{ID: "z", Doc: "zz", Meta: map[string]any{"source": "u.md"}}, {ID: "y", Doc: "yy", Meta: map[string]any{"source": "u.md"}}}, layouts["langchain"])
	if es["u.md"].Reassembly != Unordered {
		t.Errorf("no order: mark %q", es["u.md"].Reassembly)
	}
}

func TestPathsAndAccess(t *testing.T) {
	got := displayPaths([]string{"/home/me/docs/a.md", "/home/me/docs/sub/b.md", "https://example.com/guide/", "https://example.com/x?y=1", "/home/me/docs/../up.md", "/home/me/docs/100%.md"})
	for src, want := range map[string]string{"/home/me/docs/a.md": "a.md", "/home/me/docs/sub/b.md": "sub/b.md",
		"https://example.com/guide/": "example.com/guide/index", "https://example.com/x?y=1": "example.com/x?y=1",
		"/home/me/docs/../up.md": "%2E%2E/up.md", "/home/me/docs/100%.md": "100%25.md"} {
		if got[src] != want {
			t.Errorf("%s -> %q, want %q", src, got[src], want)
		}
	}
	l := layouts["langchain"]
	l.GroupsKeys = []string{"groups"}
	recs := []Record{
		{ID: "1", Doc: "a", Meta: map[string]any{"source": "p.md", "groups": "sre, ops"}},
		{ID: "2", Doc: "b", Meta: map[string]any{"source": "q.md", "groups": 7.0}},
		{ID: "3", Doc: "c", Meta: map[string]any{"source": "r.md"}},
	}
	es, _ := Build(recs, l)
	if p := es["p.md"]; p.IsPublic || strings.Join(p.Groups, ",") != "ops,sre" {
		t.Errorf("p.md access %v %v", p.IsPublic, p.Groups)
	}
	if q := es["q.md"]; q.IsPublic || len(q.Groups) != 0 {
		t.Errorf("malformed groups must hide: %v %v", q.IsPublic, q.Groups)
	}
	if r := es["r.md"]; !r.IsPublic {
		t.Errorf("a file whose records name no groups is public")
	}
}

func TestEntriesDecode(t *testing.T) {
	text := strings.Repeat("abc def\n", 100)
	recs := split("/d/a.md", text, 100, 20, CodePoints, "start_index")
	recs = append(recs, Record{ID: "g1", Doc: "x", Meta: map[string]any{"source": "/d/b.md", "start_index": 3.0}})
	es, _ := Build(recs, layouts["langchain"])
	raw, err := tree.Encode(es)
	if err != nil {
		t.Fatal(err)
	}
	d, err := tree.Decode(raw, tree.DefaultLimits)
	if err != nil || d.Warnings.Count() != 0 {
		t.Fatalf("decode: %v %v", err, d.Warnings.List)
	}
	tr := tree.BuildVisible(d, nil, tree.DefaultLimits)
	if tr.Lookup("a.md") == nil || tr.Lookup(ReportPath) == nil || tr.Lookup("a.md").File.Records() == nil {
		t.Errorf("tree: %v", tr.Files)
	}
	if n, _ := overlap("hello world", "world peace"); n != 5 {
		t.Errorf("overlap = %d", n)
	}
	if n, _ := overlap("aaaa", "aaab"); n != 3 {
		t.Errorf("overlap = %d", n)
	}
	rep := strings.Repeat("repeated phrase. ", 6)
	if n, ambiguous := seam(rep, rep+"end"); !ambiguous || n > len(rep+"end")/2 {
		t.Errorf("periodic text: seam %d ambiguous=%v", n, ambiguous)
	}
	if _, ambiguous := seam("one two three four", "three four five six seven"); ambiguous {
		t.Errorf("plain prose: ambiguous")
	}
}

// TestLlamaIndexLinks: nodes without offsets (LlamaIndex.TS's
// MarkdownNodeParser drops the "#" of headers, so a section is not found
// in its document) are put in order by their PREVIOUS/NEXT relationships,
// in LlamaIndex.TS's spelling and in Python's; links that do not make one
// chain leave the file unordered.
func TestLlamaIndexLinks(t *testing.T) {
	node := func(id, prev, next string, python bool) string {
		format := `{"id_":%q,"relationships":{"SOURCE":{"nodeId":"doc"},"PREVIOUS":{"nodeId":%q},"NEXT":{"nodeId":%q}}}`
		if python {
			format = `{"id_":%q,"relationships":{"1":{"node_id":"doc"},"2":{"node_id":%q},"3":{"node_id":%q}}}`
		}
		return fmt.Sprintf(format, id, prev, next)
	}
	for _, python := range []bool{false, true} {
		mk := func(id, prev, next, doc string) Record {
			return Record{ID: id, Doc: doc, Meta: map[string]any{"file_path": "/d/a.md", "_node_content": node(id, prev, next, python)}}
		}
		recs := []Record{ // ids out of order: only the links tell
			mk("n3", "n1", "n2", "Second section, linked after the first."),
			mk("n1", "", "n3", "Title\nThe first section."),
			mk("n2", "n3", "", "Third section."),
		}
		es, _ := Build(recs, layouts["llamaindex"])
		got := content(t, es["a.md"], recs)
		if !strings.HasPrefix(got, "Title\nThe first section.") || strings.Index(got, "Second") > strings.Index(got, "Third") || es["a.md"].Reassembly == Unordered {
			t.Errorf("python=%v: %q (mark %q): not in the links' order", python, got, es["a.md"].Reassembly)
		}
		recs[2] = mk("n2", "n1", "", "Third section.") // two chunks claim n1 as previous: a branch
		if es, _ := Build(recs, layouts["llamaindex"]); es["a.md"].Reassembly != Unordered {
			t.Errorf("python=%v: links with a branch gave mark %q, want unordered", python, es["a.md"].Reassembly)
		}
	}
}

// TestLlamaIndexDocuments: nodes of documents that were not read from
// files (no file_path) are grouped by their document's id, as
// documents/<id>; a node of no document ("None") is skipped.
func TestLlamaIndexDocuments(t *testing.T) {
	nc := func(start int) string { return fmt.Sprintf(`{"start_char_idx":%d}`, start) }
	recs := []Record{
		{ID: "b", Doc: "second half.", Meta: map[string]any{"ref_doc_id": "doc-1", "_node_content": nc(12)}},
		{ID: "a", Doc: "First half, ", Meta: map[string]any{"ref_doc_id": "doc-1", "_node_content": nc(0)}},
		{ID: "c", Doc: "alone", Meta: map[string]any{"ref_doc_id": "None", "doc_id": "None", "document_id": "None"}},
		{ID: "d", Doc: "from a file", Meta: map[string]any{"file_path": "/src/f.md", "ref_doc_id": "doc-2", "_node_content": nc(0)}},
	}
	es, rep := Build(recs, layouts["llamaindex"])
	if got := content(t, es["documents/doc-1"], recs); got != "First half, second half." {
		t.Errorf("documents/doc-1: %q (entries %v)", got, keys(es))
	}
	if _, ok := es["f.md"]; !ok || rep.Skipped != 1 {
		t.Errorf("entries %v, %d skipped; want f.md by its path and the node of no document skipped", keys(es), rep.Skipped)
	}
}
