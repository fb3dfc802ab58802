package treeload

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/content"
	"github.com/chromafs/chromafs/foreign"
	"github.com/chromafs/chromafs/search"
	"github.com/chromafs/chromafs/tree"
)

// The views' safety (issue 28): over random collections of other tools'
// records and random layouts, every byte a view serves comes from records
// the view may see. A view is built both ways a mount builds it: scanned
// (Scanned, over a fake Scanner) and indexed (foreign.Build, encoded,
// wrapped, decoded and pruned, as chromafs-ingest index and then a mount
// do). Each record's document carries a secret token of its own (and,
// when it was cut from a file text with other chunks, that text's tokens,
// which overlapping chunks share); path values carry name tokens. A
// record is visible to a view when, under every groups key the layout
// reads, its value is well-formed and names no groups or a group of the
// view's. A token is hidden from a view when it is a hidden record's own,
// or a name token only hidden records' metadata holds. Checked, for every
// view of every collection:
//
//   - every file's parts reference only visible records;
//   - no hidden token is in a file's bytes (read through the read engine:
//     content.Engine over a source that slices records as chroma's does),
//     in any path of the tree, in the report of inexact files or in a
//     lexical search's hits (package search, over the view's files), and a
//     search for a hidden token finds nothing;
//   - the report names only files the tree shows;
//   - both ways give the same tree.

var (
	docToken  = regexp.MustCompile(`Qx[0-9a-f]{10}xQ`)
	nameToken = regexp.MustCompile(`Nq[0-9a-f]{6}qN`)
)

// Candidate keys the records and the layouts draw from.
var (
	pathKeys   = []string{"source", "file_path", "kind", "path"}
	offsetKeys = []string{"start_index", "offset"}
	orderKeys  = []string{"locFrom", "n"}
	groupKeys  = []string{"acl", "team"}
	allGroups  = []string{"admin", "billing", "sre", "ops"}
)

// words are what documents are made of: ASCII, the BMP, astral planes,
// line ends.
var words = strings.Fields("the kernel page cache mounts tree chunks server héllo wörld café 日本語 Grüße — “quoted” 🚀 🎉 𝔘𝔫𝔦 😀 \r\n \n\n \t")

// collection is one random collection: its records, each one's own
// secret token (in its document) and the name tokens its metadata holds.
type collection struct {
	recs  records
	own   map[string]string   // record id -> its document's own token
	names map[string][]string // record id -> the name tokens of its metadata
}

// randomCollection makes records that share path values (so a path key
// groups them into files), with group labels (some malformed), offsets,
// orders and LlamaIndex node content (some wrong), half of them cut from a
// file text with overlaps and offsets as a splitter does.
func randomCollection(rng *rand.Rand) collection {
	token := func(kind string) string {
		if kind == "doc" {
			return fmt.Sprintf("Qx%010xxQ", rng.Uint64()&(1<<40-1))
		}
		return fmt.Sprintf("Nq%06xqN", rng.Uint32()&(1<<24-1))
	}
	text := func(n int) string {
		var sb strings.Builder
		for range n {
			sb.WriteString(words[rng.IntN(len(words))])
			if rng.IntN(3) > 0 {
				sb.WriteByte(' ')
			}
		}
		return sb.String()
	}
	// path values: local paths, URLs, unicode, some shared by name only
	names := make([]string, 1+rng.IntN(5))
	for i := range names {
		switch rng.IntN(4) {
		case 0:
			names[i] = fmt.Sprintf("/docs/d%d/%s.md", rng.IntN(3), token("name"))
		case 1:
			names[i] = fmt.Sprintf("https://h%d.example/%s/", rng.IntN(2), token("name"))
		case 2:
			names[i] = fmt.Sprintf("ünï/日本/%s.txt", token("name"))
		default:
			names[i] = token("name")
		}
	}
	groupValue := func() any {
		switch rng.IntN(12) {
		case 0, 1, 2:
			return nil // absent
		case 3:
			return ""
		case 4:
			return allGroups[rng.IntN(len(allGroups))]
		case 5:
			return allGroups[rng.IntN(len(allGroups))] + ", " + allGroups[rng.IntN(len(allGroups))]
		case 6:
			return []any{allGroups[rng.IntN(len(allGroups))]}
		case 7:
			return []any{allGroups[rng.IntN(len(allGroups))], allGroups[rng.IntN(len(allGroups))]}
		case 8:
			return 7.0 // malformed
		case 9:
			return []any{"admin", 1.0} // malformed
		case 10:
			return []any{""} // malformed
		}
		return true // malformed
	}
	c := collection{own: map[string]string{}, names: map[string][]string{}}
	// add adds a record whose document is doc with its own token put at
	// byte at (a rune boundary).
	add := func(doc string, at int, meta map[string]any) {
		own := token("doc")
		id := fmt.Sprintf("r%03d", len(c.recs))
		c.recs = append(c.recs, chroma.RawRecord{ID: id, Doc: doc[:at] + own + doc[at:], Meta: meta})
		c.own[id] = own
		for _, v := range meta {
			if s, ok := v.(string); ok {
				c.names[id] = append(c.names[id], nameToken.FindAllString(s, -1)...)
			}
		}
	}
	meta := func() map[string]any {
		m := map[string]any{}
		for _, k := range pathKeys {
			switch r := rng.IntN(10); {
			case r < 7:
				m[k] = names[rng.IntN(len(names))]
			case r == 7:
				m[k] = 5.0
			}
		}
		for _, k := range groupKeys {
			if v := groupValue(); v != nil {
				m[k] = v
			}
		}
		if rng.IntN(4) == 0 {
			m["ref_doc_id"] = []string{"None", names[rng.IntN(len(names))]}[rng.IntN(2)]
		}
		return m
	}
	n := 1 + rng.IntN(14)
	for len(c.recs) < n {
		if rng.IntN(2) == 0 { // a file text cut into overlapping chunks, offsets in code points or UTF-16 units
			var sb strings.Builder
			for range 1 + rng.IntN(5) {
				sb.WriteString(text(rng.IntN(8)) + token("doc") + " ")
			}
			runes := []rune(sb.String())
			size, overlap := 8+rng.IntN(40), rng.IntN(8)
			m := meta()
			js := rng.IntN(2) == 0
			for start, k := 0, 0; start < len(runes); start, k = start+size-overlap, k+1 {
				end := min(start+size, len(runes))
				cm := maps.Clone(m)
				off := start
				if js { // UTF-16 units
					off = 0
					for _, r := range runes[:start] {
						off++
						if r >= 0x10000 {
							off++
						}
					}
				}
				cm[offsetKeys[rng.IntN(len(offsetKeys))]] = float64(off)
				cm["n"], cm["locFrom"], cm["locTo"] = float64(k), float64(k), float64(k+1)
				cm["_node_content"] = fmt.Sprintf(`{"id_":"n%d","start_char_idx":%d}`, k, off)
				chunk := string(runes[start:end])
				add(chunk, len(chunk), cm)
				if end == len(runes) {
					break
				}
			}
			continue
		}
		m := meta()
		if rng.IntN(2) == 0 {
			m[offsetKeys[rng.IntN(len(offsetKeys))]] = []any{float64(rng.IntN(200)), "17", -1.0, "x"}[rng.IntN(4)]
		}
		if rng.IntN(2) == 0 {
			m[orderKeys[rng.IntN(len(orderKeys))]] = float64(rng.IntN(5))
		}
		if rng.IntN(3) == 0 {
			m["_node_content"] = []string{`{"id_":"x","relationships":{"PREVIOUS":{"nodeId":"y"}}}`, `{"start_char_idx":3}`, `not json`}[rng.IntN(3)]
		}
		doc := text(rng.IntN(12))
		cut := rng.IntN(len(doc) + 1)
		for !utf8Boundary(doc, cut) {
			cut--
		}
		add(doc, cut, m)
	}
	rng.Shuffle(len(c.recs), func(i, j int) { c.recs[i], c.recs[j] = c.recs[j], c.recs[i] })
	return c
}

func utf8Boundary(s string, i int) bool { return i == 0 || i == len(s) || s[i]&0xc0 != 0x80 }

// randomLayout is a layout a mount could be given, and the groups keys a
// view may add (an index's recorded key).
func randomLayout(rng *rand.Rand) (Layout, []string) {
	pick := func(from []string, none bool) string {
		if none && rng.IntN(3) == 0 {
			return ""
		}
		return from[rng.IntN(len(from))]
	}
	l := Layout{Name: []string{"langchain", "llamaindex", "custom", "auto"}[rng.IntN(4)]}
	if l.Name == "custom" || rng.IntN(3) == 0 {
		l.PathKey = pick(pathKeys, l.Name != "custom")
		l.OrderKey = pick(orderKeys, true)
		l.OffsetKey = pick(offsetKeys, true)
	}
	l.Unit = []string{"", "", "codepoints", "utf16", "bytes"}[rng.IntN(5)]
	l.GroupsKey = pick(groupKeys, true)
	var more []string
	if rng.IntN(3) == 0 {
		more = []string{pick(groupKeys, false)}
	}
	return l, more
}

// visibleTo reports whether a view of groups may see r under keys: each
// value well-formed (absent, a string of comma-separated names, a list of
// non-empty strings), naming no group or one of the view's. It is the
// oracle: written apart from package foreign.
func visibleTo(r chroma.RawRecord, keys, groups []string) bool {
	for _, k := range keys {
		var names []string
		switch v := r.Meta[k].(type) {
		case nil:
		case string:
			for _, g := range strings.Split(v, ",") {
				if g = strings.TrimSpace(g); g != "" {
					names = append(names, g)
				}
			}
		case []any:
			for _, g := range v {
				s, ok := g.(string)
				if !ok || s == "" {
					return false
				}
				names = append(names, s)
			}
		default:
			return false
		}
		if len(names) > 0 && !slices.ContainsFunc(names, func(g string) bool { return slices.Contains(groups, g) }) {
			return false
		}
	}
	return true
}

// partsSource serves pages mapped onto records as chroma.Store does
// (a literal part's text, else bytes [From, To) of the record's document),
// from every record: hidden ones too, as Chroma would.
type partsSource map[string]string

func (s partsSource) FetchPage(_ context.Context, ref content.Ref, idx []int) ([]string, error) {
	if idx == nil {
		idx = make([]int, len(ref.Parts))
		for i := range idx {
			idx[i] = i
		}
	}
	out := make([]string, len(idx))
	for j, i := range idx {
		if i < 0 || i >= len(ref.Parts) {
			return nil, fmt.Errorf("page %q: no part %d: %w", ref.Slug, i, content.ErrBadPage)
		}
		p := ref.Parts[i]
		if p.ID == "" {
			out[j] = p.Text
			continue
		}
		doc, ok := s[p.ID]
		if !ok || p.To > int64(len(doc)) {
			return nil, fmt.Errorf("page %q: record %q: %w", ref.Slug, p.ID, content.ErrBadPage)
		}
		out[j] = doc[p.From:p.To]
	}
	return out, nil
}

func (s partsSource) FetchPages(ctx context.Context, refs []content.Ref) (map[string]content.Page, error) {
	out := make(map[string]content.Page, len(refs))
	for _, r := range refs {
		chunks, err := s.FetchPage(ctx, r, nil)
		out[r.Slug] = content.Page{Chunks: chunks, Err: err}
	}
	return out, nil
}

// safetyStats count what the property checked, so that a run shows it
// checked something.
type safetyStats struct {
	views, files, mixed, hiddenTokens, searches int
}

// safetyCase is one collection, one layout and its views, built both
// ways and checked, counted into st.
func safetyCase(t *testing.T, seed uint64, views int, st *safetyStats) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x5afe))
	col := randomCollection(rng)
	l, more := randomLayout(rng)
	keys := GroupsKeys(append([]string{l.GroupsKey}, more...)...)
	ctx := context.Background()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("seed %d, layout %+v, more groups keys %v: %s", seed, l, more, fmt.Sprintf(format, args...))
	}
	if err := l.Validate(); err != nil {
		fail("layout: %v", err)
	}
	// the index way: what chromafs-ingest index writes, as a mount reads it
	recs, err := Records(ctx, col.recs)
	if err != nil {
		fail("records: %v", err)
	}
	fl, chooseErr := Choose(l, recs, more...)
	var doc *tree.Doc
	if chooseErr == nil {
		entries, _ := foreign.Build(recs, fl)
		raw, err := tree.Encode(entries)
		if err != nil {
			fail("encode: %v", err)
		}
		wrapped, err := tree.Wrap(raw)
		if err != nil {
			fail("wrap: %v", err)
		}
		if doc, err = tree.Decode([]byte(wrapped), tree.DefaultLimits); err != nil {
			fail("decode: %v", err)
		}
	}
	docs := partsSource{}
	byID := map[string]chroma.RawRecord{}
	for _, r := range col.recs {
		docs[r.ID], byID[r.ID] = r.Doc, r
	}
	for range views {
		var groups []string
		for _, g := range allGroups {
			if rng.IntN(3) == 0 {
				groups = append(groups, g)
			}
		}
		seen := map[string]bool{} // name tokens of records the view may see
		var visible, hidden []string
		for _, r := range col.recs {
			if visibleTo(r, keys, groups) {
				visible = append(visible, col.own[r.ID])
				for _, tok := range col.names[r.ID] {
					seen[tok] = true
				}
			}
		}
		for _, r := range col.recs {
			if !visibleTo(r, keys, groups) {
				hidden = append(hidden, col.own[r.ID])
			}
			for _, tok := range col.names[r.ID] {
				if !seen[tok] && !slices.Contains(hidden, tok) {
					hidden = append(hidden, tok)
				}
			}
		}
		scanned, _, err := Scanned(ctx, col.recs, l, 1000, groups, tree.DefaultLimits, more...)
		if chooseErr != nil {
			if err == nil {
				fail("the scan built a tree where Choose failed: %v", chooseErr)
			}
			continue
		}
		if err != nil {
			fail("scan: %v", err)
		}
		st.views++
		st.hiddenTokens += len(hidden)
		st.files += scanned.Tree.Files
		if len(hidden) > 0 && len(visible) > 0 {
			st.mixed++
		}
		own := *doc
		own.Warnings = tree.Warnings{}
		indexed := tree.BuildVisible(&own, groups, tree.DefaultLimits)
		snap, err := tree.FromSnapshot(indexed.Snapshot())
		if err != nil {
			fail("snapshot: %v", err)
		}
		if a, b := listing(scanned.Tree), listing(indexed); a != b {
			fail("view %v: the scanned and the indexed trees differ:\n%s\n--\n%s", groups, a, b)
		}
		for way, tr := range map[string]*tree.Tree{"scanned": scanned.Tree, "indexed": indexed, "snapshot": snap} {
			st.searches += checkView(t, tr, docs, byID, keys, groups, visible, hidden, func(format string, args ...any) {
				t.Helper()
				fail("view %v, %s: %s", groups, way, fmt.Sprintf(format, args...))
			})
		}
	}
}

// listing is every node of tr with its content's version.
func listing(tr *tree.Tree) string {
	var sb strings.Builder
	tree.Walk(tr.Root, func(n *tree.Node) bool {
		sb.WriteString(n.Path())
		if n.File != nil {
			sb.WriteString(" " + n.File.Version)
		}
		sb.WriteByte('\n')
		return true
	})
	return sb.String()
}

// checkView checks one built view (see the top of the file) and returns
// how many searches it ran: for up to 6 hidden tokens and 4 visible ones
// (own tokens of visible records).
func checkView(t *testing.T, tr *tree.Tree, docs partsSource, byID map[string]chroma.RawRecord, keys, groups []string,
	visible, hidden []string, fail func(string, ...any)) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leaks := func(what, s string) {
		t.Helper()
		for _, tok := range hidden {
			if strings.Contains(s, tok) {
				fail("%s holds %s, a token only records the view may not see hold", what, tok)
			}
		}
	}
	e := content.New(tr, docs, content.Config{Identity: "t/d/c", Prefetch: content.PrefetchNone, Timeout: 10 * time.Second, FailTTL: -1})
	defer e.Close()
	files := map[string]string{}
	visit := func(n *tree.Node) bool {
		leaks("path "+n.Path(), n.Path())
		if n.File == nil {
			return true
		}
		for _, p := range n.File.Records() {
			if p.ID != "" && !visibleTo(byID[p.ID], keys, groups) {
				fail("%s is made of record %s, which the view may not see", n.Path(), p.ID)
			}
		}
		size, ok := n.File.Size()
		if !ok {
			fail("%s: no size", n.Path())
		}
		buf := make([]byte, size+1)
		got, err := e.ReadAt(ctx, n.File, buf, 0)
		if err != nil || int64(got) != size {
			fail("%s: read %d of %d bytes: %v", n.Path(), got, size, err)
		}
		files[n.Path()] = string(buf[:got])
		leaks(n.Path(), files[n.Path()])
		return true
	}
	tree.Walk(tr.Root, visit)
	if tr.Report != nil { // unlisted: no walk visits it
		visit(tr.Report)
	}
	if r, ok := files[tree.ReportPath]; ok {
		for _, line := range strings.Split(strings.TrimSuffix(r, "\n"), "\n") {
			if strings.HasPrefix(line, "#") {
				continue
			}
			mark, p, ok := strings.Cut(line, "\t")
			if n := tr.Lookup(p); !ok || mark == "" || n == nil || n.File == nil {
				fail("the report names %q, which the view does not show", line)
			}
		}
	}
	// lexical search over the view's files
	s := search.New(search.Config{Identity: "t/d/c", Reader: e, Timeout: 20 * time.Second})
	defer s.Close()
	s.Prepare(tr)
	var queries []string
	for _, tok := range hidden {
		if len(queries) < 6 && docToken.MatchString(tok) {
			queries = append(queries, tok)
		}
	}
	secret := len(queries)
	queries = append(queries, visible[:min(4, len(visible))]...)
	for i, q := range queries {
		res, err := s.Search(ctx, tr, q+"?mode=lexical&k=100")
		if err != nil {
			fail("search %s: %v", q, err)
		}
		if i < secret && len(res.Hits) > 0 {
			fail("a search for %s, a token of a hidden record, found %v", q, res.Hits[0].Path)
		}
		for _, h := range res.Hits {
			if _, ok := files[h.Path]; !ok {
				fail("search %s: a hit %q the view does not show", q, h.Path)
			}
			leaks("search hit "+h.Path, h.Path+"\n"+h.Text)
		}
	}
	return len(queries)
}

// TestViewSafety is the property (issue 28, finding 5): see the top of the
// file. Set CHROMAFS_SAFETY_SEED to rerun one case.
func TestViewSafety(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	iterations := 150
	if testing.Short() {
		iterations = 30
	}
	if s := os.Getenv("CHROMAFS_SAFETY_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CHROMAFS_SAFETY_SEED=%q: %v", s, err)
		}
		seed, iterations = n, 1
	}
	t.Logf("seed %d (a failure names the seed of its case)", seed)
	var st safetyStats
	for i := range iterations {
		safetyCase(t, seed+uint64(i), 3, &st)
	}
	t.Logf("%d collections; %d views built both ways (%d with hidden and visible records), %d files, %d hidden tokens, %d searches",
		iterations, st.views, st.mixed, st.files, st.hiddenTokens, st.searches)
	if iterations > 1 && (st.mixed < iterations/2 || st.files < iterations) {
		t.Errorf("the cases checked too little: %+v", st)
	}
}

// TestViewSafetyRedTeam pins the red team's collection (finding 2) as a
// case of the property: a path key a client chose groups a billing, an
// admin and a public record into one file, which a [billing] view must
// not see.
func TestViewSafetyRedTeam(t *testing.T) {
	recs := records{
		{ID: "b1", Doc: "billing Qx00000000b1xQ", Meta: map[string]any{"acl": "billing", "kind": "doc"}},
		{ID: "a1", Doc: "HUNTER2 Qx00000000a1xQ", Meta: map[string]any{"acl": "admin", "kind": "doc"}},
		{ID: "p1", Doc: "public Qx00000000p1xQ", Meta: map[string]any{"kind": "doc"}},
	}
	l := Layout{Name: "custom", PathKey: "kind", GroupsKey: "acl"}
	docs, byID := partsSource{}, map[string]chroma.RawRecord{}
	for _, r := range recs {
		docs[r.ID], byID[r.ID] = r.Doc, r
	}
	res, _, err := Scanned(context.Background(), recs, l, 100, []string{"billing"}, tree.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	visible := []string{"Qx00000000b1xQ", "Qx00000000p1xQ"}
	if n := checkView(t, res.Tree, docs, byID, []string{"acl"}, []string{"billing"}, visible, []string{"Qx00000000a1xQ", "HUNTER2"}, t.Fatalf); n == 0 {
		t.Fatal("no search ran")
	}
	if res.Tree.Lookup("doc") != nil {
		t.Fatal("the [billing] view shows doc")
	}
}

// FuzzViewSafety runs one case of the property per input: the seed of
// its collection, its layout and its views.
func FuzzViewSafety(f *testing.F) {
	for _, seed := range []uint64{1, 2, 3, 28, 1 << 40} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		safetyCase(t, seed, 2, &safetyStats{})
	})
}
