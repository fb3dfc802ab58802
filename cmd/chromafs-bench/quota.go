package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromafs/chromafs/chroma"
)

// Chroma Cloud's published read quotas, which quotaProxy enforces.
const (
	cloudConcurrentReads = 10
	cloudMaxResults      = 300
)

// quotaProxy stands in front of the bench's Chroma server and refuses what
// Chroma Cloud would: more than 10 concurrent reads of a collection (HTTP
// 429) and reads asking for more than 300 results (HTTP 400), as
// integration_test's quotaProxy does. It counts the refusals, the peak of
// reads in flight, the bytes it answered to reads, and the content bytes
// among them: the documents of the records a get returned, the path tree's
// records excepted (what the daemon fetched of the corpus).
type quotaProxy struct {
	URL   string
	srv   *http.Server
	proxy *httputil.ReverseProxy

	mu       sync.Mutex // protects inflight
	inflight map[string]int

	peak, refused, tooBig, gets, wire, content atomic.Int64
}

// startQuotaProxy serves the proxy on a free port of 127.0.0.1.
func startQuotaProxy(target string) (*quotaProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("quota proxy target: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("quota proxy: %w", err)
	}
	q := &quotaProxy{URL: "http://" + l.Addr().String(), proxy: httputil.NewSingleHostReverseProxy(u), inflight: map[string]int{}}
	q.srv = &http.Server{Handler: http.HandlerFunc(q.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := q.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logf("quota proxy: %v", err)
		}
	}()
	return q, nil
}

func (q *quotaProxy) close() { _ = q.srv.Close() }

// violations are the reads Chroma Cloud would have refused.
func (q *quotaProxy) violations() int64 { return q.refused.Load() + q.tooBig.Load() }

// reset zeroes the counters.
func (q *quotaProxy) reset() {
	for _, c := range []*atomic.Int64{&q.peak, &q.refused, &q.tooBig, &q.gets, &q.wire, &q.content} {
		c.Store(0)
	}
}

func (q *quotaProxy) serve(w http.ResponseWriter, r *http.Request) {
	isGet := strings.HasSuffix(r.URL.Path, "/get")
	if !isGet && !strings.HasSuffix(r.URL.Path, "/query") {
		q.proxy.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
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
	coll := collectionOf(r.URL.Path)
	if !q.enter(coll) {
		q.refused.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":"RateLimit","message":"too many concurrent reads"}`)
		return
	}
	q.gets.Add(1)
	rec := httptest.NewRecorder()
	q.proxy.ServeHTTP(rec, r)
	q.leave(coll) // before the client sees the answer: it may send its next read at once
	q.wire.Add(int64(rec.Body.Len()))
	if isGet && rec.Code == http.StatusOK {
		q.content.Add(contentBytes(rec.Body.Bytes()))
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	w.Write(rec.Body.Bytes())
}

// contentBytes is the length of the documents of a get's answer, the path
// tree's records (header and parts) excepted.
func contentBytes(answer []byte) int64 {
	var res struct {
		IDs       []string  `json:"ids"`
		Documents []*string `json:"documents"`
	}
	if json.Unmarshal(answer, &res) != nil {
		return 0
	}
	var n int64
	for i, d := range res.Documents {
		if d == nil || i < len(res.IDs) && (res.IDs[i] == chroma.TreeID || strings.HasPrefix(res.IDs[i], chroma.TreeID+"#")) {
			continue
		}
		n += int64(len(*d))
	}
	return n
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
