package lazy

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestFetchRange(t *testing.T) {
	body := bytes.Repeat([]byte("0123456789"), 1000)
	mux := http.NewServeMux()
	mux.HandleFunc("/ranged", func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "x", time.Time{}, bytes.NewReader(body))
	})
	mux.HandleFunc("/norange", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) })
	mux.HandleFunc("/short", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body[:50]) })
	mux.HandleFunc("/busy", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	mux.HandleFunc("/fail", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	mux.HandleFunc("/wrongrange", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Range", "bytes 0-9/10000")
		w.WriteHeader(http.StatusPartialContent)
		_, _ = w.Write(body[:10])
	})
	mux.HandleFunc("/tofile", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ranged", http.StatusFound) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := New(time.Second, nil)
	defer c.Close()
	ctx := context.Background()
	for _, path := range []string{"/ranged", "/norange", "/moved"} {
		got, err := c.FetchRange(ctx, srv.URL+path, 1234, 100)
		if err != nil || !bytes.Equal(got, body[1234:1334]) {
			t.Errorf("%s: %q, %v", path, got, err)
		}
	}
	for path, want := range map[string]error{"/busy": ErrBusy, "/fail": ErrTemporary} {
		if _, err := c.FetchRange(ctx, srv.URL+path, 0, 10); !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", path, err, want)
		}
	}
	var ra interface{ RetryAfter() time.Duration }
	if _, err := c.FetchRange(ctx, srv.URL+"/busy", 0, 10); !errors.As(err, &ra) || ra.RetryAfter() != 3*time.Second {
		t.Errorf("busy: Retry-After not carried: %v", err)
	}
	for _, path := range []string{"/short", "/wrongrange", "/tofile", "/missing"} {
		_, err := c.FetchRange(ctx, srv.URL+path, 100, 10)
		if err == nil || errors.Is(err, ErrTemporary) || errors.Is(err, ErrBusy) {
			t.Errorf("%s: %v, want a permanent error", path, err)
		}
	}
	if _, err := c.FetchRange(ctx, "http://127.0.0.1:1/x", 0, 1); !errors.Is(err, ErrTemporary) || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("unreachable: %v", err)
	}
	only := New(time.Second, []string{srv.URL + "/moved", srv.URL + "/norange"})
	defer only.Close()
	if _, err := only.FetchRange(ctx, srv.URL+"/norange", 0, 10); err != nil {
		t.Errorf("allowed prefix: %v", err)
	}
	for _, u := range []string{srv.URL + "/ranged", srv.URL + "/moved"} { // /moved redirects to /ranged
		if _, err := only.FetchRange(ctx, u, 0, 10); !errors.Is(err, ErrNotAllowed) {
			t.Errorf("%s outside the allowed prefixes: %v", u, err)
		}
	}
	none := New(time.Second, []string{})
	if _, err := none.FetchRange(ctx, srv.URL+"/ranged", 0, 10); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("empty allow list fetched: %v", err)
	}
}

func TestParseAllow(t *testing.T) {
	if p, err := ParseAllow(""); p != nil || err != nil {
		t.Errorf(`"": %v %v, want nil (any)`, p, err)
	}
	if p, err := ParseAllow("none"); p == nil || len(p) != 0 || err != nil {
		t.Errorf(`none: %v %v, want an empty list`, p, err)
	}
	if p, err := ParseAllow(" https://a/x/, http://b/ ,"); err != nil || len(p) != 2 || p[1] != "http://b/" {
		t.Errorf("two prefixes: %v %v", p, err)
	}
	if _, err := ParseAllow("ftp://a/"); err == nil {
		t.Error("ftp:// accepted")
	}
}
