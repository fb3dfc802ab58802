package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/harness"
)

// The search figures (.search/QUERY/ at the root of every mount): what
// an agent waits for `ls` of a result directory, cold and warm, next to a
// warm `grep -rl WORD MOUNT` of the same mount (the search it replaces),
// and what the lexical index costs, read from the mount's metrics.
//
// Cold is the first search of a fresh mount on an empty host cache (the
// index is built then: every page read from Chroma and tokenized), and
// the first search of a second mount on that host cache (the index read
// from the host tier: chromafs_search_index_built must be 0). Warm is a
// new query once the index is ready, and the same query again (answered
// by the kernel's caches or the searcher's results). The lexical corpora
// are ingested with the default embedding (consistent_hash: no meaning,
// lexical search only); the semantic figures ingest a corpus of short
// pages through a real model (harness.StartEmbedServer) and time
// mode=semantic, or say in their row why they could not.
//
// The pages are the bench's docs-like corpus (internal/corpus) with a
// topical text of about the same size added to each: sentences of docs
// words drawn from a Zipf distribution, a third of them the page's own
// three topic terms, so that BM25 has frequent and rare terms to weigh
// and a query's pages to find.

// searchScale is how much of the search figures a run measures.
type searchScale struct {
	sizes    []int // pages of the lexical corpora
	semPages int   // pages of the semantic corpus; 0: none
	queries  int   // queries timed warm (new, then again), and grepped
}

func searchScaleFor(c *config) searchScale {
	if c.smoke { // small corpora: the smoke run stays short
		return searchScale{sizes: []int{300}, semPages: 40, queries: 3}
	}
	// The model embeds about 12 chunks a second here (2 cores): 500 pages
	// of one chunk take 40 s to ingest, 1,000 twice that; a search's
	// latency is one embedding and one Chroma query either way.
	return searchScale{sizes: c.files, semPages: 500, queries: len(searchQueries) - 1}
}

// searchQueries are the queries of the figures: the first is the cold
// one of every mount, the others the warm ones. Each one's first word is
// what the grep baseline looks for.
var searchQueries = []string{
	"rotate api keys",
	"webhook signature verification",
	"retry with exponential backoff",
	"kubernetes helm deployment",
	"oauth token refresh",
	"pagination cursor",
	"backup and restore a snapshot",
	"billing invoice refund",
	"quota exceeded rate limit",
	"tls certificate renewal",
	"sso saml login",
}

// searchVocab is the words of the topical text, most frequent first (the
// Zipf ranks); the query words are spread over the ranks.
var searchVocab = strings.Fields(`request response client server config api data file
error page user key token service endpoint version update default value
field object string list create delete set option parameter header status
run build install deploy cluster node database query index collection document
search filter sort limit rate retry timeout cache memory disk storage bucket
upload download stream directory path permission role group team account
organization project environment variable secret password session login
webhook event payload signature verification verify queue worker job schedule
cron batch transaction table column row schema migration upgrade release
changelog deprecated breaking sdk library python javascript typescript golang
java ruby package dependency test debug log logging metric monitoring alert
dashboard trace span latency throughput kubernetes helm deployment container
image registry docker pod ingress balancer dns domain certificate tls proxy
firewall network subnet region zone replica shard partition backup restore
snapshot billing invoice subscription plan payment refund customer admin
audit policy access control oauth saml sso refresh rotate rotation revoke
expire exponential backoff pagination cursor offset quota exceeded renewal
vector embedding chunk metadata integer boolean array json yaml notification
email template theme navigation sidebar analytics export import sync mirror
fallback failover availability maintenance incident postmortem`)

var stopWords = strings.Fields("the a of to and in is it you that for on are with as be at this by or an from can your when")

// searchCorpus is one corpus of the search figures, generated and ingested.
type searchCorpus struct {
	label, coll, dir, src string
	files                 int
	bytes                 int64
}

// newSearchCorpus generates a corpus of n pages (short ones when short:
// one chunk each) into a directory of its own and ingests it into a new
// collection with the extra chromafs-ingest flags.
func newSearchCorpus(c *config, r *report, n int, short bool, extra ...string) (*searchCorpus, error) {
	kind := "lexical"
	if short {
		kind = "semantic"
	}
	s := &searchCorpus{dir: filepath.Join(c.work, fmt.Sprintf("search-%s-%d", kind, n))}
	s.src = filepath.Join(s.dir, "src")
	spec := corpus.Spec{Files: n, PerDir: 10, MaxDepth: 5, Seed: uint64(n) + 41, MinSize: 1 << 10, MaxSize: 10 << 10}
	if short {
		spec.MinSize, spec.MaxSize = 100, 250
	}
	if err := os.MkdirAll(s.src, 0o755); err != nil {
		return nil, err
	}
	logf("search: generating %d pages", n)
	if _, err := corpus.Generate(s.src, spec); err != nil {
		return nil, err
	}
	var err error
	if s.files, s.bytes, err = addTopicalText(s.src, spec.Seed); err != nil {
		return nil, err
	}
	s.coll = fmt.Sprintf("bench-search-%s-%d-%d", kind, n, time.Now().Unix())
	took, err := ingest(c, s.coll, s.src, extra...)
	if err != nil {
		return nil, err
	}
	s.label = fmt.Sprintf("%d files", s.files)
	if short {
		s.label = fmt.Sprintf("%d short pages", s.files)
	}
	r.note("search, %s (%s): %.1f MiB, ingested in %s (%.0f files/s)", s.label, kind, float64(s.bytes)/(1<<20),
		took.Round(time.Millisecond), float64(s.files)/took.Seconds())
	return s, nil
}

// addTopicalText adds to every page of src, after its frontmatter, a
// title and a topical text about as long as the page's own text, and
// returns the pages and their bytes.
func addTopicalText(src string, seed uint64) (int, int64, error) {
	pages, err := harness.Pages(src)
	if err != nil {
		return 0, 0, err
	}
	var total int64
	for _, rel := range pages {
		p := filepath.Join(src, rel)
		data, err := os.ReadFile(p)
		if err != nil {
			return 0, 0, err
		}
		front, body := splitFrontmatter(data)
		h := fnv.New64a()
		h.Write([]byte(rel))
		rng := rand.New(rand.NewPCG(seed, h.Sum64()))
		out := append(append(front, topicalText(rng, len(body))...), body...)
		if err := os.WriteFile(p, out, 0o644); err != nil {
			return 0, 0, err
		}
		total += int64(len(out))
	}
	return len(pages), total, nil
}

// splitFrontmatter splits a page after its YAML frontmatter (none: all
// body).
func splitFrontmatter(data []byte) (front, body []byte) {
	if !bytes.HasPrefix(data, []byte("---\n")) {
		return nil, data
	}
	i := bytes.Index(data[4:], []byte("\n---\n"))
	if i < 0 {
		return nil, data
	}
	end := 4 + i + len("\n---\n")
	return bytes.Clone(data[:end]), data[end:]
}

// topicalText is about n bytes of Markdown on three topic terms: a title,
// headings and paragraphs of sentences whose words are a third the
// topic's, a third stop words, and the rest drawn from searchVocab by a
// Zipf distribution.
func topicalText(rng *rand.Rand, n int) []byte {
	zipf := rand.NewZipf(rng, 1.1, 4, uint64(len(searchVocab)-1))
	topic := []string{searchVocab[rng.IntN(len(searchVocab))], searchVocab[rng.IntN(len(searchVocab))], searchVocab[rng.IntN(len(searchVocab))]}
	word := func() string {
		switch x := rng.IntN(100); {
		case x < 30:
			return stopWords[rng.IntN(len(stopWords))]
		case x < 62:
			return topic[rng.IntN(len(topic))]
		}
		return searchVocab[zipf.Uint64()]
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s %s and %s\n\n", capitalize(topic[0]), topic[1], topic[2])
	for b.Len() < n {
		if rng.IntN(5) == 0 {
			fmt.Fprintf(&b, "## %s %s\n\n", capitalize(topic[rng.IntN(len(topic))]), word())
		}
		for s := 2 + rng.IntN(4); s > 0; s-- {
			w := 6 + rng.IntN(13)
			b.WriteString(capitalize(word()))
			for ; w > 1; w-- {
				b.WriteByte(' ')
				b.WriteString(word())
			}
			b.WriteString(". ")
		}
		b.WriteString("\n\n")
	}
	return b.Bytes()
}

func capitalize(w string) string {
	r, size := utf8.DecodeRuneInString(w)
	return string(unicode.ToUpper(r)) + w[size:]
}

// searchDir is the result directory of a query in a mode on d's mount.
func searchDir(d *daemon, query, mode string) string {
	return filepath.Join(d.dir, ".search", query+"?mode="+mode) + "/"
}

// errEIO marks a search the mount answered with EIO.
var errEIO = syscall.EIO

// lsSearch times `ls` of a result directory; a search with no hit is an
// error (the figures are of searches that find pages).
func lsSearch(d *daemon, query, mode string) (time.Duration, error) {
	var stderr bytes.Buffer
	cmd := exec.Command("ls", searchDir(d, query, mode))
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.Stderr = &stderr
	start := time.Now()
	out, err := cmd.Output()
	took := time.Since(start)
	if err != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "Input/output error") {
			return 0, fmt.Errorf("ls .search/%s?mode=%s/: %w", query, mode, errEIO)
		}
		return 0, fmt.Errorf("ls .search/%s?mode=%s/: %w: %s", query, mode, err, msg)
	}
	if bytes.Count(out, []byte("\n")) == 0 {
		return 0, fmt.Errorf("ls .search/%s?mode=%s/: no hits", query, mode)
	}
	return took, nil
}

// firstSearch times a mount's first search until it lists hits. A search
// that waits longer than the mount's --timeout for the index answers EIO
// (the build goes on); it is asked again at once, as an agent would, and
// eios counts those answers.
func firstSearch(d *daemon, query, mode string) (took time.Duration, eios int, err error) {
	start := time.Now()
	for {
		_, err := lsSearch(d, query, mode)
		switch {
		case err == nil:
			return time.Since(start), eios, nil
		case !errors.Is(err, errEIO) || time.Since(start) > 5*time.Minute:
			return 0, eios, err
		}
		eios++
	}
}

// grepCold times `grep -rl WORD MOUNT` on a fresh mount of s on its own
// host cache (every page read from Chroma), unmounts it, and returns its
// host cache, which then holds every page.
func grepCold(c *config, s *searchCorpus) (time.Duration, string, error) {
	cacheDir, err := os.MkdirTemp(c.work, "search-hostcache-")
	if err != nil {
		return 0, "", err
	}
	d, _, err := mountDaemon(c, s.coll, filepath.Join(s.dir, "mnt-grep"), "--cache-dir", cacheDir)
	if err != nil {
		return 0, "", err
	}
	defer d.unmount()
	word := strings.Fields(searchQueries[0])[0]
	start := time.Now()
	if out, err := exec.Command("grep", "-rl", word, d.dir).CombinedOutput(); err != nil {
		return 0, "", fmt.Errorf("grep -rl %s: %w: %.300s", word, err, out)
	}
	return time.Since(start), cacheDir, nil
}

// buildFromHostPages times the index build of a mount on a host cache
// that holds every page but no index (grepCold's): the build's own cost,
// without Chroma's reads.
func buildFromHostPages(c *config, s *searchCorpus, cacheDir string) (time.Duration, error) {
	d, _, err := mountDaemon(c, s.coll, filepath.Join(s.dir, "mnt-hostpages"), "--cache-dir", cacheDir)
	if err != nil {
		return 0, err
	}
	defer d.unmount()
	if _, _, err := firstSearch(d, searchQueries[0], "lexical"); err != nil {
		return 0, err
	}
	m, err := indexReady(d)
	if err != nil {
		return 0, err
	}
	if m["chromafs_search_index_built"] != 1 {
		return 0, errors.New("the index was not built (read from the host tier?) on a host cache of pages only")
	}
	return seconds(m["chromafs_search_index_build_seconds"]), nil
}

func seconds(v float64) time.Duration { return time.Duration(v * float64(time.Second)) }

// grepWarm times a warm `grep -rl WORD MOUNT` for the first word of each
// query (median), after one untimed grep that reads every page.
func grepWarm(d *daemon, queries []string) (time.Duration, error) {
	grep := func(word string) (time.Duration, error) {
		start := time.Now()
		out, err := exec.Command("grep", "-rl", word, d.dir).CombinedOutput()
		if err != nil { // 1: no file holds the word
			return 0, fmt.Errorf("grep -rl %s: %w: %.300s", word, err, out)
		}
		return time.Since(start), nil
	}
	if _, err := grep(strings.Fields(queries[0])[0]); err != nil {
		return 0, err
	}
	var ds []time.Duration
	for _, q := range queries {
		took, err := grep(strings.Fields(q)[0])
		if err != nil {
			return 0, err
		}
		ds = append(ds, took)
	}
	return median(ds), nil
}

// scrape reads the samples without labels of a Prometheus text page.
func scrape(url string) (map[string]float64, error) {
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		return nil, fmt.Errorf("scrape: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: %s", url, resp.Status)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && !strings.HasPrefix(f[0], "#") {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				m[f[0]] = v
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	return m, nil
}

// indexMetrics are the metrics of the lexical index.
var indexMetrics = []string{"chromafs_search_index_ready", "chromafs_search_index_build_seconds", "chromafs_search_index_built",
	"chromafs_search_index_memory_bytes", "chromafs_search_index_host_bytes", "chromafs_search_index_pages", "chromafs_search_index_passages"}

// indexReady waits until d's lexical index is ready and returns its
// metrics.
func indexReady(d *daemon) (map[string]float64, error) {
	var m map[string]float64
	var serr error
	err := harness.Poll(2*time.Minute, 20*time.Millisecond, func() bool {
		m, serr = scrape(d.Metrics)
		return serr == nil && m["chromafs_search_index_ready"] == 1
	})
	if err != nil {
		return nil, fmt.Errorf("chromafs_search_index_ready: %w", errors.Join(err, serr))
	}
	for _, name := range indexMetrics {
		if _, ok := m[name]; !ok {
			return nil, fmt.Errorf("the mount's metrics have no %s", name)
		}
	}
	return m, nil
}

// coldRun is what one repetition of the cold lexical figures measured.
type coldRun struct {
	first, fromHost  time.Duration      // the first search of the mount, of the second mount
	eios             int                // EIO answers before the first search's hits
	requests         int64              // Chroma requests the first mount made for its first search
	built, loaded    map[string]float64 // their index metrics
	rssBefore, after int64              // the first mount's settled RSS around its first search
	cached           int64              // the first mount's content cache after its first search (chromafs_cache_bytes)
}

// coldLexical mounts s on an empty host cache and times its first search
// (the index built), then a second mount on that host cache and its first
// search (the index read from the host tier). Every repetition reads the
// first mount's settled RSS before its first search (so each first search
// comes to a settled mount) and after the build. It returns the second
// mount, which the caller unmounts.
func coldLexical(c *config, s *searchCorpus) (*coldRun, *daemon, error) {
	cacheDir, err := os.MkdirTemp(c.work, "search-hostcache-")
	if err != nil {
		return nil, nil, err
	}
	var run coldRun
	a, _, err := mountDaemon(c, s.coll, filepath.Join(s.dir, "mnt-a"), "--cache-dir", cacheDir)
	if err != nil {
		return nil, nil, err
	}
	run.rssBefore = a.settledRSS()
	reqs := a.requests()
	if run.first, run.eios, err = firstSearch(a, searchQueries[0], "lexical"); err == nil {
		run.requests = a.requests() - reqs
		run.built, err = indexReady(a)
	}
	if err == nil {
		run.after = a.settledRSS()
	}
	run.cached = a.metric("chromafs_cache_bytes")
	a.unmount()
	if err != nil {
		return nil, nil, err
	}
	b, _, err := mountDaemon(c, s.coll, filepath.Join(s.dir, "mnt-b"), "--cache-dir", cacheDir)
	if err != nil {
		return nil, nil, err
	}
	if run.fromHost, err = lsSearch(b, searchQueries[0], "lexical"); err == nil {
		run.loaded, err = indexReady(b)
	}
	if err != nil {
		b.unmount()
		return nil, nil, err
	}
	return &run, b, nil
}

// warmSearches times new queries on d (once each, median), then the same
// queries again (median), and counts the searches the second pass ran.
func warmSearches(d *daemon, queries []string, mode string) (fresh, again time.Duration, ran int64, err error) {
	var news, agains []time.Duration
	for _, q := range queries {
		took, err := lsSearch(d, q, mode)
		if err != nil {
			return 0, 0, 0, err
		}
		news = append(news, took)
	}
	before := d.metric("chromafs_searches_total")
	for _, q := range queries {
		took, err := lsSearch(d, q, mode)
		if err != nil {
			return 0, 0, 0, err
		}
		agains = append(agains, took)
	}
	return median(news), median(agains), d.metric("chromafs_searches_total") - before, nil
}

// noTarget is the target cell of a figure without one.
func noTarget(float64, time.Duration) string { return "(none)" }

// benchSearch measures the search figures: lexical at each size, then
// semantic.
func benchSearch(c *config, r *report) error {
	sc := searchScaleFor(c)
	for _, n := range sc.sizes {
		if err := benchSearchLexical(c, r, sc, n); err != nil {
			return err
		}
	}
	return benchSearchSemantic(c, r, sc)
}

// searchColdReps bounds the repetitions of the cold lexical figures: each
// builds the index once (tens of seconds at 10,000 pages).
const searchColdReps = 3

// lexicalFigures is what the figures of one lexical corpus measured.
type lexicalFigures struct {
	runs                []*coldRun
	coldGrep, fromPages time.Duration // a cold grep -rl; the build from pages in the host tier (medians)
	fresh, again, grep  time.Duration // warm: a new query, the same again, grep -rl
	ran                 int64         // searches the same queries again ran
	queries             int
}

func benchSearchLexical(c *config, r *report, sc searchScale, n int) error {
	s, err := newSearchCorpus(c, r, n, false)
	if err != nil {
		return err
	}
	reps := min(c.reps, searchColdReps)
	logf("search, %s: cold searches (%d mounts)", s.label, 2*reps)
	f := lexicalFigures{queries: sc.queries}
	var warm *daemon
	for i := 0; i < reps; i++ {
		run, b, err := coldLexical(c, s)
		if err != nil {
			return err
		}
		f.runs = append(f.runs, run)
		if i < reps-1 {
			b.unmount()
		} else {
			warm = b
		}
	}
	defer warm.unmount()
	logf("search, %s: warm searches and grep -rl", s.label)
	queries := searchQueries[1 : 1+sc.queries]
	if f.fresh, f.again, f.ran, err = warmSearches(warm, queries, "lexical"); err != nil {
		return err
	}
	if f.grep, err = grepWarm(warm, queries); err != nil {
		return err
	}
	logf("search, %s: cold grep -rl, and the build from pages in the host tier (%d each)", s.label, reps)
	var greps, builds []time.Duration
	for i := 0; i < reps; i++ {
		coldGrep, pages, err := grepCold(c, s)
		if err != nil {
			return err
		}
		build, err := buildFromHostPages(c, s, pages)
		os.RemoveAll(pages)
		if err != nil {
			return err
		}
		greps, builds = append(greps, coldGrep), append(builds, build)
	}
	f.coldGrep, f.fromPages = median(greps), median(builds)
	reportLexical(r, s, &f)
	return nil
}

// reportLexical writes the rows of one lexical corpus.
func reportLexical(r *report, s *searchCorpus, f *lexicalFigures) {
	built := func(run *coldRun) time.Duration { return seconds(run.built["chromafs_search_index_build_seconds"]) }
	loaded := func(run *coldRun) time.Duration { return seconds(run.loaded["chromafs_search_index_build_seconds"]) }
	// a metric of the index built, or a count, over the repetitions: the median
	metric := func(name string) float64 {
		return float64(medianOfInt(f.runs, func(run *coldRun) int64 { return int64(run.built[name]) }))
	}
	var reqs []int64
	for _, run := range f.runs {
		reqs = append(reqs, run.requests)
	}
	share := func(v float64) string {
		return fmt.Sprintf("%s = %.1f%% of the corpus", mib(int64(v)), 100*v/float64(s.bytes))
	}
	r.ratio(s.label, fmt.Sprintf("search: lexical index build on the mount's first search (%.0f pages, %.0f passages, %s; chromafs_search_index_build_seconds)",
		metric("chromafs_search_index_pages"), metric("chromafs_search_index_passages"), countOf(reqs, "Chroma request")),
		medianOf(f.runs, built), "a cold `grep -rl WORD MOUNT` (a fresh mount: every page read)", f.coldGrep, noTarget)
	r.value(s.label, "search: lexical index build from pages already in the host tier (a mount after the cold grep)", dur(f.fromPages), "(none)")
	r.value(s.label, "search: lexical index load from the host tier (a second mount; chromafs_search_index_build_seconds)", dur(medianOf(f.runs, loaded)), "(none)")
	r.value(s.label, "search: lexical index memory (chromafs_search_index_memory_bytes; the daemon's settled RSS before → after the first search, and its content cache then)",
		fmt.Sprintf("%s (RSS %s → %s; cache %s)", share(metric("chromafs_search_index_memory_bytes")),
			mib(medianOfInt(f.runs, func(run *coldRun) int64 { return run.rssBefore })), mib(medianOfInt(f.runs, func(run *coldRun) int64 { return run.after })),
			mib(medianOfInt(f.runs, func(run *coldRun) int64 { return run.cached }))), "(none)")
	r.value(s.label, "search: lexical index in the host tier (chromafs_search_index_host_bytes)", share(metric("chromafs_search_index_host_bytes")), "(none)")
	base := fmt.Sprintf("warm `grep -rl WORD MOUNT` (median of %d words)", f.queries)
	eios, timedOut := 0, 0
	for _, run := range f.runs {
		eios += run.eios
		timedOut += min(run.eios, 1)
	}
	r.ratio(s.label, fmt.Sprintf("search: cold `ls .search/QUERY?mode=lexical/`, the mount's first search, until it lists hits (index build included; %d of %d answered EIO first, %d EIO in all)",
		timedOut, len(f.runs), eios), medianOf(f.runs, func(run *coldRun) time.Duration { return run.first }), base, f.grep, noTarget)
	builtHere := 0
	for _, run := range f.runs {
		builtHere += int(run.loaded["chromafs_search_index_built"])
	}
	r.ratio(s.label, "search: cold, the first search of a second mount on the same host cache (index read from the host tier)",
		medianOf(f.runs, func(run *coldRun) time.Duration { return run.fromHost }), base, f.grep,
		func(float64, time.Duration) string {
			return pass(builtHere == 0, fmt.Sprintf("index built by %d of %d second mounts (want 0)", builtHere, len(f.runs)))
		})
	r.ratio(s.label, fmt.Sprintf("search: warm, a new query once the index is ready (median of %d)", f.queries), f.fresh, base, f.grep, noTarget)
	r.ratio(s.label, fmt.Sprintf("search: warm, the same query again (%d searches run for %d)", f.ran, f.queries), f.again, base, f.grep, noTarget)
}

// embedKeyEnv names the API key's variable of the semantic corpus's
// embedding function; the model server ignores its value.
const embedKeyEnv = "CHROMAFS_TEST_EMBED_KEY"

// benchSearchSemantic measures mode=semantic on a corpus embedded by a
// real model, or says in a row why it could not (an error under CI=true).
func benchSearchSemantic(c *config, r *report, sc searchScale) error {
	if sc.semPages == 0 {
		return nil
	}
	err := measureSemantic(c, r, sc)
	if err == nil {
		return nil
	}
	if os.Getenv("CI") == "true" {
		return fmt.Errorf("CI=true: the semantic search figures: %w", err)
	}
	why := strings.Join(strings.Fields(err.Error()), " ")
	logf("SKIPPED: the semantic search figures: %s", why)
	r.value(fmt.Sprintf("%d short pages", sc.semPages), "search: mode=semantic latency, cold and warm", "not measured: "+why, "(none)")
	return nil
}

func measureSemantic(c *config, r *report, sc searchScale) error {
	logf("search: starting the embed server (a real model)")
	srv, err := harness.StartEmbedServer(c.root, 0, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err := srv.Stop(); err != nil {
			logf("embed server: %v", err)
		}
	}()
	// The key's variable must be set for the ingest and the mounts, which
	// inherit the bench's environment; the server ignores its value.
	if err := os.Setenv(embedKeyEnv, "x"); err != nil {
		return err
	}
	defer os.Unsetenv(embedKeyEnv)
	cfg := fmt.Sprintf(`{"api_key_env_var":%q,"api_base":%q,"model_name":"text-embedding-3-small","insecure":true}`, embedKeyEnv, srv.URL()+"/v1")
	// The model embeds ~10-25 texts a second: an upsert of 300 records
	// waits for their embeddings, longer than the default deadline.
	s, err := newSearchCorpus(c, r, sc.semPages, true, "--embedding", "openai", "--embedding-config", cfg, "--timeout", "10m")
	if err != nil {
		return err
	}
	logf("search, %s: semantic searches", s.label)
	var colds []time.Duration
	var d *daemon
	for i := 0; i < c.reps; i++ {
		if d, _, err = mountDaemon(c, s.coll, filepath.Join(s.dir, "mnt")); err != nil {
			return err
		}
		took, err := lsSearch(d, searchQueries[0], "semantic")
		if err != nil {
			d.unmount()
			return err
		}
		colds = append(colds, took)
		if i < c.reps-1 {
			d.unmount()
		}
	}
	defer d.unmount()
	return reportSemantic(r, s, d, sc, median(colds))
}

// reportSemantic times the warm semantic searches and grep on d and
// writes the rows of the semantic corpus.
func reportSemantic(r *report, s *searchCorpus, d *daemon, sc searchScale, cold time.Duration) error {
	queries := searchQueries[1 : 1+sc.queries]
	asked := d.metric("chromafs_search_chroma_queries_total")
	fresh, again, ran, err := warmSearches(d, queries, "semantic")
	if err != nil {
		return err
	}
	asked = d.metric("chromafs_search_chroma_queries_total") - asked
	grep, err := grepWarm(d, queries)
	if err != nil {
		return err
	}
	base := fmt.Sprintf("warm `grep -rl WORD MOUNT` (median of %d words)", len(queries))
	r.ratio(s.label, "search: cold `ls .search/QUERY?mode=semantic/`, the mount's first search (query embedded by the model server, one Chroma query)", cold, base, grep, noTarget)
	r.ratio(s.label, fmt.Sprintf("search: semantic, warm, a new query (median of %d; %d Chroma queries for them and their repeats)", len(queries), asked), fresh, base, grep, noTarget)
	r.ratio(s.label, fmt.Sprintf("search: semantic, warm, the same query again (%d searches run for %d)", ran, len(queries)), again, base, grep, noTarget)
	return nil
}
