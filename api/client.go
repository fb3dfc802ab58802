package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Client calls a chromafsd over its unix socket.
type Client struct {
	Socket string
	http   *http.Client
}

// NewClient returns a client of the daemon listening at socket.
func NewClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
		DisableKeepAlives: true,
	}
	return &Client{Socket: socket, http: &http.Client{Transport: tr, Timeout: 2 * time.Minute}}
}

// CallError is an answer of the daemon that is not a success.
type CallError struct {
	Status int
	Body   Error
}

func (e *CallError) Error() string { return e.Body.Error }

// ErrUnreachable wraps a failure to reach the daemon at all.
var ErrUnreachable = errors.New("chromafsd unreachable")

// Attach asks for a view at req.Path.
func (c *Client) Attach(ctx context.Context, req AttachRequest) (Attachment, error) {
	var a Attachment
	return a, c.call(ctx, http.MethodPost, "/v1/attach", req, &a)
}

// Detach removes an attachment.
func (c *Client) Detach(ctx context.Context, req DetachRequest) (Attachment, error) {
	var a Attachment
	return a, c.call(ctx, http.MethodPost, "/v1/detach", req, &a)
}

// List returns the daemon's collections, views and attachments.
func (c *Client) List(ctx context.Context) (Status, error) {
	var s Status
	return s, c.call(ctx, http.MethodGet, "/v1/list", nil, &s)
}

// Refresh asks the daemon to check collections now.
func (c *Client) Refresh(ctx context.Context, req RefreshRequest) (RefreshResult, error) {
	var r RefreshResult
	return r, c.call(ctx, http.MethodPost, "/v1/refresh", req, &r)
}

func (c *Client) call(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://chromafsd"+path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%w at %s: %w", ErrUnreachable, c.Socket, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("chromafsd: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		ce := &CallError{Status: resp.StatusCode}
		if json.Unmarshal(data, &ce.Body) != nil || ce.Body.Error == "" {
			ce.Body = Error{Error: fmt.Sprintf("chromafsd answered %s", resp.Status), Code: CodeInternal}
		}
		return ce
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("chromafsd: a malformed answer: %w", err)
	}
	return nil
}
