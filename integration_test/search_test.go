package integration_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
	"github.com/amikos-tech/chroma-go/pkg/embeddings"

	"github.com/chromafs/chromafs/internal/harness"
	"github.com/chromafs/chromafs/internal/testenv"
)

// The search corpus: 59 pages of the Node.js documentation
// (testdata/searchcorpus, SOURCE.md says where from), and what the test asks
// of it. One page is hidden from the public view: the test gives it the
// frontmatter groups: [staff] when it writes the source tree.
const (
	searchCorpus      = "testdata/searchcorpus"
	searchHidden      = "contributing/security-steward-on-off-boarding.md"
	searchHiddenFront = "---\ngroups: [staff]\n---\n"
	// searchHiddenQuery is a sentence of the hidden page, verbatim.
	searchHiddenQuery = "Confirm the new steward agrees to keep all private information confidential"
	embedKeyVar       = "CHROMAFS_TEST_EMBED_KEY"
)

// pageQuery is a query and the page it is meant to find.
type pageQuery struct{ page, query string }

// paraphrases ask for one page each in words the page does not use
// (TestSearchCorpus checks that); Universal Sentence Encoder lite ranks
// each page in the top 3 (measured).
var paraphrases = []pageQuery{
	{"contributing/code-of-conduct.md", "rules about respectful behaviour and harassment"},
	{"contributing/recognizing-contributors.md", "give credit and appreciation to volunteers"},
	{"contributing/managing-social-media-acounts.md", "who can tweet on behalf of the organization"},
	{"contributing/security-release-process.md", "patching exploits privately before announcing"},
	{"contributing/static-analysis.md", "automatic scanner for bugs in native sources"},
	{"contributing/streaming-to-youtube.md", "broadcast our calls to a web audience"},
	{"contributing/technical-values.md", "ranking of aims when tradeoffs arise"},
	{"contributing/advocacy-ambassador-program.md", "evangelists who give talks at meetups"},
	{"api/wasi.md", "sandboxed syscalls for compiled bytecode"},
	{"api/timers.md", "trigger my routine after a pause"},
}

// rareTerms are identifiers that occur in one page only; the model ranks
// none of these pages in its top 10 (measured), BM25 finds each.
var rareTerms = []pageQuery{
	{"api/embedding.md", "SpinEventLoop"},
	{"api/inspector.md", "DiscardConsoleEntries"},
	{"api/wasi.md", "wat2wasm"},
	{"contributing/advocacy-ambassador-program.md", "NodeConfEU"},
	{"contributing/maintaining/maintaining-dependencies.md", "HdrHistogram"},
	{"contributing/maintaining/maintaining-icu.md", "zoneinfo64"},
	{"contributing/maintaining/maintaining-root-certs.md", "OpenTrust"},
	{"contributing/writing-tests.md", "NodeTestFixture"},
}

// corpusPages reads the corpus: path (slash-separated, relative) to text.
func corpusPages(t *testing.T) map[string]string {
	t.Helper()
	root := filepath.Join(repoRoot(), "integration_test", searchCorpus)
	pages := map[string]string{}
	must(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		if rel == "SOURCE.md" {
			return nil
		}
		b, err := os.ReadFile(p)
		pages[filepath.ToSlash(rel)] = string(b)
		return err
	}))
	return pages
}

var searchWordRE = regexp.MustCompile(`[a-z0-9]+`)

// searchStopwords are the words a paraphrase may share with its page.
var searchStopwords = strings.Fields("a an the of to for in on at by with and or is are be as it its this that " +
	"what when how who may from into after before about without their them they you your our we can do does")

// searchWords is the set of lowercase words (letters and digits) of s.
func searchWords(s string) map[string]bool {
	out := map[string]bool{}
	for _, w := range searchWordRE.FindAllString(strings.ToLower(s), -1) {
		out[w] = true
	}
	return out
}

// TestSearchCorpus checks the corpus against what TestSearch assumes of it:
// 30 to 60 pages under 1 MB; each paraphrase shares no word (but stop
// words) with its page; each rare term is a word of its page and of no
// other; the hidden page holds the hidden query verbatim.
func TestSearchCorpus(t *testing.T) {
	pages := corpusPages(t)
	size := 0
	for _, text := range pages {
		size += len(text)
	}
	if len(pages) < 30 || len(pages) > 60 || size > 1<<20 {
		t.Errorf("corpus: %d pages, %d bytes; want 30 to 60 pages under 1 MiB", len(pages), size)
	}
	words := map[string]map[string]bool{}
	for p, text := range pages {
		words[p] = searchWords(text)
	}
	for _, q := range paraphrases {
		if _, ok := pages[q.page]; !ok {
			t.Errorf("paraphrase %q: no page %s", q.query, q.page)
			continue
		}
		var shared []string
		for w := range searchWords(q.query) {
			if words[q.page][w] && !slices.Contains(searchStopwords, w) {
				shared = append(shared, w)
			}
		}
		if len(shared) > 0 {
			t.Errorf("paraphrase %q shares %v with %s", q.query, shared, q.page)
		}
	}
	for _, q := range rareTerms {
		w := strings.ToLower(q.query)
		var in []string
		for p := range words {
			if words[p][w] {
				in = append(in, p)
			}
		}
		if len(in) != 1 || in[0] != q.page {
			t.Errorf("rare term %q is a word of %v, want of %s only", q.query, in, q.page)
		}
	}
	if !strings.Contains(pages[searchHidden], searchHiddenQuery) {
		t.Errorf("the hidden page %s does not hold %q", searchHidden, searchHiddenQuery)
	}
	if strings.HasPrefix(pages[searchHidden], "---") {
		t.Errorf("the hidden page has frontmatter of its own; the test adds it")
	}
}

// searchRig is what TestSearch sets up: the embed server, the source tree
// (every page: what the staff view sees) and the public view's local copy,
// a collection ingested from it with the real model and one ingested from
// the public pages alone with consistent_hash (no semantic search), and
// the mounts.
type searchRig struct {
	embed   *harness.EmbedServer
	all     string // the source: every page (the staff view's local copy)
	public  string // the public view's local copy: every page but searchHidden
	coll    string // ingested from all with the model
	nosem   string // ingested from public with consistent_hash
	chroma  v2.Collection
	records int // coll's record count

	pub, staff, noSem, off string // mounts: coll public, coll --groups staff, nosem, coll --search=false
	pubM, staffM, noSemM   *mount // the mounts at pub, staff and noSem (their metrics)
}

// requireEmbedServer starts the embed server on a free port with flags
// (skipping loudly, or failing under CI=true, when node or the model is
// missing).
func requireEmbedServer(t *testing.T, flags ...string) *harness.EmbedServer {
	t.Helper()
	missing := ""
	var s *harness.EmbedServer
	if _, err := exec.LookPath("node"); err != nil {
		missing = "node not installed (apt-get install nodejs npm)"
	} else if s, err = harness.StartEmbedServer(repoRoot(), 0, nil, flags...); err != nil {
		missing = err.Error()
	}
	testenv.Require(t, missing == "", "no embed server (the real model): %s", missing)
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Errorf("stop the embed server: %v", err)
		}
	})
	return s
}

func (r *searchRig) embeddingConfig() string { return embeddingConfig(r.embed) }

// embeddingConfig is --embedding-config for chroma-go's openai function
// at the embed server s.
func embeddingConfig(s *harness.EmbedServer) string {
	b, _ := json.Marshal(map[string]any{
		"api_key_env_var": embedKeyVar,
		"api_base":        s.URL() + "/v1",
		"model_name":      "text-embedding-3-small", // chroma-go checks it; the server ignores it
		"insecure":        true,
	})
	return string(b)
}

func embedEnv() []string { return []string{embedKeyVar + "=anything"} }

// newSearchRig writes the sources and ingests both collections.
func newSearchRig(t *testing.T) *searchRig {
	t.Helper()
	r := &searchRig{embed: requireEmbedServer(t)}
	parent := t.TempDir()
	r.all, r.public = filepath.Join(parent, "all"), filepath.Join(parent, "public")
	pages := corpusPages(t)
	for p, text := range pages {
		if p == searchHidden {
			text = searchHiddenFront + text
		} else {
			copyFile(t, filepath.Join(r.public, p), strings.NewReader(text))
		}
		copyFile(t, filepath.Join(r.all, p), strings.NewReader(text))
	}
	sameMtimes(t, r.all, r.public)

	r.coll, r.nosem = collectionName(t), collectionName(t)+"-nosem"
	start := time.Now()
	// the embedding stage has its own deadline: Chroma's default --timeout
	// is enough however slow the model (issue 33)
	if _, errOut, code := ingestCmd(t, embedEnv(), "--chroma-url", env.url, "--collection", r.coll, "--quiet",
		"--embedding", "openai", "--embedding-config", r.embeddingConfig(), r.all); code != 0 {
		t.Fatalf("ingest with the embed server: exit %d: %s", code, errOut)
	}
	t.Logf("ingest of %d pages with the real model: %s", len(pages), time.Since(start).Round(time.Millisecond))
	if _, errOut, code := ingestCmd(t, nil, "--chroma-url", env.url, "--collection", r.nosem, "--quiet", r.public); code != 0 {
		t.Fatalf("ingest with consistent_hash: exit %d: %s", code, errOut)
	}
	readOnlyTree(t, r.all)
	readOnlyTree(t, r.public)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	client, err := v2.NewHTTPClient(v2.WithBaseURL(env.url), v2.WithDefaultDatabaseAndTenant(),
		v2.WithHTTPClient(&http.Client{Timeout: 30 * time.Second}))
	must(t, err)
	t.Cleanup(func() { _ = client.Close() })
	// an embedding function given here keeps chroma-go from building the
	// stored one; the test embeds its queries itself
	r.chroma, err = client.GetCollection(ctx, r.coll, v2.WithEmbeddingFunctionGet(embeddings.NewConsistentHashEmbeddingFunction()))
	must(t, err)
	r.records, err = r.chroma.Count(ctx)
	must(t, err)
	return r
}

// sameMtimes gives every path of the trees a fixed mtime named by its
// relative path, so that both trees (one a subset of the other) agree.
func sameMtimes(t *testing.T, roots ...string) {
	t.Helper()
	for _, root := range roots {
		var all []string
		must(t, filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
			all = append(all, p)
			return err
		}))
		for i := len(all) - 1; i >= 0; i-- { // deepest first: a directory keeps its own
			rel, err := filepath.Rel(root, all[i])
			must(t, err)
			h := int64(0)
			for _, c := range []byte(rel) {
				h = (h*131 + int64(c)) % 1e7
			}
			at := time.Unix(1790000000+h, h*7919%1e9)
			must(t, os.Chtimes(all[i], at, at))
		}
	}
}

// mountAll mounts the collections (the embed server's key in the env).
func (r *searchRig) mountAll(t *testing.T) {
	t.Helper()
	parent := t.TempDir()
	dirs := map[string]*string{"pub": &r.pub, "staff": &r.staff, "nosem": &r.noSem, "off": &r.off}
	for name, p := range dirs {
		*p = filepath.Join(parent, name)
		must(t, os.Mkdir(*p, 0o755))
	}
	r.pubM = startMountEnv(t, embedEnv(), r.coll, r.pub, env.url)
	r.staffM = startMountEnv(t, embedEnv(), r.coll, r.staff, env.url, "--groups", "staff")
	r.noSemM = startMountEnv(t, embedEnv(), r.nosem, r.noSem, env.url)
	startMountEnv(t, embedEnv(), r.coll, r.off, env.url, "--search=false")
}

// embedQuery embeds text by asking the embed server itself.
func (r *searchRig) embedQuery(t *testing.T, text string) []float32 {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"input": []string{text}, "model": "text-embedding-3-small"})
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Post(r.embed.URL()+"/v1/embeddings", "application/json", bytes.NewReader(body))
	must(t, err)
	defer resp.Body.Close()
	var out struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("embed %q: %s", text, resp.Status)
	}
	must(t, json.NewDecoder(resp.Body).Decode(&out))
	if len(out.Data) != 1 || len(out.Data[0].Embedding) == 0 {
		t.Fatalf("embed %q: %d embeddings", text, len(out.Data))
	}
	return out.Data[0].Embedding
}

// semHit is a page of the independent semantic ranking.
type semHit struct {
	path string
	dist float64
}

// slugPaths maps the page slugs of a local copy (paths without their
// extension) to the pages' paths.
func slugPaths(t *testing.T, local string) map[string]string {
	t.Helper()
	files, err := harness.Files(local)
	must(t, err)
	m := map[string]string{}
	for _, f := range files {
		f = filepath.ToSlash(f)
		m[strings.TrimSuffix(f, path.Ext(f))] = f
	}
	return m
}

// semantic ranks the pages of the view whose local copy is local as the
// mount must: Chroma's nearest chunks to the query's embedding (n_results
// = min(300, records)), the chunks of pages the view hides dropped, folded
// by their page (its best chunk), by distance then path, top k.
func (r *searchRig) semantic(t *testing.T, query string, k int, local string) []semHit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := r.chroma.Query(ctx,
		v2.WithQueryEmbeddings(embeddings.NewEmbeddingFromFloat32(r.embedQuery(t, query))),
		v2.WithNResults(min(300, r.records)),
		v2.WithInclude(v2.IncludeMetadatas, v2.IncludeDistances))
	must(t, err)
	paths := slugPaths(t, local)
	best := map[string]float64{}
	mds, dists := res.GetMetadatasGroups(), res.GetDistancesGroups()
	if len(mds) != 1 || len(dists) != 1 || len(mds[0]) != len(dists[0]) {
		t.Fatalf("query %q: %d metadata groups, %d distance groups", query, len(mds), len(dists))
	}
	for i, md := range mds[0] {
		if md == nil {
			continue
		}
		slug, ok := md.GetString("page")
		p, visible := paths[slug]
		if !ok || !visible {
			continue // a tree record, or a page this view hides
		}
		if d, seen := best[p]; !seen || float64(dists[0][i]) < d {
			best[p] = float64(dists[0][i])
		}
	}
	hits := make([]semHit, 0, len(best))
	for p, d := range best {
		hits = append(hits, semHit{p, d})
	}
	sort.Slice(hits, func(i, j int) bool {
		if hits[i].dist != hits[j].dist {
			return hits[i].dist < hits[j].dist
		}
		return hits[i].path < hits[j].path
	})
	return hits[:min(k, len(hits))]
}

// searchEntry is one result of a .results file.
type searchEntry struct {
	rank  int
	score float64
	path  string
	text  []string // the chunk's lines, without their tab
}

// searchDir is a result directory of a mount as read.
type searchDir struct {
	query, mode string
	k, n        int
	entries     []searchEntry
	names       []string // the directory's entries, sorted
	raw         string   // .results
}

func (d searchDir) paths() []string {
	out := make([]string, len(d.entries))
	for i, e := range d.entries {
		out[i] = e.path
	}
	return out
}

func (d searchDir) rankOf(p string) int {
	for _, e := range d.entries {
		if e.path == p {
			return e.rank
		}
	}
	return 0
}

var (
	resultsHeader = regexp.MustCompile(`^# chromafs search: ("(?:[^"\\]|\\.)*") mode=([a-z]+) k=([0-9]+): ([0-9]+) results$`)
	resultLine    = regexp.MustCompile(`^([0-9]+)\t([^\t]+)\t(.+)$`)
)

// parseResults parses a .results file.
func parseResults(raw string) (searchDir, error) {
	var d searchDir
	d.raw = raw
	lines := strings.Split(strings.TrimSuffix(raw, "\n"), "\n")
	m := resultsHeader.FindStringSubmatch(lines[0])
	if m == nil {
		return d, fmt.Errorf("header %q is not the documented one", lines[0])
	}
	q, err := strconv.Unquote(m[1])
	if err != nil {
		return d, fmt.Errorf("header %q: the query: %w", lines[0], err)
	}
	d.query, d.mode = q, m[2]
	d.k, _ = strconv.Atoi(m[3])
	d.n, _ = strconv.Atoi(m[4])
	var cur *searchEntry
	for i, line := range lines[1:] {
		switch {
		case cur == nil && strings.HasPrefix(line, "# "): // a remark after the header
		case cur == nil && resultLine.MatchString(line):
			m := resultLine.FindStringSubmatch(line)
			e := searchEntry{path: m[3]}
			e.rank, _ = strconv.Atoi(m[1])
			if e.score, err = strconv.ParseFloat(m[2], 64); err != nil {
				return d, fmt.Errorf("line %d %q: score: %w", i+2, line, err)
			}
			d.entries = append(d.entries, e)
			cur = &d.entries[len(d.entries)-1]
		case cur != nil && strings.HasPrefix(line, "\t"):
			cur.text = append(cur.text, line[1:])
		case cur != nil && line == "":
			cur = nil
		default:
			return d, fmt.Errorf("line %d %q: neither a result, a chunk's line nor the empty line ending one", i+2, line)
		}
	}
	return d, nil
}

// readSearch reads the result directory rel (".search/<q>" or
// ".similar/<path>") of mount mnt and checks its form against the view's
// local copy: .results parses, ranks count from 1, each result has a link
// named NN-<file name> pointing at ../(once per component of rel)<path>
// that reads as the page's bytes, each chunk line is a line of the page,
// and there is nothing else.
func readSearch(t *testing.T, mnt, rel, local string) searchDir {
	t.Helper()
	dir := filepath.Join(mnt, rel)
	raw, err := os.ReadFile(filepath.Join(dir, ".results"))
	if err != nil {
		t.Fatalf("cat %s/.results: %v", rel, err)
	}
	d, err := parseResults(string(raw))
	if err != nil {
		t.Fatalf("%s/.results: %v\n%s", rel, err, raw)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("ls %s: %v", rel, err)
	}
	for _, e := range ents {
		d.names = append(d.names, e.Name())
	}
	if d.n != len(d.entries) {
		t.Errorf("%s: the header says %d results, %d follow", rel, d.n, len(d.entries))
	}
	up := strings.Repeat("../", strings.Count(rel, "/")+1)
	width := max(2, len(strconv.Itoa(d.k)))
	want := []string{".results"}
	for _, e := range d.entries {
		want = append(want, fmt.Sprintf("%0*d-%s", width, e.rank, path.Base(e.path)))
	}
	sort.Strings(want)
	if !slices.Equal(d.names, want) {
		t.Errorf("ls -a %s = %q, want %q", rel, d.names, want)
		return d
	}
	for i, e := range d.entries {
		if e.rank != i+1 {
			t.Errorf("%s: result %d has rank %d", rel, i+1, e.rank)
		}
		name := fmt.Sprintf("%0*d-%s", width, e.rank, path.Base(e.path))
		page, err := os.ReadFile(filepath.Join(local, e.path))
		if err != nil {
			t.Errorf("%s: result %s is no page of the view: %v", rel, e.path, err)
			continue
		}
		target, err := os.Readlink(filepath.Join(dir, name))
		if err != nil || target != up+e.path {
			t.Errorf("%s: readlink %s = %q, %v; want %q", rel, name, target, err, up+e.path)
		}
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || !bytes.Equal(got, page) {
			t.Errorf("%s: %s reads %d bytes (%v), the page has %d", rel, name, len(got), err, len(page))
		}
		if len(e.text) == 0 {
			t.Errorf("%s: result %s shows no text", rel, e.path)
		}
		checkSnippets(t, rel, e, page)
	}
	if len(d.entries) <= 10 && len(d.raw) >= 10<<10 {
		t.Errorf("%s/.results is %d bytes: %d results should stay under 10 KiB", rel, len(d.raw), len(d.entries))
	}
	return d
}

// checkSnippets: a result shows 1-3 of its page's lines as grep -n shows
// them ("PATH:LINE: TEXT", each text at most 200 characters, cut with …)
// and at most 1 KiB in all; every page here was written by
// chromafs-ingest, so every line is numbered, and line LINE of the page
// begins with the text shown.
func checkSnippets(t *testing.T, rel string, e searchEntry, page []byte) {
	t.Helper()
	lines := strings.Split(string(page), "\n")
	size := 0
	if len(e.text) > 3 {
		t.Errorf("%s: result %s shows %d lines, want at most 3", rel, e.path, len(e.text))
	}
	for _, l := range e.text {
		size += len(l) + 2
		rest, ok := strings.CutPrefix(l, e.path+":")
		num, text, ok2 := strings.Cut(rest, ": ")
		n, err := strconv.Atoi(num)
		if !ok || !ok2 || err != nil || n < 1 || n > len(lines) {
			t.Errorf("%s: result %s shows %q, not %s:LINE: TEXT of a line of the page", rel, e.path, l, e.path)
			continue
		}
		want := strings.TrimRight(lines[n-1], "\r")
		if cut, ok := strings.CutSuffix(text, "…"); ok && utf8.RuneCountInString(text) == 200 {
			text, want = cut, want[:min(len(want), len(cut))]
		}
		if text != want {
			t.Errorf("%s: result %s shows line %d as %q; the page's line %d is %q", rel, e.path, n, text, n, lines[n-1])
		}
	}
	if size > 1<<10 {
		t.Errorf("%s: result %s shows %d bytes of lines, want at most 1 KiB", rel, e.path, size)
	}
}

func searchPath(query string) string { return filepath.Join(".search", query) }

// TestSearch: the .search/ and .similar/ directories of real mounts of a
// collection ingested with a real model (the embed server), compared with
// an independent computation against Chroma and with local copies.
func TestSearch(t *testing.T) {
	requireServer(t)
	r := newSearchRig(t)

	t.Run("stored-embedding-function", func(t *testing.T) { searchStoredFunction(t, r) })
	t.Run("model-finds-the-paraphrases", func(t *testing.T) {
		slugs := map[string]bool{}
		for slug := range slugPaths(t, r.all) {
			slugs[slug] = true
		}
		all := r.semantic(t, "anything at all", 1000, r.all)
		if len(all) != len(slugs) {
			t.Errorf("the nearest chunks name %d pages of the source's %d: slugs are not paths without extension?", len(all), len(slugs))
		}
		for _, q := range paraphrases {
			hits := r.semantic(t, q.query, 10, r.public)
			if !slices.ContainsFunc(hits, func(h semHit) bool { return h.path == q.page }) {
				t.Errorf("the model does not rank %s in the top 10 for %q: %v", q.page, q.query, hits)
			}
		}
	})

	requireFUSE(t)
	mounted := time.Now()
	r.mountAll(t)
	t.Logf("4 mounts in %s", time.Since(mounted).Round(time.Millisecond))

	t.Run("unlisted", func(t *testing.T) { searchUnlisted(t, viewCopy{r.pub, r.public}, viewCopy{r.staff, r.all}) })
	t.Run("readme", func(t *testing.T) { searchReadme(t, r) })
	t.Run("semantic-equals-chroma", func(t *testing.T) { searchSemanticEqualsChroma(t, r) })
	t.Run("query-sets", func(t *testing.T) { searchQuerySets(t, r) })
	t.Run("hidden-page", func(t *testing.T) { searchHiddenPage(t, r) })
	t.Run("result-directory-tools", func(t *testing.T) { searchWithTools(t, r) })
	t.Run("query-options", func(t *testing.T) { searchOptions(t, r) })
	t.Run("similar", func(t *testing.T) { searchSimilar(t, r) })
	t.Run("no-semantic", func(t *testing.T) { searchNoSemantic(t, r) })
	t.Run("search-off", func(t *testing.T) { searchOff(t, r) })
	t.Run("embedding-flags", func(t *testing.T) { searchEmbeddingFlags(t, r) })
	// "not listed ... after searches too": the subtests above searched on
	// these mounts. The kernel keeps a listing (FOPEN_CACHE_DIR), so pub
	// and staff may answer from what "unlisted" read before any search;
	// noSem's tree was never listed before: the kernel asks the mount.
	t.Run("unlisted-after-searches", func(t *testing.T) {
		for _, m := range []*mount{r.pubM, r.staffM, r.noSemM} {
			if n := m.metric(t, "chromafs_searches_total"); n == 0 {
				t.Fatalf("%s has run no search: the check below would be the one before searches again", m.dir)
			}
		}
		searchUnlisted(t, viewCopy{r.noSem, r.public}, viewCopy{r.pub, r.public}, viewCopy{r.staff, r.all})
	})
}

// searchCost runs fn (which searches on m) and returns how many searches
// the mount ran meanwhile and how many queries by embedding it sent to
// Chroma (chromafs_searches_total, chromafs_search_chroma_queries_total).
func searchCost(t *testing.T, m *mount, fn func()) (searches, queries int64) {
	t.Helper()
	names := []string{"chromafs_searches_total", "chromafs_search_chroma_queries_total"}
	before, err := harness.Metrics(m.metrics, names...)
	must(t, err)
	fn()
	after, err := harness.Metrics(m.metrics, names...)
	must(t, err)
	return after[names[0]] - before[names[0]], after[names[1]] - before[names[1]]
}

// searchStoredFunction: Chroma keeps the embedding function's
// configuration with the collection (what the mount uses).
func searchStoredFunction(t *testing.T, r *searchRig) {
	raw, ok := r.chroma.Configuration().GetRaw("embedding_function")
	if !ok {
		t.Fatal("the collection keeps no embedding_function configuration")
	}
	b, err := json.Marshal(raw)
	must(t, err)
	var info v2.EmbeddingFunctionInfo
	must(t, json.Unmarshal(b, &info))
	t.Logf("configuration.embedding_function: %s", b)
	want := map[string]any{"api_key_env_var": embedKeyVar, "api_base": r.embed.URL() + "/v1",
		"model_name": "text-embedding-3-small", "insecure": true}
	if info.Type != "known" || info.Name != "openai" {
		t.Errorf("embedding_function %s, want the known function openai", b)
	}
	for k, v := range want {
		if info.Config[k] != v {
			t.Errorf("embedding_function.config.%s = %v, want %v", k, info.Config[k], v)
		}
	}
	if _, ok := info.Config["api_key"]; ok {
		t.Error("the stored configuration holds the API key itself")
	}
}

// viewCopy is a mount and the local copy of what its view shows.
type viewCopy struct{ mnt, local string }

// searchUnlisted: .search and .similar are in no listing of the views,
// and nothing sees them but a lookup by name.
func searchUnlisted(t *testing.T, views ...viewCopy) {
	for _, v := range views {
		for _, s := range []string{
			// the root's parent is another directory; a directory above a
			// hidden page takes the newest mtime of what the view shows
			"ls -a", "ls -lanR --time-style=+TS . | grep -v -e '^total' -e ' \\.\\.$'", "find . | sort", "du -ab . | sort",
			"tar cf - . | tar tvf - --numeric-owner | sed -E 's/[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}/TS/' | sort",
			"grep -rn steward . | sort", "grep -rc Node . | sort",
		} {
			sameOutput(t, v.mnt, v.local, s)
		}
		// rsync from the mount onto the local copy: no name to add or delete, no content to change
		if out, code := sh(t, v.local, fmt.Sprintf("rsync -rnci --delete %s/ ./", v.mnt), true); code != 0 || out != "" {
			t.Errorf("rsync -rnci --delete of the mount onto its local copy: exit %d, differences:\n%.2000s", code, out)
		}
		for _, name := range []string{".search", ".similar", ".search/.README"} {
			if _, err := os.Stat(filepath.Join(v.mnt, name)); err != nil {
				t.Errorf("stat %s: %v, want a lookup by name to work", name, err)
			}
		}
	}
}

// searchReadme: .search/.README says how to search and which modes work.
func searchReadme(t *testing.T, r *searchRig) {
	notAvailable := regexp.MustCompile(`(?i)semantic[^\n]*(not available|unavailable)`)
	for _, v := range []struct {
		mnt      string
		semantic bool
	}{{r.pub, true}, {r.staff, true}, {r.noSem, false}} {
		b, err := os.ReadFile(filepath.Join(v.mnt, ".search/.README"))
		if err != nil {
			t.Errorf("cat .search/.README: %v", err)
			continue
		}
		text := string(b)
		if !strings.Contains(text, "semantic") || !strings.Contains(text, "lexical") {
			t.Errorf("%s: .README names not the modes semantic and lexical:\n%s", v.mnt, text)
		}
		if says := notAvailable.MatchString(text); says == v.semantic {
			t.Errorf("%s: .README says semantic is not available: %v, want %v:\n%s", v.mnt, says, !v.semantic, text)
		}
	}
}

// searchSemanticEqualsChroma: mode=semantic lists exactly the pages the
// independent computation ranks, in order, with its scores (1 − distance),
// in the public and the staff view, for k of 10, 5 and 100.
func searchSemanticEqualsChroma(t *testing.T, r *searchRig) {
	queries := []struct {
		q string
		k int
	}{{searchHiddenQuery, 10}, {"how do I debug a memory leak", 5}, {"release schedule", 100}}
	for _, q := range append(paraphrases, rareTerms...) {
		queries = append(queries, struct {
			q string
			k int
		}{q.query, 10})
	}
	views := []struct {
		name, mnt, local string
		m                *mount
	}{{"public", r.pub, r.public, r.pubM}, {"staff", r.staff, r.all, r.staffM}}
	for _, v := range views {
		for _, q := range queries {
			name := q.q + "?mode=semantic"
			if q.k != 10 {
				name += fmt.Sprintf("&k=%d", q.k)
			}
			want := r.semantic(t, q.q, q.k, v.local)
			var got searchDir
			// one Chroma query per search (SEMANTICS, Costs): each query
			// here is new to the mount, and read whole (.results, the
			// listing, every link) it is still one search
			searches, queries := searchCost(t, v.m, func() { got = readSearch(t, v.mnt, searchPath(name), v.local) })
			if searches != 1 || queries != 1 {
				t.Errorf("%s %q: %d searches, %d Chroma queries; want one search, one query", v.name, name, searches, queries)
			}
			if got.mode != "semantic" || got.k != q.k || got.query != q.q {
				t.Errorf("%s %q: header says query %q mode=%s k=%d", v.name, name, got.query, got.mode, got.k)
			}
			wantPaths := make([]string, len(want))
			for i, h := range want {
				wantPaths[i] = h.path
			}
			if !slices.Equal(got.paths(), wantPaths) {
				t.Errorf("%s %q: the mount ranks\n  %q\nChroma's nearest chunks rank\n  %q", v.name, name, got.paths(), wantPaths)
				continue
			}
			for i, h := range want {
				if s := got.entries[i].score; math.Abs(s-(1-h.dist)) > 1e-5*math.Max(1, math.Abs(s)) {
					t.Errorf("%s %q: %s scores %v, want 1 − distance = %v", v.name, name, h.path, s, 1-h.dist)
				}
			}
		}
	}
	// issue 31: a semantic query new to the mount is one request to
	// Chroma in all (the model's embedding aside), not one query among
	// others: .results read alone (its links are the pages, read apart)
	name := "how do timers order their callbacks?mode=semantic&k=5"
	before := r.pubM.metric(t, "chromafs_chroma_requests_total")
	if _, err := os.ReadFile(filepath.Join(r.pub, searchPath(name), ".results")); err != nil {
		t.Fatalf("cat %s/.results: %v", name, err)
	}
	if n := r.pubM.metric(t, "chromafs_chroma_requests_total") - before; n != 1 {
		t.Errorf("%q: %d requests to Chroma, want 1", name, n)
	}
}

// searchQuerySets: paraphrases find their page semantically and in
// hybrid; rare terms find theirs lexically (first: no other page holds
// them); on each set, hybrid finds at most one page fewer than the better
// of the other two modes.
func searchQuerySets(t *testing.T, r *searchRig) {
	sets := []struct {
		name    string
		queries []pageQuery
		must    []string // the modes that must find every page
	}{{"paraphrase", paraphrases, []string{"semantic", "hybrid"}}, {"rare-term", rareTerms, []string{"lexical"}}}
	for _, set := range sets {
		found := map[string]int{}
		for _, q := range set.queries {
			for _, mode := range []string{"semantic", "lexical", "hybrid"} {
				var d searchDir
				searches, queries := searchCost(t, r.pubM, func() { d = readSearch(t, r.pub, searchPath(q.query+"?mode="+mode), r.public) })
				// a lexical search asks Chroma no query; a semantic or hybrid
				// one asks one, and none when its answer is kept (the
				// semantic ones were asked by semantic-equals-chroma); no
				// hybrid one was asked before
				wantQueries := searches
				if mode == "lexical" {
					wantQueries = 0
				}
				if searches > 1 || queries != wantQueries || (mode == "hybrid" && searches != 1) {
					t.Errorf("%s query %q, mode=%s: %d searches, %d Chroma queries; want at most one search, and %d queries",
						set.name, q.query, mode, searches, queries, wantQueries)
				}
				rank := d.rankOf(q.page)
				if rank > 0 {
					found[mode]++
				}
				t.Logf("%s %-9s %-50q %s rank %d of %d", set.name, mode, q.query, q.page, rank, d.n)
				if rank == 0 && slices.Contains(set.must, mode) {
					t.Errorf("%s query %q, mode=%s: %s is not in the top %d: %q", set.name, q.query, mode, q.page, d.k, d.paths())
				}
				if set.name == "rare-term" && mode == "lexical" && (rank != 1 || d.n != 1) {
					t.Errorf("rare term %q, mode=lexical: %s ranks %d of %d; it is the only page with the word", q.query, q.page, rank, d.n)
				}
			}
		}
		best := max(found["semantic"], found["lexical"])
		t.Logf("%s queries: found by semantic %d, lexical %d, hybrid %d of %d", set.name, found["semantic"], found["lexical"], found["hybrid"], len(set.queries))
		if found["hybrid"] < best-1 {
			t.Errorf("%s queries: hybrid finds %d pages, the better of semantic and lexical %d", set.name, found["hybrid"], best)
		}
	}
}

// searchHiddenLines are the lines of the hidden page no public page holds.
func searchHiddenLines(t *testing.T) []string {
	t.Helper()
	pages := corpusPages(t)
	var out []string
	for _, line := range strings.Split(pages[searchHidden], "\n") {
		line = strings.TrimSpace(strings.TrimLeft(line, "*# "))
		if len(line) < 12 {
			continue
		}
		elsewhere := false
		for p, text := range pages {
			if p != searchHidden && strings.Contains(text, line) {
				elsewhere = true
				break
			}
		}
		if !elsewhere {
			out = append(out, line)
		}
	}
	if len(out) < 5 {
		t.Fatalf("the hidden page has only %d lines of its own", len(out))
	}
	return out
}

// searchHiddenPage: a query of the hidden page's own words shows nothing
// of it in the public view in any mode (no link, no path, no line of it;
// lexically the very results of a collection without it), and .similar/
// of it does not exist there; the staff view finds it in every mode.
func searchHiddenPage(t *testing.T, r *searchRig) {
	own := searchHiddenLines(t)
	base := path.Base(searchHidden)
	for _, q := range []string{searchHiddenQuery, "security stewards HackerOne onboarding offboarding"} {
		for _, mode := range []string{"semantic", "lexical", "hybrid"} {
			rel := searchPath(q + "?mode=" + mode)
			d := readSearch(t, r.pub, rel, r.public)
			for _, name := range d.names {
				if strings.HasSuffix(name, base) {
					t.Errorf("public %s lists %s", rel, name)
				}
			}
			// a public page may name the hidden one (a link to it); no result
			// may be it, and no line shown may be one of its own
			if d.rankOf(searchHidden) != 0 {
				t.Errorf("public %s ranks the hidden page:\n%s", rel, d.raw)
			}
			for _, e := range d.entries {
				for _, text := range e.text {
					for _, line := range own {
						if strings.Contains(text, line) {
							t.Errorf("public %s/.results shows the hidden page's line %q (as %s's)", rel, line, e.path)
						}
					}
				}
			}
			if mode == "lexical" {
				// BM25 over the public pages alone: the same results as a
				// collection that never held the hidden page
				ref := readSearch(t, r.noSem, rel, r.public)
				if d.raw != ref.raw {
					t.Errorf("public %s differs from a collection without the hidden page:\n%s\nwithout it:\n%s", rel, d.raw, ref.raw)
				}
			}
			s := readSearch(t, r.staff, rel, r.all)
			if rank := s.rankOf(searchHidden); rank == 0 {
				t.Errorf("staff %s: the hidden page is not in the top %d: %q", rel, s.k, s.paths())
			}
		}
	}
	rel := filepath.Join(".similar", searchHidden)
	if _, err := os.Stat(filepath.Join(r.pub, rel)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("public stat %s: %v, want ENOENT", rel, err)
	}
	d := readSearch(t, r.staff, rel, r.all)
	if d.n == 0 {
		t.Errorf("staff %s lists nothing", rel)
	}
}

// searchWithTools: ls, cat .results, readlink and find -L in a result
// directory work as on any directory of links, and md5sum through the
// links gives the pages' digests.
func searchWithTools(t *testing.T, r *searchRig) {
	q := paraphrases[0]
	rel := searchPath(q.query + "?k=5")
	d := readSearch(t, r.pub, rel, r.public)
	dir := filepath.Join(r.pub, rel)
	out, code := sh(t, dir, "ls", false)
	if want := strings.Join(d.names[1:], "\n") + "\n"; code != 0 || out != want {
		t.Errorf("ls: exit %d %q, want %q", code, out, want)
	}
	if out, code := sh(t, dir, "cat .results", false); code != 0 || out != d.raw {
		t.Errorf("cat .results: exit %d, %d bytes, want the %d read", code, len(out), len(d.raw))
	}
	out, code = sh(t, dir, "for l in [0-9]*; do readlink \"$l\"; done", false)
	var targets, sums []string
	for _, e := range d.entries {
		targets = append(targets, "../../"+e.path)
		sum, _ := sh(t, r.public, "md5sum < "+shellQuote(e.path), false)
		sums = append(sums, strings.Fields(sum)[0])
	}
	if want := strings.Join(targets, "\n") + "\n"; code != 0 || out != want {
		t.Errorf("readlink: exit %d %q, want %q", code, out, want)
	}
	out, code = sh(t, dir, "for l in [0-9]*; do md5sum < \"$l\"; done | cut -d' ' -f1", false)
	if want := strings.Join(sums, "\n") + "\n"; code != 0 || out != want {
		t.Errorf("md5sum through the links: exit %d %q, want %q", code, out, want)
	}
	out, code = sh(t, dir, "find -L . -type f | sort", false)
	var files []string
	for _, n := range d.names {
		files = append(files, "./"+n)
	}
	if want := strings.Join(files, "\n") + "\n"; code != 0 || out != want {
		t.Errorf("find -L . -type f: exit %d %q, want %q", code, out, want)
	}
	if d.n != 5 || d.rankOf(q.page) == 0 {
		t.Errorf("%s: %d results %q, want 5 with %s", rel, d.n, d.paths(), q.page)
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// searchOptions: the query and its options as the directory name gives
// them; a bad value of a known option is EINVAL; k=100 names links with
// three digits.
func searchOptions(t *testing.T, r *searchRig) {
	for _, c := range []struct {
		name, query, mode string
		k                 int
	}{
		{"timers", "timers", "hybrid", 10},
		{"timers?mode=lexical&k=3", "timers", "lexical", 3},
		{"timers?k=7&mode=semantic", "timers", "semantic", 7},
		{"what is a timer?", "what is a timer?", "hybrid", 10},
		{"timers?k=3&colour=blue", "timers?k=3&colour=blue", "hybrid", 10},
		{"a?b?k=4", "a?b", "hybrid", 4},
	} {
		d := readSearch(t, r.pub, searchPath(c.name), r.public)
		if d.query != c.query || d.mode != c.mode || d.k != c.k {
			t.Errorf("%q: query %q mode=%s k=%d, want %q mode=%s k=%d", c.name, d.query, d.mode, d.k, c.query, c.mode, c.k)
		}
		if d.n > d.k {
			t.Errorf("%q: %d results for k=%d", c.name, d.n, d.k)
		}
	}
	for _, name := range []string{"timers?k=0", "timers?k=abc", "timers?k=101", "timers?mode=fuzzy", "timers?mode=lexical&k=-1"} {
		if _, err := os.Stat(filepath.Join(r.pub, searchPath(name))); !errors.Is(err, syscall.EINVAL) {
			t.Errorf("stat .search/%s: %v, want EINVAL", name, err)
		}
	}
	d := readSearch(t, r.staff, searchPath("node?k=100&mode=semantic"), r.all)
	if d.n != len(slugPaths(t, r.all)) {
		t.Errorf("k=100 in the staff view: %d results, want every one of its %d pages", d.n, len(slugPaths(t, r.all)))
	}
	if len(d.names) < 2 || !strings.HasPrefix(d.names[1], "001-") {
		t.Errorf("k=100: the links are %q, want 001-...", d.names)
	}
}

// searchSimilar: .similar/<path>/ lists other pages of the view, linked
// from that deeper directory.
func searchSimilar(t *testing.T, r *searchRig) {
	for _, p := range []string{"api/timers.md", "contributing/maintaining/maintaining-openssl.md", "contributing/security-release-process.md"} {
		rel := filepath.Join(".similar", p)
		var d searchDir
		// one get of the page's vectors and one query (SEMANTICS, Costs)
		if searches, queries := searchCost(t, r.pubM, func() { d = readSearch(t, r.pub, rel, r.public) }); searches != 1 || queries != 1 {
			t.Errorf("%s: %d searches, %d Chroma queries; want one search, one query", rel, searches, queries)
		}
		if d.n == 0 || d.n > d.k {
			t.Errorf("%s: %d results for k=%d", rel, d.n, d.k)
		}
		if d.rankOf(p) != 0 {
			t.Errorf("%s lists the page itself: %q", rel, d.paths())
		}
		if d.rankOf(searchHidden) != 0 {
			t.Errorf("public %s lists the hidden page", rel)
		}
	}
	for _, p := range []string{"nope.md", "api/nope.md", "nope/timers.md"} {
		if _, err := os.Stat(filepath.Join(r.pub, ".similar", p)); err == nil {
			t.Errorf("stat .similar/%s: no error; it is no page", p)
		}
	}
}

// searchNoSemantic: a collection ingested with consistent_hash has no
// semantic search (EOPNOTSUPP), and its hybrid ranks as lexical does.
func searchNoSemantic(t *testing.T, r *searchRig) {
	for _, name := range []string{"timers?mode=semantic", "timers?mode=semantic&k=5"} {
		if _, err := os.Stat(filepath.Join(r.noSem, searchPath(name))); !errors.Is(err, syscall.EOPNOTSUPP) {
			t.Errorf("consistent_hash collection: stat .search/%s: %v, want EOPNOTSUPP", name, err)
		}
	}
	out, code := sh(t, r.noSem, "ls '.search/timers?mode=semantic'", true)
	if code == 0 || !strings.Contains(out, "Operation not supported") {
		t.Errorf("ls of a semantic search without a model: exit %d %q, want \"Operation not supported\"", code, out)
	}
	for _, q := range append(rareTerms[:3], paraphrases[:3]...) {
		h := readSearch(t, r.noSem, searchPath(q.query), r.public)
		l := readSearch(t, r.noSem, searchPath(q.query+"?mode=lexical"), r.public)
		if !slices.Equal(h.paths(), l.paths()) {
			t.Errorf("consistent_hash collection, %q: hybrid ranks %q, lexical %q", q.query, h.paths(), l.paths())
		}
	}
	if _, err := os.Stat(filepath.Join(r.noSem, ".similar", "api/timers.md")); err == nil {
		t.Error("consistent_hash collection: .similar/ answers; its stored vectors mean nothing")
	}
}

// searchOff: --search=false has neither directory.
func searchOff(t *testing.T, r *searchRig) {
	for _, name := range []string{".search", ".similar", ".search/.README", ".search/timers", ".similar/api/timers.md"} {
		if _, err := os.Lstat(filepath.Join(r.off, name)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("--search=false: lstat %s: %v, want ENOENT", name, err)
		}
	}
	sameOutput(t, r.off, r.public, "find . | sort")
}

// searchEmbeddingFlags: without the key its stored configuration names,
// the collection's function is not usable (semantic is EOPNOTSUPP);
// --embedding and --embedding-config then give one, here the same model
// behind another key variable, and semantic ranks as Chroma does.
func searchEmbeddingFlags(t *testing.T, r *searchRig) {
	if _, set := os.LookupEnv(embedKeyVar); set {
		t.Setenv(embedKeyVar, "") // restored after the test
		must(t, os.Unsetenv(embedKeyVar))
	}
	parent := t.TempDir()
	noKey, flags := filepath.Join(parent, "nokey"), filepath.Join(parent, "flags")
	must(t, os.Mkdir(noKey, 0o755))
	must(t, os.Mkdir(flags, 0o755))
	startMount(t, r.coll, noKey)
	q := paraphrases[0].query + "?mode=semantic"
	if _, err := os.Stat(filepath.Join(noKey, searchPath(q))); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Errorf("without %s: stat .search/%s: %v, want EOPNOTSUPP", embedKeyVar, q, err)
	}
	cfg := strings.Replace(r.embeddingConfig(), embedKeyVar, embedKeyVar+"_OTHER", 1)
	startMountEnv(t, []string{embedKeyVar + "_OTHER=anything"}, r.coll, flags, env.url, "--embedding", "openai", "--embedding-config", cfg)
	d := readSearch(t, flags, searchPath(q), r.public)
	var want []string
	for _, h := range r.semantic(t, paraphrases[0].query, 10, r.public) {
		want = append(want, h.path)
	}
	if !slices.Equal(d.paths(), want) {
		t.Errorf("--embedding openai: the mount ranks %q, Chroma's nearest chunks %q", d.paths(), want)
	}
}
