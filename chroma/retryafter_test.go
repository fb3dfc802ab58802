package chroma

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
	}{
		{"", 0}, {"0", 0}, {"-3", 0}, {"soon", 0}, {"1.5", 0},
		{"2", 2 * time.Second},
		{"99999999999", maxRetryAfter},
		{now.Add(30 * time.Second).Format(http.TimeFormat), 30 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{now.Add(time.Hour).Format(http.TimeFormat), maxRetryAfter},
	} {
		if got := parseRetryAfter(tc.in, now); got != tc.want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// TestCallCarriesRetryAfter: a 429 answered through the store's transport
// leaves its Retry-After on the error call returns, through explain and
// wrapping; a 429 without one, or with a value that is not one, carries
// none.
func TestCallCarriesRetryAfter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if v := r.URL.Query().Get("after"); v != "" {
			w.Header().Set("Retry-After", v)
		}
		w.WriteHeader(http.StatusTooManyRequests)
	}))
	defer srv.Close()
	s := &Store{cfg: Config{URL: srv.URL, Timeout: 5 * time.Second, MaxBody: 1 << 20}}
	client := newHTTPClient(s.cfg)
	get := func(after string) error {
		return s.call(context.Background(), func(ctx context.Context) error {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/?after="+after, nil)
			resp, err := client.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
			return fmt.Errorf("%w: HTTP %d", ErrBusy, resp.StatusCode)
		})
	}
	err := fmt.Errorf("wrapped: %w", get("3"))
	if !errors.Is(err, ErrBusy) || RetryAfter(err) != 3*time.Second {
		t.Errorf("429 with Retry-After: 3: %v, RetryAfter %s; want ErrBusy and 3s", err, RetryAfter(err))
	}
	if err := get(""); RetryAfter(err) != 0 {
		t.Errorf("429 without Retry-After carries %s", RetryAfter(err))
	}
	if err := get("x"); RetryAfter(err) != 0 {
		t.Errorf("an unparsable Retry-After carries %s", RetryAfter(err))
	}
}

// TestWhileBusyHonoursRetryAfter: back-pressure that names a wait is not
// asked again sooner.
func TestWhileBusyHonoursRetryAfter(t *testing.T) {
	var at []time.Time
	err := WhileBusy(context.Background(), func() error {
		at = append(at, time.Now())
		if len(at) < 3 {
			return withRetryAfter(ErrBusy, 300*time.Millisecond)
		}
		return nil
	})
	if err != nil || len(at) != 3 {
		t.Fatalf("WhileBusy: %v after %d calls", err, len(at))
	}
	for i := 1; i < len(at); i++ {
		if d := at[i].Sub(at[i-1]); d < 300*time.Millisecond {
			t.Errorf("call %d came %s after the previous one, want at least the 300ms asked for", i+1, d)
		}
	}
}
