package integration_test

import (
	"bytes"
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
	"testing"
	"time"
)

// faultProxy sits between chromafs and a real Chroma server and injects
// one fault at a time into the requests that fetch records (POST .../get);
// everything else passes through. It also records what it saw, so tests
// can assert what was (not) requested, that the token reached it, and
// that no token leaked.
type faultProxy struct {
	URL   string
	srv   *httptest.Server
	other *httptest.Server // redirect target: must never see a request with a token
	proxy *httputil.ReverseProxy

	mu     sync.Mutex // protects the following
	mode   string
	bodies []string // request bodies of record gets

	requests                               atomic.Int64 // every request, of any path
	gets, inflight, maxInflight, cancelled atomic.Int64
	burst                                  atomic.Int64 // 429s left to answer in mode 429burst
	retryAfter                             atomic.Value // string: Retry-After of the 429s of 429burst ("" for none)
	leaked                                 atomic.Bool
	otherHits                              atomic.Int64  // requests the redirect target saw
	gate                                   chan struct{} // mode "gate" holds gets until it is closed
	token                                  atomic.Value  // string: the last X-Chroma-Token or Authorization the proxy saw
}

func newFaultProxy(t *testing.T, target string) *faultProxy {
	t.Helper()
	u, err := url.Parse(target)
	must(t, err)
	p := &faultProxy{proxy: httputil.NewSingleHostReverseProxy(u), gate: make(chan struct{})}
	p.other = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.otherHits.Add(1)
		if r.Header.Get("X-Chroma-Token") != "" || r.Header.Get("Authorization") != "" {
			p.leaked.Store(true)
		}
		w.WriteHeader(http.StatusOK)
	}))
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	t.Cleanup(func() { p.srv.CloseClientConnections(); p.srv.Close(); p.other.Close() })
	return p
}

func (p *faultProxy) set(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.mode = mode
}

// sawBody reports whether any record get asked for something containing s.
func (p *faultProxy) sawBody(s string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range p.bodies {
		if strings.Contains(b, s) {
			return true
		}
	}
	return false
}

func (p *faultProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	for _, h := range []string{"X-Chroma-Token", "Authorization"} {
		if v := r.Header.Get(h); v != "" {
			p.token.Store(v)
		}
	}
	if !strings.HasSuffix(r.URL.Path, "/get") {
		p.proxy.ServeHTTP(w, r)
		return
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	p.mu.Lock()
	mode := p.mode
	p.bodies = append(p.bodies, string(body))
	p.mu.Unlock()
	p.gets.Add(1)
	n := p.inflight.Add(1)
	var once sync.Once
	done := func() { once.Do(func() { p.inflight.Add(-1) }) }
	defer done()
	for m := p.maxInflight.Load(); n > m && !p.maxInflight.CompareAndSwap(m, n); m = p.maxInflight.Load() {
	}
	p.fault(mode, w, r, done)
}

// fault answers r as mode says. done ends the request's time in flight; it
// is also called when fault returns.
func (p *faultProxy) fault(mode string, w http.ResponseWriter, r *http.Request, done func()) {
	switch mode {
	case "": // buffered, so the request stops counting before its client sees the answer and sends the next
		rec := httptest.NewRecorder()
		p.proxy.ServeHTTP(rec, r)
		done()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		w.Write(rec.Body.Bytes())
	case "refuse": // the connection dies before any answer
		hijack(w).Close()
	case "hang":
		<-r.Context().Done()
		p.cancelled.Add(1)
	case "gate": // held until the gate opens, then answered as ever
		select {
		case <-p.gate:
			p.fault("", w, r, done)
		case <-r.Context().Done():
			p.cancelled.Add(1)
		}
	case "drip": // headers at once, then a byte every 200ms
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		for _, b := range []byte(`{"ids":[["`) {
			if _, err := w.Write([]byte{b}); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-time.After(200 * time.Millisecond):
			case <-r.Context().Done():
				p.cancelled.Add(1)
				return
			}
		}
	case "reset": // a real answer, cut in the middle by a TCP reset
		rec := httptest.NewRecorder()
		p.proxy.ServeHTTP(rec, r)
		conn := hijack(w)
		full := rec.Body.Bytes()
		fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(full))
		conn.Write(full[:len(full)/2])
		if tc, ok := conn.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		conn.Close()
	case "429burst": // HTTP 429 while burst lasts, then real answers
		if p.burst.Add(-1) < 0 {
			p.fault("", w, r, done)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if v, _ := p.retryAfter.Load().(string); v != "" {
			w.Header().Set("Retry-After", v)
		}
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":"RateLimit","message":"quota exceeded"}`)
	case "500", "502", "503", "429", "401", "403":
		code := map[string]int{"500": 500, "502": 502, "503": 503, "429": 429, "401": 401, "403": 403}[mode]
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"error":"Injected","message":"injected %d"}`, code)
	case "html":
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "<html><body><h1>502 Bad Gateway</h1>nginx</body></html>")
	case "truncated":
		rec := httptest.NewRecorder()
		p.proxy.ServeHTTP(rec, r)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write(rec.Body.Bytes()[:rec.Body.Len()/2])
	case "huge": // 400 MiB of JSON-looking bytes, streamed without a length
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{"ids":[["`))
		chunk := bytes.Repeat([]byte("a"), 1<<20)
		for i := 0; i < 400; i++ {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	case "redirect":
		http.Redirect(w, r, p.other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	default:
		panic("unknown fault " + mode)
	}
}

func hijack(w http.ResponseWriter) net.Conn {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err != nil {
		panic(err)
	}
	return conn
}
