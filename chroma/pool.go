package chroma

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/chromafs/chromafs/internal/netdial"
)

// Pool is the connections a process keeps to one Chroma server, shared by
// every store opened with it (Config.Pool): a daemon serving many
// collections of a server opens the next one on a connection already
// open, without the TCP and TLS handshakes a store of its own would pay
// first (two round trips: 50 ms of a first attach 25 ms from Chroma, 160
// ms at 80 ms). With keepWarm, one connection is kept open by a heartbeat
// (GET /api/v2/heartbeat, no collection read) every interval, from NewPool
// on, so that even the first collection finds it open. Connections carry no
// credentials (the token is a header of each request), so stores of any
// collection may share them. Close stops the heartbeat and closes the
// idle connections.
type Pool struct {
	tr     *http.Transport
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// newTransport is the transport every request goes through: bounded dial
// (dial's, else netdial.Dialer's), TLS and header waits (timeout: per request),
// and idle connections kept for reuse.
func newTransport(timeout time.Duration, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *http.Transport {
	if dial == nil {
		dial = netdial.Dialer().DialContext
	}
	return &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dial,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: timeout,
		MaxIdleConns:          64,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
		ForceAttemptHTTP2:     true,
	}
}

// NewPool returns a pool for the server cfg names (its URL, per-request
// timeout and token: read from TokenFile or CHROMA_TOKEN when cfg was not
// validated). keepWarm > 0 sends a heartbeat at once
// and then every keepWarm (below the 90 s an idle connection is kept, and
// below what servers and load balancers allow an idle one); failures are
// logged at debug level only (a heartbeat is an optimization: the stores
// say what is wrong when they are used).
func NewPool(cfg Config, keepWarm time.Duration, log *slog.Logger) *Pool {
	p := &Pool{tr: newTransport(cfg.Timeout, cfg.Dial)}
	if cfg.token == "" { // not validated yet (a daemon's connection has no collection)
		cfg.token, _ = loadToken(cfg.TokenFile) // a bad token file is the stores' to report
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	if keepWarm > 0 {
		p.wg.Add(1)
		go p.keepWarm(ctx, cfg, keepWarm, log)
	}
	return p
}

// keepWarm sends a heartbeat every interval until ctx ends.
func (p *Pool) keepWarm(ctx context.Context, cfg Config, interval time.Duration, log *slog.Logger) {
	defer p.wg.Done()
	u, err := url.JoinPath(cfg.URL, "api", "v2", "heartbeat")
	if err != nil {
		log.Debug("keeping a connection to Chroma open: bad URL", "err", err)
		return
	}
	client := &http.Client{Transport: p.tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := heartbeat(ctx, client, u, cfg); err != nil && ctx.Err() == nil {
			log.Debug("keeping a connection to Chroma open: heartbeat failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// heartbeat sends one heartbeat and reads its answer to the end, so that
// the connection goes back to the pool.
func heartbeat(ctx context.Context, client *http.Client, u string, cfg Config) error {
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	if cfg.token != "" {
		req.Header.Set("X-Chroma-Token", cfg.token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
	return err
}

// Close stops the heartbeat and closes the idle connections (stores
// still using the pool open new ones).
func (p *Pool) Close() {
	p.cancel()
	p.wg.Wait()
	p.tr.CloseIdleConnections()
}
