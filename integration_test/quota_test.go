package integration_test

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/internal/corpus"
)

// Chroma Cloud's published read quotas, which quotaProxy enforces.
const (
	cloudConcurrentReads = 10
	cloudMaxResults      = 300
)

// quotaProxy stands in front of a real Chroma server and refuses what
// Chroma Cloud would: more than 10 concurrent reads of a collection (HTTP
// 429) and reads of more than 300 results (HTTP 400): asked for (a limit
// or ids over 300) or answered (a get without a limit whose answer holds
// more: Cloud caps what it returns, so a client that relies on getting
// everything at once breaks there). It counts the refusals, the peak of
// reads in flight, and the bytes it answered. TestQuotaProxyRefuses shows
// it refuses each, so its "0 refused" elsewhere means something.
type quotaProxy struct {
	URL   string
	proxy *httputil.ReverseProxy

	mu       sync.Mutex // protects inflight
	inflight map[string]int

	peak, refused, tooBig, gets, bytes atomic.Int64
	badWrites                          atomic.Int64 // writes refused for Cloud's record limits
	// partsBusy is how many more gets of tree parts to answer with 429.
	partsBusy atomic.Int64
	// hold, when set, keeps every admitted read in flight until it is
	// closed (TestQuotaProxyRefuses fills the quota with it).
	hold atomic.Pointer[chan struct{}]
}

func newQuotaProxy(t *testing.T, target string) *quotaProxy {
	t.Helper()
	u, err := url.Parse(target)
	must(t, err)
	q := &quotaProxy{proxy: httputil.NewSingleHostReverseProxy(u), inflight: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(q.serve))
	q.URL = srv.URL
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return q
}

func (q *quotaProxy) serve(w http.ResponseWriter, r *http.Request) {
	read := strings.HasSuffix(r.URL.Path, "/get") || strings.HasSuffix(r.URL.Path, "/query")
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if why := cloudRecordLimits(body); why != "" {
		q.badWrites.Add(1)
		http.Error(w, `{"error":"InvalidArgument","message":"`+why+`"}`, http.StatusUnprocessableEntity)
		return
	}
	if !read {
		q.proxy.ServeHTTP(w, r)
		return
	}
	var req struct {
		Limit *int     `json:"limit"`
		IDs   []string `json:"ids"`
	}
	_ = json.Unmarshal(body, &req)
	if (req.Limit != nil && *req.Limit > cloudMaxResults) || len(req.IDs) > cloudMaxResults {
		q.tooBig.Add(1)
		http.Error(w, `{"error":"InvalidArgument","message":"limit exceeds the quota of 300"}`, http.StatusBadRequest)
		return
	}
	if len(req.IDs) > 0 && strings.HasPrefix(req.IDs[0], chroma.TreeID+"#") && q.partsBusy.Add(-1) >= 0 {
		q.refused.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":"RateLimit","message":"busy"}`)
		return
	}
	coll := collectionOf(r.URL.Path)
	if !q.enter(coll) {
		q.refused.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":"RateLimit","message":"too many concurrent reads"}`)
		return
	}
	q.gets.Add(1)
	if h := q.hold.Load(); h != nil {
		<-*h
	}
	rec := httptest.NewRecorder()
	q.proxy.ServeHTTP(rec, r)
	q.leave(coll) // before the client sees the answer: it may send its next read at once
	if n := answerResults(rec); n > cloudMaxResults {
		q.tooBig.Add(1)
		http.Error(w, fmt.Sprintf(`{"error":"InvalidArgument","message":"%d results exceed the quota of 300"}`, n), http.StatusBadRequest)
		return
	}
	q.bytes.Add(int64(rec.Body.Len()))
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// answerResults is how many results an answer of a read holds: the ids of
// a get, the most ids of one list of a query (Cloud's limit is per query
// embedding); 0 for anything else.
func answerResults(rec *httptest.ResponseRecorder) int {
	if rec.Code != http.StatusOK {
		return 0
	}
	body := rec.Body.Bytes()
	if rec.Header().Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			return 0
		}
		if body, err = io.ReadAll(zr); err != nil {
			return 0
		}
	}
	var ans struct {
		IDs json.RawMessage `json:"ids"`
	}
	if json.Unmarshal(body, &ans) != nil || len(ans.IDs) == 0 {
		return 0
	}
	var flat []string
	if json.Unmarshal(ans.IDs, &flat) == nil {
		return len(flat)
	}
	var lists [][]string
	n := 0
	if json.Unmarshal(ans.IDs, &lists) == nil {
		for _, l := range lists {
			n = max(n, len(l))
		}
	}
	return n
}

// Chroma Cloud's limits on the records of one request.
const (
	cloudMaxID       = 128
	cloudMaxDocument = 16 << 10
	cloudMaxKeys     = 32
	cloudMaxKey      = 36
	cloudMaxValue    = 4 << 10
	cloudMaxRecords  = 300
)

// cloudRecordLimits says what in a request body Chroma Cloud would refuse
// (ids, documents, metadata of the records it names), or "".
func cloudRecordLimits(body []byte) string {
	var req struct {
		IDs       []string         `json:"ids"`
		Documents []*string        `json:"documents"`
		Metadatas []map[string]any `json:"metadatas"`
	}
	if json.Unmarshal(body, &req) != nil {
		return ""
	}
	if len(req.IDs) > cloudMaxRecords {
		return fmt.Sprintf("%d records in one request", len(req.IDs))
	}
	for _, id := range req.IDs {
		if len(id) > cloudMaxID {
			return fmt.Sprintf("id of %d bytes", len(id))
		}
	}
	for _, d := range req.Documents {
		if d != nil && len(*d) > cloudMaxDocument {
			return fmt.Sprintf("document of %d bytes", len(*d))
		}
	}
	for _, md := range req.Metadatas {
		if len(md) > cloudMaxKeys {
			return fmt.Sprintf("%d metadata keys", len(md))
		}
		for k, v := range md {
			if len(k) > cloudMaxKey {
				return fmt.Sprintf("metadata key of %d bytes", len(k))
			}
			if s, ok := v.(string); ok && len(s) > cloudMaxValue {
				return fmt.Sprintf("metadata value of %d bytes", len(s))
			}
		}
	}
	return ""
}

func collectionOf(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if p == "collections" && i+1 < len(parts) {
			return parts[i+1]
		}
	}
	return path
}

func (q *quotaProxy) enter(coll string) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.inflight[coll] >= cloudConcurrentReads {
		return false
	}
	q.inflight[coll]++
	if n := int64(q.inflight[coll]); n > q.peak.Load() {
		q.peak.Store(n)
	}
	return true
}

func (q *quotaProxy) leave(coll string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.inflight[coll]--
}

// TestFleetWithinQuota: 12 mount processes (CHROMAFS_FLEET_MOUNTS) on one host (one cache
// directory), each with its own mountpoint, run the same session at once
// through a proxy enforcing Chroma Cloud's read quotas. Every session's
// output is right, no read is refused, and the host pulls the corpus about
// once, not once per mount.
func TestFleetWithinQuota(t *testing.T) {
	requireFUSE(t)
	mounts := 12
	if n, err := strconv.Atoi(os.Getenv("CHROMAFS_FLEET_MOUNTS")); err == nil && n > 0 {
		mounts = n // scripts/bench.sh also runs 50
	}
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 300, Large: []int64{3 << 20}, Seed: 53})
	readOnlyTree(t, src)
	q := newQuotaProxy(t, env.url)
	cacheDir := t.TempDir()
	var ms []*mount
	for i := range mounts {
		mnt := filepath.Join(parent, fmt.Sprintf("mnt-%d", i))
		must(t, os.Mkdir(mnt, 0o755))
		ms = append(ms, startMountPlain(t, nil, name, mnt, q.URL, "--cache-dir", cacheDir)) // their RSS is measured
	}
	want, _ := sh(t, src, session, false)
	var wg sync.WaitGroup
	var failed atomic.Int64
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if got, code := sh(t, m.dir, session, true); code != 0 || got != want {
				failed.Add(1)
				t.Errorf("session on %s: exit %d, output differs: %s", m.dir, code, firstDiff(got, want))
			}
		}()
	}
	wg.Wait()
	var rss int64
	for _, m := range ms {
		rss += rssOf(t, m.cmd.Process.Pid)
	}
	corpusBytes := dirBytes(t, src)
	fmt.Printf("BENCH fleet: %d mounts, %d failed sessions, %d reads refused (quota), peak %d reads in flight, pulled %.2fx the corpus (%d gets), total RSS %d MiB\n",
		mounts, failed.Load(), q.refused.Load(), q.peak.Load(), float64(q.bytes.Load())/float64(corpusBytes), q.gets.Load(), rss>>20)
	if q.refused.Load() != 0 || q.tooBig.Load() != 0 {
		t.Errorf("quota violations: %d reads refused for concurrency, %d for size", q.refused.Load(), q.tooBig.Load())
	}
	if float64(q.bytes.Load()) > 1.5*float64(corpusBytes) {
		t.Errorf("the host pulled %d bytes for a %d-byte corpus; want at most 1.5x", q.bytes.Load(), corpusBytes)
	}
}

func dirBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	must(t, filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return err
	}))
	return n
}

// TestIngestWithinCloudLimits: ingest and a mount through a proxy that
// refuses what Chroma Cloud refuses (ids over 128 bytes, documents over
// 16 KiB, more than 32 metadata keys or keys over 36 bytes, values over
// 4 KiB, more than 300 records a request): paths of 250 to ~3,000 bytes
// ingest and read back byte-exact, and the proxy refused nothing. A write
// with a 200-byte id is refused by it, so the check can fail.
func TestIngestWithinCloudLimits(t *testing.T) {
	requireFUSE(t)
	q := newQuotaProxy(t, env.url)
	src := filepath.Join(t.TempDir(), "src")
	long := strings.Repeat("d", 250)
	deep := strings.Repeat(strings.Repeat("x", 200)+"/", 15)
	writeSource(t, src, map[string]string{
		"images/logo.svg":                "<svg/>\n",
		long + ".md":                     strings.Repeat("a long name\n", 3000),
		deep + "page.md":                 "deep path\n",
		"short.md":                       "short\n",
		"dir/" + long[:200] + "/" + long: "both\n",
	})
	_, err := corpus.Generate(filepath.Join(src, "corpus"), corpus.Spec{Files: 320, Seed: 81})
	must(t, err)
	img := make([]byte, 100<<10+7) // a binary page: its chunks are stored as base64
	for i := range img {
		img[i] = byte(i*131 + i/7)
	}
	must(t, os.WriteFile(filepath.Join(src, "images", "diagram.png"), img, 0o644))
	name := collectionName(t)
	if _, errOut, code := ingestCmd(t, nil, "--chroma-url", q.URL, "--collection", name, "--quiet", src); code != 0 {
		t.Fatalf("ingest through the Cloud-limits proxy: exit %d: %s", code, errOut)
	}
	if n := q.badWrites.Load(); n != 0 {
		t.Fatalf("%d requests broke Chroma Cloud's record limits", n)
	}
	readOnlyTree(t, src)
	mnt := mountDir(t, t.TempDir())
	startMountEnv(t, nil, name, mnt, q.URL, "--prefetch", "dir")
	if out, code := sh(t, filepath.Dir(mnt), fmt.Sprintf("diff -r %s %s", mnt, src), true); code != 0 || out != "" {
		t.Fatalf("diff -r through the proxy: exit %d: %.2000s", code, out)
	}
	sameOutput(t, mnt, src, "tail -c 5000 images/diagram.png | md5sum; dd if=images/diagram.png bs=1000 skip=37 count=3 2>/dev/null | md5sum; file -b images/diagram.png; grep -rlc xyz . | sort")
	if n := q.badWrites.Load() + q.tooBig.Load(); n != 0 {
		t.Errorf("%d requests broke Chroma Cloud's limits while reading", n)
	}
	resp, err := http.Post(q.URL+"/api/v2/tenants/t/databases/d/collections/c/upsert", "application/json",
		strings.NewReader(`{"ids":["`+strings.Repeat("i", 200)+`"]}`))
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity || q.badWrites.Load() != 1 {
		t.Errorf("a 200-byte id passed the proxy (HTTP %d)", resp.StatusCode)
	}
}

// TestLargeTreeWithinCloudLimits: a path tree of more than 300 parts (a
// stored tree over 4.5 MB: ~60,000 pages) is written in requests of at
// most 300 records and reads back whole, through the Cloud-limits proxy.
func TestLargeTreeWithinCloudLimits(t *testing.T) {
	requireServer(t)
	q := newQuotaProxy(t, env.url)
	name := collectionName(t)
	cfg := conn(t, name)
	cfg.URL = q.URL
	st, err := chroma.OpenOrCreate(t.Context(), cfg, nil)
	must(t, err)
	defer st.Close()
	var sb strings.Builder
	for sb.Len() < 320*chroma.TreePartSize {
		fmt.Fprintf(&sb, "%x", sha256.Sum256([]byte(strconv.Itoa(sb.Len()))))
	}
	doc := sb.String()
	must(t, st.WriteTree(t.Context(), doc))
	if n := q.badWrites.Load(); n != 0 {
		t.Fatalf("%d writes broke Chroma Cloud's record limits (a tree of %d parts)", n, len(chroma.TreeIDs(doc))-1)
	}
	got, err := st.LoadTree(t.Context())
	if err != nil || string(got) != doc {
		t.Fatalf("the tree read back: %v, %d bytes of %d", err, len(got), len(doc))
	}
	// a 429 on a part's get is waited out by that get alone (the others
	// are not fetched again)
	q.partsBusy.Store(3)
	gets, refused := q.gets.Load(), q.refused.Load()
	got, err = st.LoadTree(t.Context())
	if err != nil || string(got) != doc {
		t.Fatalf("the tree read back through 429s: %v, %d bytes of %d", err, len(got), len(doc))
	}
	batches := (len(chroma.TreeIDs(doc)) - 1 + chroma.MaxGet - 1) / chroma.MaxGet
	if n, r := q.gets.Load()-gets, q.refused.Load()-refused; n != int64(1+batches) || r != 3 {
		t.Errorf("loading through 3 refusals: %d gets answered, %d refused; want %d (the header and each batch once) and 3", n, r, 1+batches)
	}
}

// TestQuotaProxyRefuses is the positive control of every "the proxy
// refused nothing" (TestFleetWithinQuota, TestIngestWithinCloudLimits,
// TestLazyPointers): with 10 reads of a collection held in flight, an 11th
// is answered 429; a get asking for 301 results, and one without a limit
// whose answer holds 301, are refused (400); a get of 300 passes.
func TestQuotaProxyRefuses(t *testing.T) {
	requireServer(t)
	recs := make([]chroma.Record, cloudMaxResults+1)
	for i := range recs {
		recs[i] = chunkRec(fmt.Sprintf("r%03d", i), "p", i, fmt.Sprintf("record %d\n", i))
	}
	name := writeRaw(t, recs)
	st := openStore(t, name)
	q := newQuotaProxy(t, env.url)
	getURL := fmt.Sprintf("%s/api/v2/tenants/%s/databases/%s/collections/%s/get", q.URL, chroma.DefaultTenant, chroma.DefaultDatabase, st.ID())
	get := func(body string) int {
		resp, err := http.Post(getURL, "application/json", strings.NewReader(body))
		if err != nil {
			t.Errorf("get %s: %v", body, err)
			return 0
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	for _, c := range []struct {
		body   string
		status int
		tooBig int64
	}{
		{`{"limit": 300, "include": []}`, http.StatusOK, 0},
		{`{"limit": 301, "include": []}`, http.StatusBadRequest, 1},
		{`{"include": []}`, http.StatusBadRequest, 2}, // Chroma answers all 301: counted in the answer
	} {
		if code := get(c.body); code != c.status || q.tooBig.Load() != c.tooBig {
			t.Errorf("get %s: HTTP %d, %d refused for size; want %d, %d", c.body, code, q.tooBig.Load(), c.status, c.tooBig)
		}
	}

	hold := make(chan struct{})
	q.hold.Store(&hold)
	gets := q.gets.Load()
	codes := make(chan int, cloudConcurrentReads)
	for range cloudConcurrentReads {
		go func() { codes <- get(`{"limit": 1}`) }()
	}
	waitFor(t, 20*time.Second, func() bool { return q.gets.Load()-gets == cloudConcurrentReads },
		func() string { return fmt.Sprintf("%d of 10 reads in flight", q.gets.Load()-gets) })
	q.hold.Store(nil)
	if code := get(`{"limit": 1}`); code != http.StatusTooManyRequests || q.refused.Load() != 1 {
		t.Errorf("an 11th read with 10 in flight: HTTP %d, %d refused; want 429, 1", code, q.refused.Load())
	}
	close(hold)
	for range cloudConcurrentReads {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("a read within the quota: HTTP %d", code)
		}
	}
	if q.peak.Load() != cloudConcurrentReads {
		t.Errorf("peak of reads in flight %d, want %d", q.peak.Load(), cloudConcurrentReads)
	}
	if code := get(`{"limit": 1}`); code != http.StatusOK || q.refused.Load() != 1 {
		t.Errorf("a read once the 10 ended: HTTP %d, %d refused; want 200, still 1", code, q.refused.Load())
	}
}
