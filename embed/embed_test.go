package embed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/amikos-tech/chroma-go/pkg/embeddings"
)

// scripted answers each request with the next of its errors (nil: the
// texts' embeddings), recording the batches and the most in flight.
type scripted struct {
	mu       sync.Mutex
	errs     []error
	batches  [][]string
	inFlight atomic.Int32
	most     atomic.Int32
	hold     time.Duration
	block    bool // wait for the request's deadline
}

func (s *scripted) EmbedDocuments(ctx context.Context, texts []string) ([]embeddings.Embedding, error) {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for m := s.most.Load(); n > m && !s.most.CompareAndSwap(m, n); m = s.most.Load() {
	}
	if s.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	time.Sleep(s.hold)
	s.mu.Lock()
	s.batches = append(s.batches, texts)
	var err error
	if len(s.errs) > 0 {
		err, s.errs = s.errs[0], s.errs[1:]
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	out := make([]embeddings.Embedding, len(texts))
	for i, t := range texts {
		out[i] = embeddings.NewEmbeddingFromFloat32([]float32{float32(len(t))})
	}
	return out, nil
}

// pauses records the stage's waits instead of sleeping.
type pauses struct {
	mu sync.Mutex
	d  []time.Duration
}

func (p *pauses) sleep(ctx context.Context, d time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.d = append(p.d, d)
	return ctx.Err()
}

func words(n int) func(string) int { return func(s string) int { return len(strings.Fields(s)) * n } }

// TestBatches: requests hold at most Limits.Inputs texts and
// Limits.TokensPerInputs tokens, in order, each text once; the vectors
// come back in the texts' order.
func TestBatches(t *testing.T) {
	texts := make([]string, 25)
	for i := range texts {
		texts[i] = strings.Repeat("w ", i%7+1)
	}
	f := &scripted{}
	s := New(Config{Func: f, Where: "test", Limits: Limits{Inputs: 4, TokensPerInputs: 12}, Count: words(1), Counter: "words"})
	embs, err := s.Embed(t.Context(), texts)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	total := 0
	for _, b := range f.batches {
		tokens := 0
		for _, x := range b {
			tokens += len(strings.Fields(x))
		}
		if len(b) > 4 || tokens > 12 || len(b) == 0 {
			t.Errorf("a request of %d texts, %d tokens: over the limits", len(b), tokens)
		}
		seen = append(seen, b...)
		total += tokens
	}
	if len(seen) != len(texts) {
		t.Fatalf("%d texts sent, want %d", len(seen), len(texts))
	}
	for i, e := range embs {
		if int(e.ContentAsFloat32()[0]) != len(texts[i]) {
			t.Fatalf("vector %d is not text %d's", i, i)
		}
	}
	if st := s.Stats(); st.Tokens != int64(total) || st.Requests != int64(len(f.batches)) || st.Counter != "words" {
		t.Errorf("stats %+v; %d tokens in %d requests", st, total, len(f.batches))
	}
	// a text alone over the request's tokens is sent alone (Check refuses it before)
	f = &scripted{}
	s = New(Config{Func: f, Limits: Limits{TokensPerInputs: 3, TokensPerInput: 3}, Count: words(1)})
	if _, err := s.Embed(t.Context(), []string{"a", "b c d e f", "g"}); err != nil || len(f.batches) != 3 {
		t.Errorf("batches %q, %v", f.batches, err)
	}
	if err := s.Check("b c d e f"); !errors.Is(err, ErrTooLong) || !strings.Contains(err.Error(), "5 tokens") {
		t.Errorf("Check over the limit: %v", err)
	}
	if err := s.Check("a b c"); err != nil {
		t.Errorf("Check at the limit: %v", err)
	}
}

// TestRetries: 429 and 5xx are tried again, after the provider's
// Retry-After (never sooner) or a growing jittered pause, within
// MaxPause; a refusal (400, 401) is not; after Retries the error names
// the endpoint, the attempts and what to try.
func TestRetries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		errs     []error
		retries  int
		ok       bool
		attempts int
		pause    func(i int, d time.Duration) bool
		says     string
	}{
		{name: "429 with Retry-After", errs: []error{&HTTPError{Status: 429, Message: "slow down", RetryAfter: 3 * time.Second}}, ok: true, attempts: 2,
			pause: func(_ int, d time.Duration) bool { return d >= 3*time.Second && d <= 3750*time.Millisecond }},
		{name: "429 in chroma-go's words", errs: []error{errors.New("unexpected response 429 Too Many Requests, {\"error\":{\"message\":\"Rate limit reached. Please try again in 1.5s. Visit...\"}}")}, ok: true, attempts: 2,
			pause: func(_ int, d time.Duration) bool { return d >= 1500*time.Millisecond && d <= 1875*time.Millisecond }},
		{name: "5xx, growing pauses", errs: []error{&HTTPError{Status: 503}, &HTTPError{Status: 502}, &HTTPError{Status: 500}}, ok: true, attempts: 4,
			pause: func(i int, d time.Duration) bool {
				base := time.Second << i
				return d >= base*3/4 && d <= base*5/4
			}},
		{name: "Retry-After past MaxPause is final", errs: []error{&HTTPError{Status: 429, RetryAfter: time.Hour}}, attempts: 1, says: "asked to wait 1h0m0s"},
		{name: "out of quota is final", errs: []error{&HTTPError{Status: 429, Code: "insufficient_quota", Message: "You exceeded your current quota"}}, attempts: 1, says: "billing"},
		{name: "405 is final", errs: []error{&HTTPError{Status: 405}}, attempts: 1, says: "refused the request (405)"},
		{name: "408 is retried", errs: []error{&HTTPError{Status: 408}}, ok: true, attempts: 2},
		{name: "a 429's wait in its message", errs: []error{&HTTPError{Status: 429, Message: "Please try again in 2s."}}, ok: true, attempts: 2,
			pause: func(_ int, d time.Duration) bool { return d >= 2*time.Second && d <= 2500*time.Millisecond }},
		{name: "400 is final", errs: []error{&HTTPError{Status: 400, Message: "'input[3]' is too long"}}, attempts: 1, says: "refused the request"},
		{name: "401 is final", errs: []error{&HTTPError{Status: 401, Message: "bad key"}}, attempts: 1, says: "api_key_env_var"},
		{name: "retries run out", errs: []error{&HTTPError{Status: 500}, &HTTPError{Status: 500}, &HTTPError{Status: 500}}, retries: 2, attempts: 3, says: "after 3 attempts"},
		{name: "no retries", errs: []error{&HTTPError{Status: 429}}, retries: -1, attempts: 1, says: "lower --embed-concurrency"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &scripted{errs: tc.errs}
			p := &pauses{}
			s := New(Config{Func: f, Where: "openai model m at http://127.0.0.1:1/v1/", Retries: tc.retries, Sleep: p.sleep})
			_, err := s.Embed(t.Context(), []string{"one", "two"})
			if (err == nil) != tc.ok {
				t.Fatalf("err %v, want ok %v", err, tc.ok)
			}
			if len(f.batches) != tc.attempts {
				t.Errorf("%d attempts, want %d", len(f.batches), tc.attempts)
			}
			for i, d := range p.d {
				if tc.pause != nil && !tc.pause(i, d) {
					t.Errorf("pause %d: %v", i, d)
				}
			}
			if err != nil && (!strings.Contains(err.Error(), "openai model m at http://127.0.0.1:1/v1/") || !strings.Contains(err.Error(), tc.says)) {
				t.Errorf("error %q: want the endpoint and %q", err, tc.says)
			}
			if st := s.Stats(); st.Retries != int64(len(p.d)) {
				t.Errorf("%d retries counted, %d pauses", st.Retries, len(p.d))
			}
		})
	}
}

// TestTimeout: each request has its own deadline; a model slower than it
// is an error that says so and names the endpoint, never Chroma.
func TestTimeout(t *testing.T) {
	f := &scripted{block: true}
	p := &pauses{}
	s := New(Config{Func: f, Where: "openai model m at http://127.0.0.1:1/v1/", Timeout: 20 * time.Millisecond, Retries: 1, Sleep: p.sleep})
	_, err := s.Embed(t.Context(), []string{"x"})
	if err == nil || !strings.Contains(err.Error(), "no answer within --embed-timeout") || !strings.Contains(err.Error(), "http://127.0.0.1:1/v1/") ||
		!strings.Contains(err.Error(), "raise --embed-timeout") || strings.Contains(strings.ToLower(err.Error()), "chroma") || len(p.d) != 1 {
		t.Errorf("a model slower than the deadline: %v (%d retries)", err, len(p.d))
	}
	// secrets never show
	s = New(Config{Func: &scripted{errs: []error{errors.New(`Post "http://user:pw-s3cret@h/v1": key sk-s3cret refused`)}}, Retries: -1, Secrets: []string{"pw-s3cret", "sk-s3cret"}})
	if _, err := s.Embed(t.Context(), []string{"x"}); err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("a secret in the error: %v", err)
	}
	// the caller's cancellation is not retried
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Embed(ctx, []string{"x"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestConcurrency: at most Concurrency requests in flight across every
// caller of the stage.
func TestConcurrency(t *testing.T) {
	f := &scripted{hold: 5 * time.Millisecond}
	s := New(Config{Func: f, Limits: Limits{Inputs: 1}, Concurrency: 2})
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if _, err := s.Embed(t.Context(), []string{"a", "b", "c", "d"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if m := f.most.Load(); m != 2 {
		t.Errorf("%d requests in flight at most, want 2", m)
	}
}

// TestOpenAI: the client sends OpenAI's request (model, inputs, the key
// from the environment variable the configuration names) and reads its
// answer in index order; an error answer keeps the status, OpenAI's
// message and the Retry-After.
func TestOpenAI(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model      string   `json:"model"`
			Input      []string `json:"input"`
			Dimensions int      `json:"dimensions"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(429)
			fmt.Fprint(w, `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`)
			return
		}
		if r.URL.Path != "/v1/embeddings" || r.Header.Get("Authorization") != "Bearer sk-test" || req.Model != "text-embedding-3-small" || req.Dimensions != 8 {
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"error":{"message":"unexpected request %s %q %s %d"}}`, r.URL.Path, r.Header.Get("Authorization"), req.Model, req.Dimensions)
			return
		}
		fmt.Fprint(w, `{"data":[`)
		for i := len(req.Input) - 1; i >= 0; i-- { // out of order, as the API allows
			fmt.Fprintf(w, `{"index":%d,"embedding":[%d,0.5]}`, i, len(req.Input[i]))
			if i > 0 {
				fmt.Fprint(w, ",")
			}
		}
		fmt.Fprint(w, `],"usage":{"prompt_tokens":3}}`)
	}))
	defer srv.Close()
	t.Setenv("CHROMAFS_TEST_KEY", "sk-test")
	c, err := NewOpenAI(embeddings.EmbeddingFunctionConfig{"api_base": srv.URL + "/v1", "model_name": "text-embedding-3-small",
		"api_key_env_var": "CHROMAFS_TEST_KEY", "dimensions": 8}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.EmbedDocuments(t.Context(), []string{"a"})
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 429 || he.RetryAfter != 2*time.Second || he.Message != "Rate limit reached for requests" {
		t.Fatalf("a 429: %#v", err)
	}
	embs, err := c.EmbedDocuments(t.Context(), []string{"a", "bbb", "cc"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []float32{1, 3, 2} {
		if embs[i].ContentAsFloat32()[0] != want {
			t.Errorf("embedding %d is %v, want the text's", i, embs[i].ContentAsFloat32())
		}
	}
}

// TestForFunction: openai counts with OpenAI's tokenizer and has its
// limits; a function that runs in the process needs no stage.
func TestForFunction(t *testing.T) {
	c, ok, err := ForFunction("openai", embeddings.EmbeddingFunctionConfig{"model_name": "text-embedding-3-small", "api_base": "http://127.0.0.1:1/v1"})
	if err != nil || !ok || c.Limits != OpenAILimits || c.Counter != "counted with cl100k_base" || c.Func == nil ||
		!strings.Contains(c.Where, "text-embedding-3-small at http://127.0.0.1:1/v1") {
		t.Fatalf("openai: %+v %v %v", c, ok, err)
	}
	// cl100k_base: "hello world" is 2 tokens, "tokenization" 2 (token, ization)
	if n := c.Count("hello world"); n != 2 {
		t.Errorf("cl100k_base counts %d tokens in \"hello world\", want 2", n)
	}
	// truncation keeps the first 8,192 tokens, a prefix of the text
	long := strings.Repeat("rotate the keys, 回転 ", 3000)
	st := New(c)
	cut, was := st.Truncate(long)
	if n := c.Count(cut); !was || n > 8192 || n < 8188 || !strings.HasPrefix(long, cut) {
		t.Errorf("Truncate: %d tokens (cut %v), want the first 8,192 (a prefix)", n, was)
	}
	if same, was := st.Truncate("short"); was || same != "short" {
		t.Errorf("Truncate of a short text: %q %v", same, was)
	}
	if w := Where("openai", embeddings.EmbeddingFunctionConfig{"api_base": "https://user:s3cret@example.com/v1?key=s3cret"}); strings.Contains(w, "s3cret") || !strings.Contains(w, "example.com/v1") {
		t.Errorf("Where shows a secret of the URL: %s", w)
	}
	if _, ok, _ := ForFunction("consistent_hash", nil); ok {
		t.Error("consistent_hash has a stage")
	}
	c, ok, _ = ForFunction("ollama", embeddings.EmbeddingFunctionConfig{"model_name": "nomic-embed-text"})
	if w := Where("cohere", embeddings.EmbeddingFunctionConfig{"model_name": "embed-english-v3.0", "base_url": "https://api.cohere.ai"}); w != "cohere model embed-english-v3.0 at https://api.cohere.ai" {
		t.Errorf("Where of another provider: %s", w)
	}
	t.Setenv("CHROMAFS_TEST_KEY2", "sk-very-secret")
	if c, _, _ := ForFunction("openai", embeddings.EmbeddingFunctionConfig{"api_key_env_var": "CHROMAFS_TEST_KEY2", "api_base": "http://u:pw-secret@h/v1"}); !slices.Contains(c.Secrets, "sk-very-secret") || !slices.Contains(c.Secrets, "pw-secret") {
		t.Errorf("secrets %q", c.Secrets)
	}
	if !ok || c.Limits.Inputs != 512 || c.Count != nil {
		t.Errorf("ollama: %+v", c)
	}
	if s := New(c); s.cfg.Counter != "estimated at one token per 3 bytes" || s.cfg.Count("abcdefg") != 3 {
		t.Errorf("ollama counts %q", s.cfg.Counter)
	}
}
