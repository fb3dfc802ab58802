package chroma

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// maxRetryAfter bounds the wait a server may ask for: a longer one is
// taken as this (the caller's deadline usually ends sooner anyway).
const maxRetryAfter = 5 * time.Minute

// RetryAfter is the wait the server asked for (HTTP Retry-After) with the
// back-pressure answer err carries, or 0 when it named none.
func RetryAfter(err error) time.Duration {
	var r interface{ RetryAfter() time.Duration }
	if errors.As(err, &r) {
		return r.RetryAfter()
	}
	return 0
}

// retryAfterError carries a server's Retry-After along an error chain.
type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string             { return e.err.Error() }
func (e *retryAfterError) Unwrap() error             { return e.err }
func (e *retryAfterError) RetryAfter() time.Duration { return e.after }

// withRetryAfter returns err carrying after, or err itself when after is 0.
func withRetryAfter(err error, after time.Duration) error {
	if err == nil || after <= 0 {
		return err
	}
	return &retryAfterError{err: err, after: after}
}

// retryHint is where the transport leaves the Retry-After of a busy
// answer to a request made under call: chroma-go turns responses into
// errors without their headers.
type retryHint struct{ after atomic.Int64 }

type retryHintKey struct{}

func withRetryHint(ctx context.Context) (context.Context, *retryHint) {
	h := &retryHint{}
	return context.WithValue(ctx, retryHintKey{}, h), h
}

// noteRetryAfter records resp's Retry-After in req's hint, if both exist.
func noteRetryAfter(req *http.Request, resp *http.Response) {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return
	}
	h, ok := req.Context().Value(retryHintKey{}).(*retryHint)
	if !ok {
		return
	}
	if d := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); d > 0 {
		h.after.Store(int64(d))
	}
}

// parseRetryAfter reads delay-seconds or an HTTP date (RFC 9110 10.2.3);
// anything else is 0.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return min(time.Duration(min(s, int64(maxRetryAfter/time.Second)))*time.Second, maxRetryAfter)
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return min(t.Sub(now), maxRetryAfter)
	}
	return 0
}
