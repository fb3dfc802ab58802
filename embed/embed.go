// Package embed is ingest's embedding stage: it turns the texts of a write
// into vectors with the collection's embedding function, apart from the
// write itself.
//
// Chroma's client embeds inside the write request, under Chroma's
// deadline, so a slow model looked like an unreachable Chroma, and a write
// of 300 chunks was one embedding request that OpenAI refuses (at most
// 2,048 inputs, 8,192 tokens an input and 300,000 tokens a request). Here
// a Stage cuts the texts of a write into requests within the provider's
// Limits, counting tokens with OpenAI's own tokenizer for its models (an
// estimate of one token per 3 bytes for others), gives each request its
// own deadline and retries it when the provider says to wait (429) or
// failed on its side (5xx, a timeout), with jittered, growing, bounded
// pauses, keeps at most a few requests in flight across the whole run, and
// counts the tokens it sent. Every error names the embedding endpoint and
// model, never the Chroma server, and says what to try.
package embed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/amikos-tech/chroma-go/pkg/embeddings"
	"golang.org/x/sync/errgroup"
)

// Limits are what one embedding request may hold; 0 is no limit.
type Limits struct {
	Inputs          int // texts in one request
	TokensPerInput  int // tokens in one text
	TokensPerInputs int // tokens summed over the texts of one request
}

// OpenAILimits are OpenAI's limits for its embeddings endpoint.
var OpenAILimits = Limits{Inputs: 2048, TokensPerInput: 8192, TokensPerInputs: 300_000}

// Func makes the embeddings of texts in one request (an embeddings
// function of chroma-go, or OpenAI).
type Func interface {
	EmbedDocuments(ctx context.Context, texts []string) ([]embeddings.Embedding, error)
}

// Config describes a Stage.
type Config struct {
	Func Func
	// Where names the endpoint and model for errors and logs ("openai
	// model text-embedding-3-small at https://api.openai.com/v1/").
	Where  string
	Limits Limits
	// Count counts a text's tokens as the provider does; nil estimates.
	Count func(string) int
	// Counter names how tokens are counted (for the summary).
	Counter string
	// Cut returns text's first n tokens as Count counts them; nil cuts
	// at 3 bytes a token (Estimate's).
	Cut         func(text string, n int) string
	Timeout     time.Duration // each request's deadline; default 2 minutes
	Retries     int           // attempts after the first; default 5 (negative: none)
	Concurrency int           // requests in flight across the Stage; default 2
	// MaxPause bounds one pause between attempts; a provider that asks
	// (Retry-After) to wait longer fails the request at once, saying so.
	// Default 1 minute.
	MaxPause time.Duration
	// Secrets are texts no error or log line may show (the API key, a
	// password in the endpoint's URL): they are replaced by "***".
	Secrets []string
	// Sleep waits (tests replace it); default a timer.
	Sleep func(ctx context.Context, d time.Duration) error
	// Log, when set, gets one warning for each request tried again.
	Log *slog.Logger
}

// Stage embeds texts within the provider's limits. It is safe for
// concurrent use.
type Stage struct {
	cfg      Config
	slots    chan struct{}
	tokens   atomic.Int64
	requests atomic.Int64
	retried  atomic.Int64
}

// New returns a Stage for cfg.
func New(cfg Config) *Stage {
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Minute
	}
	if cfg.Retries == 0 {
		cfg.Retries = 5
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 2
	}
	if cfg.MaxPause <= 0 {
		cfg.MaxPause = time.Minute
	}
	if cfg.Count == nil {
		cfg.Count, cfg.Counter = Estimate, "estimated at one token per 3 bytes"
	}
	if cfg.Cut == nil {
		cfg.Cut = cutEstimate
	}
	if cfg.Sleep == nil {
		cfg.Sleep = sleep
	}
	return &Stage{cfg: cfg, slots: make(chan struct{}, cfg.Concurrency)}
}

// Estimate counts a text's tokens as one per 3 bytes, rounded up: above
// what BPE tokenizers give English prose and code (about 4 bytes a token),
// so requests cut by it stay within a limit counted the real way.
func Estimate(text string) int { return (len(text) + 2) / 3 }

// Stats say what a Stage sent.
type Stats struct {
	Tokens, Requests, Retries int64
	Counter                   string
}

// Stats returns what the Stage sent so far.
func (s *Stage) Stats() Stats {
	return Stats{Tokens: s.tokens.Load(), Requests: s.requests.Load(), Retries: s.retried.Load(), Counter: s.cfg.Counter}
}

// ErrTooLong is wrapped by Check's error.
var ErrTooLong = errors.New("over the embedding model's limit for one input")

// Check fails when text alone is over the per-input limit.
func (s *Stage) Check(text string) error {
	if lim := s.cfg.Limits.TokensPerInput; lim > 0 {
		if n := s.cfg.Count(text); n > lim {
			return fmt.Errorf("%d tokens, %w (%d tokens, %s; tokens %s)", n, ErrTooLong, lim, s.cfg.Where, s.cfg.Counter)
		}
	}
	return nil
}

// Truncate returns text cut to the per-input limit and whether it was
// cut: the text an --embed-truncate run embeds for a chunk over it.
func (s *Stage) Truncate(text string) (string, bool) {
	lim := s.cfg.Limits.TokensPerInput
	if lim <= 0 || s.cfg.Count(text) <= lim {
		return text, false
	}
	return s.cfg.Cut(text, lim), true
}

// cutEstimate cuts text to n tokens as Estimate counts them (3 bytes
// each), on a character boundary.
func cutEstimate(text string, n int) string {
	b := min(3*n, len(text))
	for b > 0 && b < len(text) && !utf8.RuneStart(text[b]) {
		b--
	}
	return text[:b]
}

// Embed returns the vectors of texts, in order.
func (s *Stage) Embed(ctx context.Context, texts []string) ([]embeddings.Embedding, error) {
	out := make([]embeddings.Embedding, len(texts))
	g, gctx := errgroup.WithContext(ctx)
	for _, b := range s.batches(texts) {
		g.Go(func() error {
			select {
			case s.slots <- struct{}{}:
			case <-gctx.Done():
				return gctx.Err()
			}
			defer func() { <-s.slots }()
			if gctx.Err() != nil { // another batch failed while this one waited
				return gctx.Err()
			}
			embs, err := s.request(gctx, texts[b.from:b.to], b.tokens)
			if err != nil {
				return err
			}
			copy(out[b.from:b.to], embs)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

type batch struct{ from, to, tokens int }

// batches cuts texts into runs within the per-request limits (a text
// alone over them is its own request: Check is the place to refuse it).
func (s *Stage) batches(texts []string) []batch {
	lim := s.cfg.Limits
	var out []batch
	cur := batch{}
	for i, t := range texts {
		n := s.cfg.Count(t)
		full := lim.Inputs > 0 && i-cur.from >= lim.Inputs ||
			lim.TokensPerInputs > 0 && cur.tokens+n > lim.TokensPerInputs
		if i > cur.from && full {
			cur.to = i
			out = append(out, cur)
			cur = batch{from: i}
		}
		cur.tokens += n
	}
	if cur.from < len(texts) {
		cur.to = len(texts)
		out = append(out, cur)
	}
	return out
}

// request embeds one batch, retrying what may pass later.
func (s *Stage) request(ctx context.Context, texts []string, tokens int) ([]embeddings.Embedding, error) {
	for attempt := 0; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
		s.requests.Add(1)
		embs, err := s.cfg.Func.EmbedDocuments(rctx, texts)
		timedOut := rctx.Err() != nil && ctx.Err() == nil
		cancel()
		if err == nil && len(embs) != len(texts) {
			err = fmt.Errorf("%d embeddings for %d texts", len(embs), len(texts))
		}
		for i := 0; err == nil && i < len(embs); i++ {
			if embs[i] == nil || embs[i].Len() == 0 {
				err = fmt.Errorf("no vector for text %d of %d", i+1, len(texts))
			}
		}
		if err == nil {
			s.tokens.Add(int64(tokens))
			return embs, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		kind := classify(err, timedOut)
		if !kind.final && kind.after > s.cfg.MaxPause {
			kind.final = true
			kind.what += fmt.Sprintf(", and asked to wait %s (more than %s)", kind.after.Round(time.Second), s.cfg.MaxPause)
			kind.hint = "the provider's quota needs that long to refill: try again later, or raise the limit with the provider"
		}
		if kind.final || attempt >= s.cfg.Retries {
			return nil, s.explain(err, kind, len(texts), tokens, attempt+1)
		}
		s.retried.Add(1)
		pause := s.pause(attempt, kind.after)
		if s.cfg.Log != nil {
			s.cfg.Log.Warn("embedding request failed; trying it again", "where", s.cfg.Where, "why", kind.what,
				"texts", len(texts), "attempt", attempt+1, "pause", pause.Round(time.Millisecond), "err", s.scrub(err.Error()))
		}
		if err := s.cfg.Sleep(ctx, pause); err != nil {
			return nil, err
		}
	}
}

// pause is how long to wait before attempt+2: the provider's Retry-After
// when it gave one (never sooner; request checked it is within
// MaxPause), else 1 s doubling within MaxPause; jittered up to +25% over
// a Retry-After, ±25% otherwise.
func (s *Stage) pause(attempt int, after time.Duration) time.Duration {
	if after > 0 {
		return after + time.Duration(float64(after)*rand.Float64()/4)
	}
	d := time.Second << min(attempt, 10)
	d = time.Duration(float64(d) * (0.75 + rand.Float64()/2))
	return min(d, s.cfg.MaxPause)
}

// failure is what an error says about trying again.
type failure struct {
	final bool          // trying again would fail the same way
	after time.Duration // the provider's Retry-After, when known
	what  string        // for the message
	hint  string
}

// classify reads an embedding function's error: an HTTPError (OpenAI)
// says its status and Retry-After; chroma-go's functions report an HTTP
// error in text ("unexpected response 429 Too Many Requests, BODY"), and
// a wait only as OpenAI's message says it ("Please try again in 20s").
func classify(err error, timedOut bool) failure {
	var he *HTTPError
	if errors.As(err, &he) {
		return classifyHTTP(he)
	}
	return classifyText(err.Error(), timedOut || errors.Is(err, context.DeadlineExceeded))
}

// What a failure is, and what to try, whichever way it was reported.
var (
	rateLimited = failure{what: "rate limited (429)",
		hint: "the provider's rate limit: lower --embed-concurrency, or raise the limit with the provider"}
	outOfQuota = failure{final: true, what: "out of quota (429 insufficient_quota)",
		hint: "the account has no quota left: check the provider's plan and billing"}
	endpointFailed = failure{what: "the endpoint failed", hint: "the endpoint is failing: try again later"}
	badCredentials = failure{final: true, what: "refused the credentials",
		hint: "check the API key (--embedding-config's api_key_env_var names the environment variable that holds it)"}
	refused = failure{final: true, what: "refused the request",
		hint: "check --embedding-config (model_name, api_base, dimensions); a text over the model's input limit needs a smaller --chunk-size"}
	timedOut = failure{what: "no answer within --embed-timeout",
		hint: "a model on a CPU takes seconds per request: raise --embed-timeout, or lower --embed-concurrency"}
	unreachable = failure{what: "unreachable", hint: "check --embedding-config's api_base and that the embedding server runs"}
)

// classifyHTTP decides by the status: 429, 5xx, 408 and 409 may pass
// later; any other 4xx will not.
func classifyHTTP(he *HTTPError) failure {
	f := refused
	switch {
	case he.Code == "insufficient_quota":
		return outOfQuota
	case he.Status == 429:
		f = rateLimited
		if f.after = he.RetryAfter; f.after == 0 {
			f.after = retryAfter(he.Message)
		}
		return f
	case he.Status >= 500 || he.Status == 408 || he.Status == 409:
		f = endpointFailed
		f.after = he.RetryAfter
	case he.Status == 401 || he.Status == 403:
		f = badCredentials
	}
	f.what += fmt.Sprintf(" (%d)", he.Status)
	return f
}

// classifyText reads an error reported as text.
func classifyText(msg string, late bool) failure {
	switch {
	case late:
		return timedOut
	case hasStatus(msg, "429"):
		f := rateLimited
		f.after = retryAfter(msg)
		return f
	case hasStatus(msg, "500", "502", "503", "504"):
		return endpointFailed
	case hasStatus(msg, "401", "403"):
		return badCredentials
	case hasStatus(msg, "400", "404", "413", "422"):
		return refused
	case strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host") || strings.Contains(msg, "connection reset"):
		return unreachable
	}
	return failure{what: "failed", hint: "check --embedding and --embedding-config"}
}

// hasStatus reports whether an HTTP error message names one of codes as
// its status ("unexpected response 429 Too Many Requests" or "status 429").
func hasStatus(msg string, codes ...string) bool {
	for _, c := range codes {
		for _, pre := range []string{"response " + c, "status " + c, "status code " + c, "code: " + c, "[" + c} {
			if strings.Contains(msg, pre) {
				return true
			}
		}
	}
	return false
}

// retryAfter finds a wait the provider asked for in its message: OpenAI
// says "Please try again in 20s" (or "in 120ms").
func retryAfter(msg string) time.Duration {
	i := strings.Index(msg, "try again in ")
	if i < 0 {
		return 0
	}
	rest := msg[i+len("try again in "):]
	end := strings.IndexFunc(rest, func(r rune) bool { return !(r >= '0' && r <= '9' || r == '.' || r >= 'a' && r <= 'z') })
	if end >= 0 {
		rest = rest[:end]
	}
	d, err := time.ParseDuration(strings.TrimSuffix(rest, "."))
	if err != nil || d < 0 {
		return 0
	}
	return d
}

func (s *Stage) explain(err error, f failure, texts, tokens, attempts int) error {
	tries := ""
	if attempts > 1 {
		tries = fmt.Sprintf(" after %d attempts", attempts)
	}
	what := fmt.Sprintf("%d texts (%d tokens, %s)", texts, tokens, s.cfg.Counter)
	if texts == 1 {
		what = fmt.Sprintf("a text (%d tokens, %s)", tokens, s.cfg.Counter)
	}
	return &Error{err: err, msg: fmt.Sprintf("embedding %s with %s: %s%s: %s; %s",
		what, s.cfg.Where, f.what, tries, s.scrub(err.Error()), f.hint)}
}

// Error is the stage's error: what failed, where, and what to try (the
// Secrets scrubbed from the text); it wraps the embedding function's.
type Error struct {
	err error
	msg string
}

func (e *Error) Error() string { return e.msg }
func (e *Error) Unwrap() error { return e.err }

// scrub replaces the Secrets in text.
func (s *Stage) scrub(text string) string {
	for _, sec := range s.cfg.Secrets {
		if sec != "" {
			text = strings.ReplaceAll(text, sec, "***")
		}
	}
	return text
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
