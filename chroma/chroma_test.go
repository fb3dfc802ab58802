package chroma

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
)

func chunk(i int, text, sha string) chunkMeta {
	return chunkMeta{sha: sha, rawChunk: rawChunk{index: i, text: text}}
}

func TestAssemble(t *testing.T) {
	bad := chunkMeta{rawChunk: rawChunk{err: errors.New("chunk_index missing")}}
	tests := []struct {
		name string
		ref  PageRef
		got  []chunkMeta
		want []int
		out  string
		err  string
	}{
		{"in order", PageRef{Slug: "p"}, []chunkMeta{chunk(0, "a", ""), chunk(1, "b", "")}, nil, "ab", ""},
		{"out of order", PageRef{Slug: "p"}, []chunkMeta{chunk(2, "c", ""), chunk(0, "a", ""), chunk(1, "b", "")}, nil, "abc", ""},
		{"empty foreign page", PageRef{Slug: "p"}, nil, nil, "", ""},
		{"missing index", PageRef{Slug: "p"}, []chunkMeta{chunk(0, "a", ""), chunk(2, "c", "")}, nil, "", "chunk_index 1 missing"},
		{"duplicate", PageRef{Slug: "p"}, []chunkMeta{chunk(0, "a", ""), chunk(0, "x", "")}, nil, "", "duplicate chunk_index 0"},
		{"malformed index", PageRef{Slug: "p"}, []chunkMeta{bad}, nil, "", "chunk_index missing"},
		{"lengths match", PageRef{Slug: "p", Chunks: []int64{1, 2}}, []chunkMeta{chunk(0, "a", ""), chunk(1, "bb", "")}, nil, "abb", ""},
		{"length mismatch", PageRef{Slug: "p", Chunks: []int64{1, 1}}, []chunkMeta{chunk(0, "a", ""), chunk(1, "bb", "")}, nil, "", "tree says otherwise"},
		{"fewer than tree", PageRef{Slug: "p", Chunks: []int64{1, 1}}, []chunkMeta{chunk(0, "a", "")}, nil, "", "missing"},
		{"other version ignored", PageRef{Slug: "p", SHA256: "new"}, []chunkMeta{chunk(0, "old", "old"), chunk(0, "new", "new")}, nil, "new", ""},
		{"range", PageRef{Slug: "p", Chunks: []int64{1, 1, 1}}, []chunkMeta{chunk(1, "b", ""), chunk(2, "c", "")}, []int{1, 2}, "bc", ""},
		{"range missing", PageRef{Slug: "p", Chunks: []int64{1, 1, 1}}, []chunkMeta{chunk(1, "b", "")}, []int{1, 2}, "", "chunk_index 2 missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := assemble(tc.ref, tc.got, tc.want)
			if tc.err != "" {
				if err == nil || !errors.Is(err, ErrBadPage) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want ErrBadPage with %q", err, tc.err)
				}
				return
			}
			if err != nil || strings.Join(out, "") != tc.out {
				t.Fatalf("got %q, %v; want %q", out, err, tc.out)
			}
		})
	}
}

func TestChunkIndex(t *testing.T) {
	tests := []struct {
		attr *v2.MetaAttribute
		want int
		ok   bool
	}{
		{v2.NewIntAttribute(KeyChunkIndex, 3), 3, true},
		{v2.NewStringAttribute(KeyChunkIndex, "12"), 12, true},
		{v2.NewStringAttribute(KeyChunkIndex, " 7 "), 7, true},
		{v2.NewFloatAttribute(KeyChunkIndex, 2), 2, true},
		{v2.NewFloatAttribute(KeyChunkIndex, 2.5), 0, false},
		{v2.NewIntAttribute(KeyChunkIndex, -1), 0, false},
		{v2.NewStringAttribute(KeyChunkIndex, "-1"), 0, false},
		{v2.NewStringAttribute(KeyChunkIndex, "0x10"), 0, false},
		{v2.NewStringAttribute(KeyPage, "no index"), 0, false},
	}
	for _, tc := range tests {
		got, err := chunkIndex(v2.NewDocumentMetadata(tc.attr))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("%v: got %d, %v; want %d ok=%v", tc.attr, got, err, tc.want, tc.ok)
		}
	}
	if _, err := chunkIndex(nil); err == nil {
		t.Error("nil metadata accepted")
	}
}

func TestSplitString(t *testing.T) {
	for _, tc := range []struct {
		s    string
		size int
		n    int
	}{{"", 4, 1}, {"abcd", 4, 1}, {"abcde", 4, 2}, {strings.Repeat("x", 12), 4, 3}} {
		parts := splitString(tc.s, tc.size)
		if len(parts) != tc.n || strings.Join(parts, "") != tc.s {
			t.Errorf("splitString(%q, %d) = %q", tc.s, tc.size, parts)
		}
	}
	if ids := TreeIDs(strings.Repeat("x", TreePartSize*2+1)); len(ids) != 4 || ids[0] != TreeID {
		t.Errorf("TreeIDs of a 3-part tree = %v", ids)
	}
}

func TestTokenFile(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	open := filepath.Join(dir, "open")
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(good, []byte("tok-123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(open, []byte("tok"), 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c := Config{Collection: "col", URL: DefaultURL, TokenFile: good}
	if err := c.Validate(); err != nil || c.token != "tok-123" {
		t.Errorf("good token file: %v, token %q", err, c.token)
	}
	for _, p := range []string{open, empty, filepath.Join(dir, "missing")} {
		c := Config{Collection: "col", URL: DefaultURL, TokenFile: p}
		if err := c.Validate(); err == nil {
			t.Errorf("token file %s accepted", filepath.Base(p))
		}
	}
	t.Setenv("CHROMA_TOKEN", "from-env")
	c = Config{Collection: "col", URL: DefaultURL}
	if err := c.Validate(); err != nil || c.token != "from-env" {
		t.Errorf("env token: %v %q", err, c.token)
	}
	if err := (&Config{URL: DefaultURL}).Validate(); err == nil {
		t.Error("missing collection accepted")
	}
	if err := (&Config{URL: "127.0.0.1:8000", Collection: "col"}).Validate(); err == nil {
		t.Error("URL without scheme accepted")
	}
}

// The servers below are not Chroma: they answer every request the same
// hostile way, to check the client's defences without a real server.
func openAgainst(t *testing.T, h http.HandlerFunc, mod func(*Config)) error {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	t.Setenv("CHROMA_TOKEN", "s3cret-token")
	cfg := Config{URL: srv.URL, Collection: "col", Tenant: DefaultTenant, Database: DefaultDatabase, Timeout: 2 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), cfg, nil)
	if err != nil && strings.Contains(err.Error(), "s3cret-token") {
		t.Errorf("error leaks the token: %v", err)
	}
	return err
}

func TestUnauthorized(t *testing.T) {
	for _, code := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		var calls atomic.Int32
		err := openAgainst(t, func(w http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			if r.Header.Get("X-Chroma-Token") != "s3cret-token" {
				t.Errorf("token header not sent")
			}
			http.Error(w, `{"error":"Unauthorized","message":"no"}`, code)
		}, nil)
		if !errors.Is(err, ErrUnauthorized) || !strings.Contains(err.Error(), "CHROMA_TOKEN") {
			t.Errorf("HTTP %d: err = %v, want ErrUnauthorized", code, err)
		}
		if calls.Load() != 1 {
			t.Errorf("HTTP %d: %d requests, want 1 (no retry storm)", code, calls.Load())
		}
	}
}

// TestServerEchoingTheTokenIsRedacted: a server whose error message
// repeats the request's headers does not put the token in the error,
// which still wraps its sentinel.
func TestServerEchoingTheTokenIsRedacted(t *testing.T) {
	for _, code := range []int{http.StatusBadRequest, http.StatusNotFound, http.StatusBadGateway} {
		err := openAgainst(t, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, fmt.Sprintf(`{"error":"Bad","message":"bad header X-Chroma-Token: %s"}`, r.Header.Get("X-Chroma-Token")), code)
		}, nil)
		if err == nil || !strings.Contains(err.Error(), "[token]") {
			t.Errorf("HTTP %d: err = %v, want the echoed token replaced by [token]", code, err)
		}
		if code == http.StatusNotFound && !errors.Is(err, ErrNotFound) {
			t.Errorf("HTTP 404: err = %v no longer wraps ErrNotFound", err)
		}
	}
}

func TestRedirectRefused(t *testing.T) {
	var leaked atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Chroma-Token") != "" {
			leaked.Store(true)
		}
	}))
	defer other.Close()
	err := openAgainst(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}, nil)
	if err == nil || !strings.Contains(err.Error(), "redirect") {
		t.Errorf("err = %v, want a refused redirect", err)
	}
	if leaked.Load() {
		t.Error("token sent to the redirect target")
	}
}

// TestHangingServerTimesOut: a server that never answers is given up
// after the request's timeout. The server holds every request until the
// test ends, so only the client's deadline can end one; the limiter every
// request goes through sees that deadline: the 300ms asked for, not the
// default.
func TestHangingServerTimesOut(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold) // before the server's Close (a cleanup), which waits for its handlers
	var asked atomic.Int32
	lim := &deadlineLimiter{}
	err := openAgainst(t, func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		select {
		case <-r.Context().Done():
		case <-hold:
		}
	}, func(c *Config) { c.Timeout = 300 * time.Millisecond; c.Limiter = lim })
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(fmt.Sprint(err), "within 300ms") {
		t.Errorf("err = %v, want ErrUnreachable within 300ms", err)
	}
	lim.mu.Lock()
	defer lim.mu.Unlock()
	if n := asked.Load(); n == 0 || len(lim.left) != int(n) {
		t.Fatalf("%d requests reached the server, %d went through the limiter", n, len(lim.left))
	}
	for i, left := range lim.left {
		if left <= 0 || left > 300*time.Millisecond {
			t.Errorf("request %d: its deadline was %v away, want within the 300ms timeout", i+1, left)
		}
	}
}

// deadlineLimiter is a Limiter that records how far each request's
// deadline was when it asked for its slot (0: none).
type deadlineLimiter struct {
	mu   sync.Mutex
	left []time.Duration
}

func (l *deadlineLimiter) Acquire(ctx context.Context) (func(), error) {
	var left time.Duration
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	l.mu.Lock()
	l.left = append(l.left, left)
	l.mu.Unlock()
	return func() {}, nil
}

func TestOversizedBody(t *testing.T) {
	err := openAgainst(t, func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(strings.Repeat("x", 4096)))
	}, func(c *Config) { c.MaxBody = 1024 })
	if err == nil {
		t.Errorf("oversized heartbeat accepted")
	}
}

func TestLimitTransport(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			w.(http.Flusher).Flush() // no Content-Length: the body is counted
		} else {
			w.Header().Set("Content-Length", "4096")
		}
		w.Write([]byte(strings.Repeat("x", 4096)))
	}))
	defer srv.Close()
	client := newHTTPClient(Config{Timeout: time.Second, MaxBody: 1024})
	if _, err := client.Get(srv.URL + "/sized"); err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Errorf("sized body: err = %v", err)
	}
	resp, err := client.Get(srv.URL + "/chunked")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, err := io.ReadAll(resp.Body); !errors.Is(err, errBodyTooLarge) || len(b) > 1024 {
		t.Errorf("chunked body: read %d bytes, err %v", len(b), err)
	}
}

func TestWhileBusy(t *testing.T) {
	calls := 0
	err := WhileBusy(context.Background(), func() error {
		if calls++; calls < 4 {
			return fmt.Errorf("get: %w", ErrBusy)
		}
		return nil
	})
	if err != nil || calls != 4 {
		t.Errorf("WhileBusy: %v after %d calls, want success after 4", err, calls)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := WhileBusy(ctx, func() error { return ErrBusy }); !errors.Is(err, ErrBusy) {
		t.Errorf("endless back-pressure: %v, want ErrBusy once ctx ends", err)
	}
	calls = 0
	if err := WhileBusy(context.Background(), func() error { calls++; return ErrServer }); !errors.Is(err, ErrServer) || calls != 1 {
		t.Errorf("a failure was retried (%d calls, %v)", calls, err)
	}
}

// TestChunkIDFitsCloud: ids stay within Chroma Cloud's 128 bytes for any
// path length, keep their readable form when it fits, and never collide.
func TestChunkIDFitsCloud(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	if got := ChunkID("guides/auth", sha, 3); got != "guides/auth#3@abababababababab" {
		t.Errorf("short slug: %q", got)
	}
	seen := map[string]string{}
	for n := 1; n <= 4096; n += 7 {
		for _, c := range []string{"a", "é", "/"} {
			slug := strings.Repeat(c, n/len(c)+1)
			for _, i := range []int{0, 99999} {
				id := ChunkID(slug, sha, i)
				if len(id) > MaxID {
					t.Fatalf("slug of %d bytes, chunk %d: id of %d bytes", len(slug), i, len(id))
				}
				key := fmt.Sprintf("%s|%d", slug, i)
				if other, dup := seen[id]; dup && other != key {
					t.Fatalf("%q and %q share the id %q", other, key, id)
				}
				seen[id] = key
			}
		}
	}
}

// TestDecodeChunk: a binary chunk's base64 is decoded; an unknown encoding
// or base64 that does not decode is an error, never bytes.
func TestDecodeChunk(t *testing.T) {
	md := func(enc string) v2.DocumentMetadata {
		m := v2.NewDocumentMetadata(v2.NewStringAttribute(KeyPage, "p"))
		if enc != "" {
			m.SetString(KeyChunkEncoding, enc)
		}
		return m
	}
	for _, tc := range []struct {
		enc, doc, want string
		bad            bool
	}{
		{"", "plain text", "plain text", false},
		{EncodingBase64, "/wCA/g==", "\xff\x00\x80\xfe", false},
		{EncodingBase64, "not base64!", "", true},
		{"gzip", "x", "", true},
	} {
		got, err := decodeChunk(md(tc.enc), tc.doc)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("decodeChunk(%q, %q) = %q, %v", tc.enc, tc.doc, got, err)
		}
	}
	r := BinaryChunkRecord("img/a", "ab", 0, []byte{0xff, 0}, "binary file img/a.png (image/png), part 1 of 1")
	if enc, _ := r.Metadata.GetString(KeyChunkEncoding); enc != EncodingBase64 || r.Text != "/wA=" || r.EmbedText == "" {
		t.Errorf("BinaryChunkRecord: %+v", r)
	}
}
