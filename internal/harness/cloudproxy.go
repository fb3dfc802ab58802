package harness

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
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

// Chroma Cloud's published limits, which CloudProxy enforces: reads of a
// collection in flight at once, results a read may ask for or be answered
// (a get's ids or limit; a query's per embedding), and the records of one
// request.
const (
	CloudConcurrentReads = 10
	CloudMaxResults      = 300
	CloudMaxID           = 128
	CloudMaxDocument     = 16 << 10
	CloudMaxKeys         = 32
	CloudMaxKey          = 36
	CloudMaxValue        = 4 << 10
	CloudMaxRecords      = 300
)

// Network is the distance CloudProxy puts between its clients and the
// Chroma server behind it, as Chroma Cloud or a cluster is 20-80 ms away
// over TLS: every request costs a round trip, a new connection its
// handshakes first, and every answer its bytes through one shared link.
// The zero Network is loopback: nothing added.
type Network struct {
	// RTT is the round trip every request pays: half before the server
	// sees it, half before the client sees the answer.
	RTT time.Duration
	// Handshake is what a new connection pays before its first request
	// (TCP and TLS: two round trips, WithRTT's default).
	Handshake time.Duration
	// Bandwidth caps the answers' bytes per second, all connections
	// together (0: no cap).
	Bandwidth int64
}

// WithRTT is the network of a TLS link rtt away: a handshake of two round
// trips, capped at 1 Gbit/s.
func WithRTT(rtt time.Duration) Network {
	return Network{RTT: rtt, Handshake: 2 * rtt, Bandwidth: 125_000_000}
}

// CloudProxy stands in front of a real Chroma server and makes it what
// Chroma Cloud is to its clients: it refuses what Cloud refuses — more
// than 10 concurrent reads of a collection (HTTP 429), reads of more than
// 300 results asked for or answered (400; Cloud caps what it returns, so
// a client that relies on getting everything at once breaks there), and
// writes past Cloud's record limits (422) — and it is as far away as its
// Network says. It counts what it saw. TestCloudProxyQuotas, and the
// integration tests' TestQuotaProxyRefuses against a real server, show
// it refuses each, so that its "0 refused" elsewhere means something.
type CloudProxy struct {
	URL string
	Net Network // as started (changing it has no effect)

	srv   *http.Server
	proxy *httputil.ReverseProxy
	net   Network // what it serves with
	link  link

	mu       sync.Mutex // protects inflight
	inflight map[string]int

	// Peak is the most reads of a collection in flight at once; Refused
	// the reads refused for concurrency (and by PartsBusy), TooBig those
	// refused for their results, BadWrites the writes refused for
	// Cloud's record limits.
	Peak, Refused, TooBig, BadWrites atomic.Int64
	// Requests counts every request but heartbeats (GET
	// /api/v2/heartbeat, which touch no collection: Heartbeats counts
	// them once answered), Reads the reads admitted, Conns the connections clients
	// opened.
	Requests, Heartbeats, Reads, Conns atomic.Int64
	// Wire is the bytes of the reads' answers; Content the documents
	// among them that a get returned, the path tree's records excepted
	// (what a client fetched of the corpus).
	Wire, Content atomic.Int64
	// PartsBusy is how many more gets of path-tree parts to answer 429.
	PartsBusy atomic.Int64
	// Hold, when set, keeps every admitted read in flight until the
	// channel is closed (a test fills the quota with it).
	Hold atomic.Pointer[chan struct{}]
}

// StartCloudProxy serves a CloudProxy for the Chroma server at target on
// a free port of 127.0.0.1, net away. Close it after.
func StartCloudProxy(target string, n Network) (*CloudProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("cloud proxy target: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cloud proxy: %w", err)
	}
	p := &CloudProxy{URL: "http://" + l.Addr().String(), Net: n, net: n, proxy: httputil.NewSingleHostReverseProxy(u), inflight: map[string]int{}}
	p.link.bandwidth = n.Bandwidth
	// the proxy's own connections to the server stay open: its clients'
	// connections are the ones that cost handshakes
	p.proxy.Transport = &http.Transport{MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}
	p.proxy.ErrorLog = nil
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = p.srv.Serve(&slowListener{Listener: l, p: p}) }()
	return p, nil
}

// Close stops the proxy and closes its connections.
func (p *CloudProxy) Close() { _ = p.srv.Close() }

// Violations are the requests Chroma Cloud would have refused.
func (p *CloudProxy) Violations() int64 {
	return p.Refused.Load() + p.TooBig.Load() + p.BadWrites.Load()
}

// Reset zeroes the counters.
func (p *CloudProxy) Reset() {
	for _, c := range []*atomic.Int64{&p.Peak, &p.Refused, &p.TooBig, &p.BadWrites, &p.Requests, &p.Heartbeats, &p.Reads, &p.Conns, &p.Wire, &p.Content} {
		c.Store(0)
	}
}

func (p *CloudProxy) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasSuffix(r.URL.Path, "/heartbeat") {
		defer p.Heartbeats.Add(1) // once answered
	} else {
		p.Requests.Add(1)
	}
	half := p.net.RTT / 2
	time.Sleep(half) // the request on its way
	read := strings.HasSuffix(r.URL.Path, "/get") || strings.HasSuffix(r.URL.Path, "/query")
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	refuse := func(status int, kind, msg string) {
		time.Sleep(p.net.RTT - half) // the answer on its way back
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": kind, "message": msg})
	}
	if why := CloudRecordLimits(body); why != "" && !read {
		p.BadWrites.Add(1)
		refuse(http.StatusUnprocessableEntity, "InvalidArgument", why)
		return
	}
	if !read {
		rec := httptest.NewRecorder()
		p.proxy.ServeHTTP(rec, r)
		p.answer(w, rec, time.Now())
		return
	}
	var req struct {
		Limit *int     `json:"limit"`
		IDs   []string `json:"ids"`
	}
	_ = json.Unmarshal(body, &req)
	if (req.Limit != nil && *req.Limit > CloudMaxResults) || len(req.IDs) > CloudMaxResults {
		p.TooBig.Add(1)
		refuse(http.StatusBadRequest, "InvalidArgument", fmt.Sprintf("limit exceeds the quota of %d", CloudMaxResults))
		return
	}
	if len(req.IDs) > 0 && strings.HasPrefix(req.IDs[0], chroma.TreeID+"#") && p.PartsBusy.Add(-1) >= 0 {
		p.Refused.Add(1)
		refuse(http.StatusTooManyRequests, "RateLimit", "busy")
		return
	}
	coll := collectionOf(r.URL.Path)
	if !p.enter(coll) {
		p.Refused.Add(1)
		refuse(http.StatusTooManyRequests, "RateLimit", "too many concurrent reads")
		return
	}
	p.Reads.Add(1)
	if h := p.Hold.Load(); h != nil {
		<-*h
	}
	rec := httptest.NewRecorder()
	p.proxy.ServeHTTP(rec, r)
	answered := time.Now()
	p.leave(coll) // Cloud counts its own time: the answer's way back is not
	if n := answerResults(rec); n > CloudMaxResults {
		p.TooBig.Add(1)
		refuse(http.StatusBadRequest, "InvalidArgument", fmt.Sprintf("%d results exceed the quota of %d", n, CloudMaxResults))
		return
	}
	p.Wire.Add(int64(rec.Body.Len()))
	if strings.HasSuffix(r.URL.Path, "/get") && rec.Code == http.StatusOK {
		p.Content.Add(contentBytes(rec))
	}
	p.answer(w, rec, answered)
}

// answer sends the server's answer rec, complete at answered, back
// through the network: the rest of the round trip from then, and its
// bytes through the link. The proxy reads the answer (its counts and
// checks) on the way back, so that reading adds nothing to the distance:
// what a client waits for is the network's time and the server's.
func (p *CloudProxy) answer(w http.ResponseWriter, rec *httptest.ResponseRecorder, answered time.Time) {
	time.Sleep(max(time.Until(answered.Add(p.net.RTT-p.net.RTT/2)), 0) + p.link.reserve(rec.Body.Len()))
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (p *CloudProxy) enter(coll string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inflight[coll] >= CloudConcurrentReads {
		return false
	}
	p.inflight[coll]++
	if n := int64(p.inflight[coll]); n > p.Peak.Load() {
		p.Peak.Store(n)
	}
	return true
}

func (p *CloudProxy) leave(coll string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inflight[coll]--
}

// link is a shared link of a bandwidth: each answer waits for the bytes
// before it to pass, then for its own.
type link struct {
	bandwidth int64
	mu        sync.Mutex
	free      time.Time // when the bytes sent so far have passed
}

// reserve books n bytes on the link and returns how long until they
// have passed.
func (l *link) reserve(n int) time.Duration {
	if l.bandwidth <= 0 || n == 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if l.free.Before(now) {
		l.free = now
	}
	l.free = l.free.Add(time.Duration(float64(n) / float64(l.bandwidth) * float64(time.Second)))
	return l.free.Sub(now)
}

// slowListener counts the connections it accepts and makes each pay the
// network's handshake before its first request is read.
type slowListener struct {
	net.Listener
	p *CloudProxy
}

func (l *slowListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.p.Conns.Add(1)
	return &slowConn{Conn: c, handshake: l.p.net.Handshake}, nil
}

type slowConn struct {
	net.Conn
	once      sync.Once
	handshake time.Duration
}

func (c *slowConn) Read(b []byte) (int, error) {
	c.once.Do(func() { time.Sleep(c.handshake) })
	return c.Conn.Read(b)
}

// CloudRecordLimits says what in a request body Chroma Cloud would refuse
// (ids, documents, metadata of the records it names), or "".
func CloudRecordLimits(body []byte) string {
	var req struct {
		IDs       []string         `json:"ids"`
		Documents []*string        `json:"documents"`
		Metadatas []map[string]any `json:"metadatas"`
	}
	if json.Unmarshal(body, &req) != nil {
		return ""
	}
	if len(req.IDs) > CloudMaxRecords {
		return fmt.Sprintf("%d records in one request", len(req.IDs))
	}
	for _, id := range req.IDs {
		if len(id) > CloudMaxID {
			return fmt.Sprintf("id of %d bytes", len(id))
		}
	}
	for _, d := range req.Documents {
		if d != nil && len(*d) > CloudMaxDocument {
			return fmt.Sprintf("document of %d bytes", len(*d))
		}
	}
	for _, md := range req.Metadatas {
		if len(md) > CloudMaxKeys {
			return fmt.Sprintf("%d metadata keys", len(md))
		}
		for k, v := range md {
			if len(k) > CloudMaxKey {
				return fmt.Sprintf("metadata key of %d bytes", len(k))
			}
			if s, ok := v.(string); ok && len(s) > CloudMaxValue {
				return fmt.Sprintf("metadata value of %d bytes", len(s))
			}
		}
	}
	return ""
}

// answerBody is an answer's body, gunzipped when the server compressed it.
func answerBody(rec *httptest.ResponseRecorder) []byte {
	body := rec.Body.Bytes()
	if rec.Header().Get("Content-Encoding") != "gzip" {
		return body
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		return nil
	}
	if body, err = io.ReadAll(zr); err != nil {
		return nil
	}
	return body
}

// answerResults is how many results an answer of a read holds: the ids of
// a get, the most ids of one list of a query (Cloud's limit is per query
// embedding); 0 for anything else.
func answerResults(rec *httptest.ResponseRecorder) int {
	if rec.Code != http.StatusOK {
		return 0
	}
	var ans struct {
		IDs json.RawMessage `json:"ids"`
	}
	if json.Unmarshal(answerBody(rec), &ans) != nil || len(ans.IDs) == 0 {
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

// contentBytes is the length of the documents of a get's answer, the path
// tree's records (header and parts) excepted.
func contentBytes(rec *httptest.ResponseRecorder) int64 {
	var res struct {
		IDs       []string  `json:"ids"`
		Documents []*string `json:"documents"`
	}
	if json.Unmarshal(answerBody(rec), &res) != nil {
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

// collectionOf is the collection a request's path names.
func collectionOf(path string) string {
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if p == "collections" && i+1 < len(parts) {
			return parts[i+1]
		}
	}
	return path
}
