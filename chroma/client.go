package chroma

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
	chhttp "github.com/amikos-tech/chroma-go/pkg/commons/http"
	"github.com/amikos-tech/chroma-go/pkg/embeddings"
)

// Errors callers can test for with errors.Is.
var (
	ErrUnreachable  = errors.New("chroma server unreachable")
	ErrUnauthorized = errors.New("not authorized by the chroma server")
	ErrNotFound     = errors.New("not found")
	ErrNoCollection = errors.New("no such collection")
	ErrNoTree       = errors.New("collection has no path tree")
	ErrBadTree      = errors.New("path tree parts missing or inconsistent")
	ErrBadPage      = errors.New("page chunks inconsistent")
	ErrServer       = errors.New("chroma server error")
	ErrBusy         = errors.New("chroma server busy (quota or overload)")
	ErrDimension    = errors.New("embedding dimension mismatch")
	ErrForeign      = errors.New("record of another writer")
	ErrNotChroma    = errors.New("not a Chroma server")
)

// Retryable reports whether err may go away by itself: the server was
// unreachable, timed out, or answered 5xx or 429.
func Retryable(err error) bool {
	return errors.Is(err, ErrUnreachable) || errors.Is(err, ErrServer) || errors.Is(err, ErrBusy)
}

// Busy reports whether err is back-pressure (HTTP 429 or 503): wait and
// ask again while time remains, it is not a failure.
func Busy(err error) bool { return errors.Is(err, ErrBusy) }

// WhileBusy runs fn until it returns something other than back-pressure or
// ctx ends, waiting a jittered, capped backoff between tries, or the
// server's Retry-After when it is longer.
func WhileBusy(ctx context.Context, fn func() error) error {
	for attempt := 0; ; attempt++ {
		err := fn()
		if !Busy(err) {
			return err
		}
		backoff := min(50*time.Millisecond<<min(attempt, 5), 500*time.Millisecond)
		backoff += rand.N(backoff / 2)
		select {
		case <-time.After(max(backoff, RetryAfter(err))):
		case <-ctx.Done():
			return err
		}
	}
}

// Store is one collection on one Chroma server.
type Store struct {
	cfg    Config
	client v2.Client
	ef     embeddings.EmbeddingFunction // embeds what Upsert writes
	// embedWith, when set, embeds the records a write embeds itself
	// (EmbedWith)
	embedWith func(ctx context.Context, texts []string) ([]embeddings.Embedding, error)
	requests  atomic.Int64

	// atOnce: the next tree load gets the header and the first parts in
	// one request (treeAtOnce): set by Open, for the first load only
	atOnce atomic.Bool

	mu   sync.Mutex    // protects the following
	coll v2.Collection // nil until opened (OpenByID opens on first use)
	id   string        // the collection's id, known before coll with OpenByID
}

// newHTTPClient builds the client every request goes through: bounded dial,
// TLS and header waits, a cap on body size, and no redirects; its
// connections are cfg.Pool's when set, else its own.
func newHTTPClient(cfg Config) *http.Client {
	var tr http.RoundTripper
	if cfg.Pool != nil {
		tr = cfg.Pool.tr
	} else {
		tr = newTransport(cfg.Timeout, cfg.Dial)
	}
	return &http.Client{
		Transport: &limitTransport{next: tr, max: cfg.MaxBody},
		CheckRedirect: func(req *http.Request, _ []*http.Request) error {
			return fmt.Errorf("redirect to %s refused", req.URL.Redacted())
		},
	}
}

// Open connects to the server and opens an existing collection. ef is the
// embedding function for writes; nil selects the offline default, which
// also keeps chroma-go from instantiating a model on its own.
func Open(ctx context.Context, cfg Config, ef embeddings.EmbeddingFunction) (*Store, error) {
	return open(ctx, cfg, ef, false)
}

// OpenOrCreate is Open, creating the collection when it does not exist.
func OpenOrCreate(ctx context.Context, cfg Config, ef embeddings.EmbeddingFunction) (*Store, error) {
	return open(ctx, cfg, ef, true)
}

func open(ctx context.Context, cfg Config, ef embeddings.EmbeddingFunction, create bool) (*Store, error) {
	s, err := newStore(cfg, ef)
	if err != nil {
		return nil, err
	}
	if err := s.connect(ctx, s.ef, create, false); err != nil {
		_ = s.client.Close()
		return nil, err
	}
	s.atOnce.Store(true)
	return s, nil
}

func newStore(cfg Config, ef embeddings.EmbeddingFunction) (*Store, error) {
	if ef == nil {
		ef = embeddings.NewConsistentHashEmbeddingFunction()
	}
	opts := []v2.ClientOption{
		v2.WithBaseURL(cfg.URL),
		v2.WithDatabaseAndTenant(cfg.Database, cfg.Tenant),
		v2.WithHTTPClient(newHTTPClient(cfg)),
	}
	if cfg.token != "" {
		opts = append(opts, v2.WithAuth(v2.NewTokenAuthCredentialsProvider(cfg.token, v2.XChromaTokenHeader)))
	}
	client, err := v2.NewHTTPClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("chroma client: %w", err)
	}
	return &Store{cfg: cfg, client: client, ef: ef}, nil
}

// connect opens the collection in one request; only when it is not found
// does it ask for the database, to say clearly which one is missing. A
// store that knows its collection's id (OpenByID) accepts only that
// collection, unless replace (Reopen).
func (s *Store) connect(ctx context.Context, ef embeddings.EmbeddingFunction, create, replace bool) error {
	var coll v2.Collection
	err := s.call(ctx, func(ctx context.Context) (err error) {
		if create {
			coll, err = s.client.GetOrCreateCollection(ctx, s.cfg.Collection, v2.WithEmbeddingFunctionCreate(ef))
		} else {
			coll, err = s.client.GetCollection(ctx, s.cfg.Collection, v2.WithEmbeddingFunctionGet(ef))
		}
		return err
	})
	if err == nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.id != "" && coll.ID() != s.id && !replace {
			return fmt.Errorf("collection %q: %w (id %s, was %s): remount", s.cfg.Collection, ErrRecreated, coll.ID(), s.id)
		}
		s.coll, s.id = coll, coll.ID()
		return nil
	}
	err = s.explain(err, fmt.Sprintf("collection %q", s.cfg.Collection))
	if answeredHTTP(err) && !s.isChroma(ctx) {
		return fmt.Errorf("%s answers HTTP but is %w (GET /api/v2/heartbeat fails; a Chroma 1.x server answers it): check --chroma-url (%w)",
			s.cfg.URL, ErrNotChroma, err)
	}
	if !errors.Is(err, ErrNotFound) {
		return err
	}
	db := v2.NewDatabase(s.cfg.Database, v2.NewTenant(s.cfg.Tenant))
	if derr := s.call(ctx, func(ctx context.Context) error { _, err := s.client.GetDatabase(ctx, db); return err }); derr != nil {
		return s.explain(derr, fmt.Sprintf("tenant %q, database %q", s.cfg.Tenant, s.cfg.Database))
	}
	return fmt.Errorf("%w (%w)", err, ErrNoCollection)
}

// answeredHTTP reports whether err is an answer of the server (not a
// transport failure, not back-pressure, not a refused token).
func answeredHTTP(err error) bool {
	return !errors.Is(err, ErrUnreachable) && !errors.Is(err, ErrBusy) && !errors.Is(err, ErrUnauthorized) &&
		!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// isChroma reports whether the server answers Chroma's heartbeat.
func (s *Store) isChroma(ctx context.Context) bool {
	return s.call(ctx, func(ctx context.Context) error { return s.client.Heartbeat(ctx) }) == nil
}

// Requests is how many requests the store has sent.
func (s *Store) Requests() int64 { return s.requests.Load() }

// Close releases the client's connections.
func (s *Store) Close() error { return s.client.Close() }

// Identity names the collection for content caches: tenant, database and
// the collection's id, which a collection re-created under the same name
// does not share.
func (s *Store) Identity() string {
	return s.cfg.Tenant + "/" + s.cfg.Database + "/" + s.ID()
}

// ID is the collection's id.
func (s *Store) ID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.id
}

// Collection is the collection's name.
func (s *Store) Collection() string { return s.cfg.Collection }

// call runs fn in a slot of the limiter, if any, under the per-request
// deadline (waiting for the slot counts against it).
func (s *Store) call(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if s.cfg.Limiter != nil {
		release, err := s.cfg.Limiter.Acquire(ctx)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBusy, err)
		}
		defer release()
	}
	s.requests.Add(1)
	ctx, hint := withRetryHint(ctx)
	return withRetryAfter(fn(ctx), time.Duration(hint.after.Load()))
}

// explain turns a chroma-go error into one clear line wrapping a sentinel.
// A server's words are repeated in it, so the token is cut out of them:
// a server (or a proxy) that echoes the request's headers must not put
// the token in a log or on a terminal.
func (s *Store) explain(err error, what string) error {
	return redact(s.describe(err, what), s.cfg.token)
}

// redacted is an error whose text had the token cut out; it unwraps to
// the original, so errors.Is still finds the sentinels.
type redacted struct {
	err  error
	text string
}

func (r redacted) Error() string { return r.text }
func (r redacted) Unwrap() error { return r.err }

// redact returns err with every occurrence of token in its text replaced.
func redact(err error, token string) error {
	if err == nil || token == "" || !strings.Contains(err.Error(), token) {
		return err
	}
	return redacted{err: err, text: strings.ReplaceAll(err.Error(), token, "[token]")}
}

// describe is explain before the token is cut out.
func (s *Store) describe(err error, what string) error {
	var ce *chhttp.ChromaError
	if errors.As(err, &ce) && ce.ErrorCode != 0 {
		msg := firstLine(ce.Message)
		switch {
		case ce.ErrorCode == http.StatusUnauthorized || ce.ErrorCode == http.StatusForbidden:
			return fmt.Errorf("%s: %w (HTTP %d): check CHROMA_TOKEN or --token-file", what, ErrUnauthorized, ce.ErrorCode)
		case ce.ErrorCode == http.StatusNotFound || strings.Contains(strings.ToLower(msg), "not found") ||
			strings.Contains(strings.ToLower(msg), "does not exist"):
			return fmt.Errorf("%s: %w at %s (HTTP %d: %s)", what, ErrNotFound, s.cfg.URL, ce.ErrorCode, msg)
		case ce.ErrorCode == http.StatusTooManyRequests || ce.ErrorCode == http.StatusServiceUnavailable:
			return withRetryAfter(fmt.Errorf("%s: %w: %s answered HTTP %d: %s", what, ErrBusy, s.cfg.URL, ce.ErrorCode, msg), RetryAfter(err))
		case ce.ErrorCode >= 500:
			return fmt.Errorf("%s: %w: %s answered HTTP %d: %s", what, ErrServer, s.cfg.URL, ce.ErrorCode, msg)
		default:
			return fmt.Errorf("%s: chroma server at %s answered HTTP %d: %s", what, s.cfg.URL, ce.ErrorCode, msg)
		}
	}
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("%s: %w", what, err)
	}
	msg := err.Error()
	if ce != nil {
		msg = ce.Message // chroma-go flattens transport errors to text
	}
	var ne net.Error
	var ue *url.Error
	if !errors.As(err, &ne) && !errors.As(err, &ue) && ce == nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(msg, "deadline exceeded") || strings.Contains(msg, "timeout") {
		return fmt.Errorf("%s: %w: no answer from %s within %s", what, ErrUnreachable, s.cfg.URL, s.cfg.Timeout)
	}
	if i := strings.LastIndex(msg, "dial tcp"); i >= 0 {
		msg = msg[i:]
	}
	return fmt.Errorf("%s: %w at %s: %s", what, ErrUnreachable, s.cfg.URL, firstLine(msg))
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// limitTransport fails any response whose body exceeds max bytes, so a
// hostile or broken server cannot exhaust memory.
type limitTransport struct {
	next http.RoundTripper
	max  int64
}

func (t *limitTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	end := func() {}
	if tr := traceOf(req.Context()); tr != nil {
		end = tr.begin() // ends with the answer's body (read or closed)
	}
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		end()
		return nil, err
	}
	noteRetryAfter(req, resp)
	if resp.ContentLength > t.max {
		resp.Body.Close()
		end()
		return nil, fmt.Errorf("response of %d bytes exceeds the %d-byte limit", resp.ContentLength, t.max)
	}
	resp.Body = &limitedBody{rc: resp.Body, left: t.max, end: end}
	return resp, nil
}

type limitedBody struct {
	rc   io.ReadCloser
	left int64
	end  func() // told once, at the body's end or close
	once sync.Once
}

var errBodyTooLarge = errors.New("response body exceeds the size limit")

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errBodyTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if err != nil {
		b.once.Do(b.end)
	}
	return n, err
}

func (b *limitedBody) Close() error {
	b.once.Do(b.end)
	return b.rc.Close()
}
