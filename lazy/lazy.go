// Package lazy reads the content of lazy pointers: tree entries whose bytes
// live at an http:// or https:// URI instead of in Chroma (docs/FORMAT.md).
//
// It knows HTTP and nothing of files or caches: [Client.FetchRange] returns
// exactly the bytes [off, off+n) of a resource, with one ranged GET, or an
// error. Checking those bytes against the digests the tree records, caching
// them and retrying are the read engine's (package content), which calls it
// through a one-method interface. Errors say what kind of failure they are
// ([ErrTemporary], [ErrBusy] with the server's Retry-After), so the engine
// can wait and ask again; anything else (404, a server that answers with
// other bytes than asked for) is permanent.
//
// A server that ignores Range and sends the whole resource (200) is read
// up to the bytes asked for and no further. Redirects are followed to
// http(s) URLs only, at most five; no credential is ever sent. An allow
// list of URL prefixes, when given, bounds where a tree may send the mount
// (its first request and every redirect): a tree is data, and a pointer to
// an internal address must not become a request to it unless allowed.
package lazy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Errors FetchRange wraps.
var (
	// ErrTemporary: the server could not be reached, timed out or failed
	// (5xx): asking again may work.
	ErrTemporary = errors.New("temporary failure")
	// ErrBusy: the server asked to slow down (429, 503).
	ErrBusy = errors.New("server busy")
)

// maxRedirects bounds the redirects one fetch follows.
const maxRedirects = 5

// ErrNotAllowed: the URL is outside the allowed prefixes.
var ErrNotAllowed = errors.New("not an allowed lazy pointer URL")

// Client fetches byte ranges of lazy pointers.
type Client struct {
	hc    *http.Client
	allow []string // URL prefixes; nil allows every http(s) URL
}

// New returns a client whose connections time out after connectTimeout
// (each request's deadline is its context's). allow lists the URL
// prefixes it may fetch from; nil allows any http(s) URL, an empty
// non-nil list none.
func New(connectTimeout time.Duration, allow []string) *Client {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: connectTimeout, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   connectTimeout,
		ResponseHeaderTimeout: 2 * connectTimeout,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true, // byte ranges of the resource, not of an encoding
	}
	c := &Client{allow: allow}
	c.hc = &http.Client{Transport: tr, CheckRedirect: c.checkRedirect}
	return c
}

// allowed reports whether u may be fetched.
func (c *Client) allowed(u string) bool {
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return false
	}
	if c.allow == nil {
		return true
	}
	for _, p := range c.allow {
		if strings.HasPrefix(u, p) {
			return true
		}
	}
	return false
}

// Close drops idle connections.
func (c *Client) Close() { c.hc.CloseIdleConnections() }

// errRedirect marks a redirect refused: a permanent error.
var errRedirect = errors.New("redirect refused")

func (c *Client) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("%w: more than %d", errRedirect, maxRedirects)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("%w: to %s, only http and https are followed", errRedirect, req.URL.Scheme)
	}
	if !c.allowed(req.URL.String()) {
		return fmt.Errorf("%w: to %s: %w", errRedirect, req.URL.Redacted(), ErrNotAllowed)
	}
	return nil
}

// FetchRange returns bytes [off, off+n) of the resource at uri: exactly n
// bytes, or an error.
func (c *Client) FetchRange(ctx context.Context, uri string, off, n int64) ([]byte, error) {
	if n == 0 {
		return []byte{}, nil
	}
	if !c.allowed(uri) {
		return nil, fmt.Errorf("lazy pointer %s: %w (--lazy-allow)", uri, ErrNotAllowed)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, uri, nil)
	if err != nil {
		return nil, fmt.Errorf("lazy pointer %s: %w", uri, err)
	}
	req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+n-1))
	resp, err := c.hc.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return nil, ctx.Err()
		}
		if errors.Is(err, errRedirect) {
			return nil, fmt.Errorf("lazy pointer %s: %w", uri, err)
		}
		return nil, fmt.Errorf("lazy pointer %s: %w: %w", uri, ErrTemporary, err)
	}
	defer resp.Body.Close()
	body, err := rangeBody(resp, off)
	if err != nil {
		return nil, fmt.Errorf("lazy pointer %s: %w", uri, err)
	}
	data := make([]byte, n)
	if _, err := io.ReadFull(body, data); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("lazy pointer %s: the resource ends before byte %d (it changed?)", uri, off+n)
		}
		return nil, fmt.Errorf("lazy pointer %s: reading the body: %w: %w", uri, ErrTemporary, err)
	}
	return data, nil
}

// rangeBody checks the status of resp and returns its body positioned at
// off.
func rangeBody(resp *http.Response, off int64) (io.Reader, error) {
	switch {
	case resp.StatusCode == http.StatusPartialContent:
		start, ok := contentRangeStart(resp.Header.Get("Content-Range"))
		if !ok || start != off {
			return nil, fmt.Errorf("asked for bytes from %d, got Content-Range %q", off, resp.Header.Get("Content-Range"))
		}
		return resp.Body, nil
	case resp.StatusCode == http.StatusOK: // Range ignored: skip to off
		if _, err := io.CopyN(io.Discard, resp.Body, off); err != nil {
			return nil, fmt.Errorf("the resource ends before byte %d (it changed?)", off)
		}
		return resp.Body, nil
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		return nil, fmt.Errorf("HTTP 416: the resource is shorter than the tree records (it changed?)")
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable:
		return nil, &busyError{status: resp.Status, after: retryAfter(resp.Header.Get("Retry-After"))}
	case resp.StatusCode >= 500:
		return nil, fmt.Errorf("HTTP %s: %w", resp.Status, ErrTemporary)
	}
	return nil, fmt.Errorf("HTTP %s", resp.Status)
}

// contentRangeStart reads the first byte position of "bytes 10-19/100".
func contentRangeStart(v string) (int64, bool) {
	v, ok := strings.CutPrefix(v, "bytes ")
	if !ok {
		return 0, false
	}
	first, _, ok := strings.Cut(v, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(first, 10, 64)
	return n, err == nil
}

// busyError is back-pressure, with the wait the server asked for.
type busyError struct {
	status string
	after  time.Duration
}

func (e *busyError) Error() string             { return "HTTP " + e.status + ": " + ErrBusy.Error() }
func (e *busyError) Unwrap() error             { return ErrBusy }
func (e *busyError) RetryAfter() time.Duration { return e.after }

// retryAfter reads Retry-After in seconds (an HTTP date counts as a second).
func retryAfter(v string) time.Duration {
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && n >= 0 {
		return min(time.Duration(n)*time.Second, time.Minute)
	}
	return time.Second
}

// ParseAllow reads an allow list as the commands take it (--lazy-allow):
// "" allows every http(s) URL (nil), "none" none (an empty list), else
// comma-separated URL prefixes, each http:// or https://.
func ParseAllow(s string) ([]string, error) {
	switch strings.TrimSpace(s) {
	case "":
		return nil, nil
	case "none":
		return []string{}, nil
	}
	out := []string{}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p == "" {
			continue
		}
		if !strings.HasPrefix(p, "http://") && !strings.HasPrefix(p, "https://") {
			return nil, fmt.Errorf("%q: want URL prefixes such as https://files.example/docs/, or none", p)
		}
		out = append(out, p)
	}
	return out, nil
}
