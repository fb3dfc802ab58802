package harness

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestCloudProxyNetwork: a request through the proxy pays its round
// trip, a new connection its handshake first (a kept one does not), and
// an answer its bytes through the link; connections and requests are
// counted. Only lower bounds are asserted: a slow machine adds, never
// takes away.
func TestCloudProxyNetwork(t *testing.T) {
	const size = 100 << 10
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/big") {
			_, _ = w.Write(make([]byte, size))
			return
		}
		_, _ = io.WriteString(w, `{"ok":true}`)
	}))
	defer backend.Close()
	n := Network{RTT: 40 * time.Millisecond, Handshake: 80 * time.Millisecond, Bandwidth: 1 << 20}
	p, err := StartCloudProxy(backend.URL, n)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	client := &http.Client{Transport: &http.Transport{}}
	get := func(path string) time.Duration {
		t.Helper()
		start := time.Now()
		resp, err := client.Get(p.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(start)
	}
	if d := get("/small"); d < n.RTT+n.Handshake {
		t.Errorf("a new connection's first request took %v, want at least a round trip and the handshake (%v)", d, n.RTT+n.Handshake)
	}
	if d := get("/small"); d < n.RTT {
		t.Errorf("a request on a kept connection took %v, want at least a round trip (%v)", d, n.RTT)
	}
	wire := time.Duration(float64(size) / float64(n.Bandwidth) * float64(time.Second))
	if d := get("/big"); d < n.RTT+wire {
		t.Errorf("a %d-byte answer took %v, want at least a round trip and its bytes at %d B/s (%v)", size, d, n.Bandwidth, n.RTT+wire)
	}
	if c, r := p.Conns.Load(), p.Requests.Load(); c != 1 || r != 3 {
		t.Errorf("%d connections, %d requests: want 1 (kept alive) and 3", c, r)
	}
}

// TestCloudProxyQuotas: the 11th read of a collection in flight is
// answered 429, a read asking for 301 results and one answered 301 are
// refused (400), a write past Cloud's record limits 422; each counted.
func TestCloudProxyQuotas(t *testing.T) {
	hold := make(chan struct{})
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.URL.Path, "/many/") {
			ids := make([]string, CloudMaxResults+1)
			for i := range ids {
				ids[i] = `"x"`
			}
			_, _ = io.WriteString(w, `{"ids":[`+strings.Join(ids, ",")+`]}`)
			return
		}
		_, _ = io.WriteString(w, `{"ids":["a"]}`)
	}))
	defer backend.Close()
	p, err := StartCloudProxy(backend.URL, Network{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	post := func(path, body string) int {
		resp, err := http.Post(p.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Error(err)
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	get := "/api/v2/tenants/t/databases/d/collections/c/get"
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{get, `{"limit": 300}`, http.StatusOK},
		{get, `{"limit": 301}`, http.StatusBadRequest},
		{"/api/v2/tenants/t/databases/d/collections/many/get", `{}`, http.StatusBadRequest},
		{"/api/v2/tenants/t/databases/d/collections/c/upsert", `{"ids":["` + strings.Repeat("i", CloudMaxID+1) + `"]}`, http.StatusUnprocessableEntity},
	} {
		if got := post(c.path, c.body); got != c.status {
			t.Errorf("%s %s: HTTP %d, want %d", c.path, c.body, got, c.status)
		}
	}
	if p.TooBig.Load() != 2 || p.BadWrites.Load() != 1 {
		t.Errorf("refused for size %d, for record limits %d: want 2 and 1", p.TooBig.Load(), p.BadWrites.Load())
	}
	p.Hold.Store(&hold)
	done := make(chan int, CloudConcurrentReads)
	for range CloudConcurrentReads {
		go func() { done <- post(get, `{"limit": 1}`) }()
	}
	if err := Poll(10*time.Second, time.Millisecond, func() bool { return p.Peak.Load() == CloudConcurrentReads }); err != nil {
		t.Fatalf("reads in flight: %d of %d", p.Peak.Load(), CloudConcurrentReads)
	}
	p.Hold.Store(nil)
	if got := post(get, `{"limit": 1}`); got != http.StatusTooManyRequests || p.Refused.Load() != 1 {
		t.Errorf("an 11th read in flight: HTTP %d, %d refused; want 429, 1", got, p.Refused.Load())
	}
	close(hold)
	for range CloudConcurrentReads {
		if got := <-done; got != http.StatusOK {
			t.Errorf("a read within the quota: HTTP %d", got)
		}
	}
	if p.Violations() != 4 {
		t.Errorf("violations %d, want 4", p.Violations())
	}
}
