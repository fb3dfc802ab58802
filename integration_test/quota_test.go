package integration_test

import (
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
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
	"github.com/chromafs/chromafs/internal/harness"
)

// newQuotaProxy is a harness.CloudProxy in front of the test server, on
// loopback (no network added), closed with the test.
func newQuotaProxy(t *testing.T, target string) *harness.CloudProxy {
	t.Helper()
	q, err := harness.StartCloudProxy(target, harness.Network{})
	must(t, err)
	t.Cleanup(q.Close)
	return q
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
		mounts, failed.Load(), q.Refused.Load(), q.Peak.Load(), float64(q.Wire.Load())/float64(corpusBytes), q.Reads.Load(), rss>>20)
	if q.Refused.Load() != 0 || q.TooBig.Load() != 0 {
		t.Errorf("quota violations: %d reads refused for concurrency, %d for size", q.Refused.Load(), q.TooBig.Load())
	}
	if float64(q.Wire.Load()) > 1.5*float64(corpusBytes) {
		t.Errorf("the host pulled %d bytes for a %d-byte corpus; want at most 1.5x", q.Wire.Load(), corpusBytes)
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
	if n := q.BadWrites.Load(); n != 0 {
		t.Fatalf("%d requests broke Chroma Cloud's record limits", n)
	}
	readOnlyTree(t, src)
	mnt := mountDir(t, t.TempDir())
	startMountEnv(t, nil, name, mnt, q.URL, "--prefetch", "dir")
	if out, code := sh(t, filepath.Dir(mnt), fmt.Sprintf("diff -r %s %s", mnt, src), true); code != 0 || out != "" {
		t.Fatalf("diff -r through the proxy: exit %d: %.2000s", code, out)
	}
	sameOutput(t, mnt, src, "tail -c 5000 images/diagram.png | md5sum; dd if=images/diagram.png bs=1000 skip=37 count=3 2>/dev/null | md5sum; file -b images/diagram.png; grep -rlc xyz . | sort")
	if n := q.BadWrites.Load() + q.TooBig.Load(); n != 0 {
		t.Errorf("%d requests broke Chroma Cloud's limits while reading", n)
	}
	resp, err := http.Post(q.URL+"/api/v2/tenants/t/databases/d/collections/c/upsert", "application/json",
		strings.NewReader(`{"ids":["`+strings.Repeat("i", 200)+`"]}`))
	must(t, err)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity || q.BadWrites.Load() != 1 {
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
	if n := q.BadWrites.Load(); n != 0 {
		t.Fatalf("%d writes broke Chroma Cloud's record limits (a tree of %d parts)", n, len(chroma.TreeIDs(doc))-1)
	}
	reads := q.Reads.Load()
	got, err := st.LoadTree(t.Context())
	if err != nil || string(got) != doc {
		t.Fatalf("the tree read back: %v, %d bytes of %d", err, len(got), len(doc))
	}
	// the store's first load: the header with the first parts at once,
	// the rest by id
	rest := len(chroma.TreeIDs(doc)) - 1 - chroma.TreePartsAtOnce
	if n, want := q.Reads.Load()-reads, int64(1+(rest+chroma.MaxGet-1)/chroma.MaxGet); n != want {
		t.Errorf("the first load of a tree in %d parts: %d gets, want %d", rest+chroma.TreePartsAtOnce, n, want)
	}
	// a 429 on a part's get is waited out by that get alone (the others
	// are not fetched again)
	q.PartsBusy.Store(3)
	gets, refused := q.Reads.Load(), q.Refused.Load()
	got, err = st.LoadTree(t.Context())
	if err != nil || string(got) != doc {
		t.Fatalf("the tree read back through 429s: %v, %d bytes of %d", err, len(got), len(doc))
	}
	// the store's second load: the header first (its first one got the
	// header with the first chroma.TreePartsAtOnce parts), then the parts
	// in batches of chroma.MaxGet
	batches := (len(chroma.TreeIDs(doc)) - 1 + chroma.MaxGet - 1) / chroma.MaxGet
	if n, r := q.Reads.Load()-gets, q.Refused.Load()-refused; n != int64(1+batches) || r != 3 {
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
	recs := make([]chroma.Record, harness.CloudMaxResults+1)
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
		if code := get(c.body); code != c.status || q.TooBig.Load() != c.tooBig {
			t.Errorf("get %s: HTTP %d, %d refused for size; want %d, %d", c.body, code, q.TooBig.Load(), c.status, c.tooBig)
		}
	}

	hold := make(chan struct{})
	q.Hold.Store(&hold)
	gets := q.Reads.Load()
	codes := make(chan int, harness.CloudConcurrentReads)
	for range harness.CloudConcurrentReads {
		go func() { codes <- get(`{"limit": 1}`) }()
	}
	waitFor(t, 20*time.Second, func() bool { return q.Reads.Load()-gets == harness.CloudConcurrentReads },
		func() string { return fmt.Sprintf("%d of 10 reads in flight", q.Reads.Load()-gets) })
	q.Hold.Store(nil)
	if code := get(`{"limit": 1}`); code != http.StatusTooManyRequests || q.Refused.Load() != 1 {
		t.Errorf("an 11th read with 10 in flight: HTTP %d, %d refused; want 429, 1", code, q.Refused.Load())
	}
	close(hold)
	for range harness.CloudConcurrentReads {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("a read within the quota: HTTP %d", code)
		}
	}
	if q.Peak.Load() != harness.CloudConcurrentReads {
		t.Errorf("peak of reads in flight %d, want %d", q.Peak.Load(), harness.CloudConcurrentReads)
	}
	if code := get(`{"limit": 1}`); code != http.StatusOK || q.Refused.Load() != 1 {
		t.Errorf("a read once the 10 ended: HTTP %d, %d refused; want 200, still 1", code, q.Refused.Load())
	}
}
