package embed

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/amikos-tech/chroma-go/pkg/embeddings"
)

// OpenAI is the client of an OpenAI-compatible embeddings endpoint the
// stage sends its requests with, configured as chroma-go's "openai"
// function is (api_base, model_name, api_key_env_var, dimensions,
// organization_id): the same requests, but its errors keep what the
// stage needs to decide: the HTTP status, the provider's message and
// error code, and its Retry-After.
type OpenAI struct {
	url, model, key, org string
	dims                 int
	client               *http.Client
}

// NewOpenAI builds the client from chroma-go's configuration of the
// "openai" function. The API key is read from the environment variable
// the configuration names; it is never logged.
func NewOpenAI(cfg embeddings.EmbeddingFunctionConfig, client *http.Client) (*OpenAI, error) {
	str := func(key string) string { v, _ := cfg[key].(string); return v }
	o := &OpenAI{model: openAIModel(cfg), org: str("organization_id"), client: client}
	base := str("api_base")
	if base == "" {
		base = DefaultEndpoints["openai"]
	}
	u, err := url.JoinPath(base, "embeddings")
	if err != nil {
		return nil, fmt.Errorf("api_base %q: %w", base, err)
	}
	o.url = u
	if env := str("api_key_env_var"); env != "" {
		o.key = os.Getenv(env)
	}
	if d, ok := embeddings.ConfigInt(cfg, "dimensions"); ok && d > 0 {
		o.dims = d
	}
	if o.client == nil {
		o.client = &http.Client{}
	}
	return o, nil
}

// HTTPError is an answer of the endpoint other than 200.
type HTTPError struct {
	Status     int
	Message    string        // the provider's error message, or its body
	Code       string        // OpenAI's error code ("insufficient_quota"), when given
	RetryAfter time.Duration // its Retry-After (or retry-after-ms), 0 without
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("status %d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

type openAIRequest struct {
	Model      string   `json:"model"`
	Input      []string `json:"input"`
	Dimensions int      `json:"dimensions,omitempty"`
	Format     string   `json:"encoding_format"`
}

type openAIResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
	Usage struct {
		PromptTokens int `json:"prompt_tokens"`
	} `json:"usage"`
}

// maxAnswer bounds an answer's body (2,048 vectors of 3,072 floats as
// JSON are about 130 MB).
const maxAnswer = 256 << 20

// EmbedDocuments embeds texts in one request.
func (o *OpenAI) EmbedDocuments(ctx context.Context, texts []string) ([]embeddings.Embedding, error) {
	body, err := json.Marshal(openAIRequest{Model: o.model, Input: texts, Dimensions: o.dims, Format: "float"})
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, o.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	// An embedding is safe to ask for twice: with this header Go's
	// transport sends the request again by itself when a kept-alive
	// connection turns out closed before any answer (a server's idle
	// timeout racing the next request), instead of failing it.
	req.Header.Set("Idempotency-Key", idempotencyKey())
	if o.key != "" {
		req.Header.Set("Authorization", "Bearer "+o.key)
	}
	if o.org != "" {
		req.Header.Set("OpenAI-Organization", o.org)
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		msg, code := errorMessage(data)
		return nil, &HTTPError{Status: resp.StatusCode, Message: msg, Code: code, RetryAfter: retryAfterHeader(resp.Header)}
	}
	var ans openAIResponse
	if err := json.Unmarshal(data, &ans); err != nil {
		return nil, fmt.Errorf("the answer is not an embeddings response: %w", err)
	}
	if len(ans.Data) != len(texts) {
		return nil, fmt.Errorf("%d embeddings for %d inputs", len(ans.Data), len(texts))
	}
	out := make([]embeddings.Embedding, len(texts))
	for _, d := range ans.Data { // usage.prompt_tokens is the provider's count; the stage counts its own
		if d.Index < 0 || d.Index >= len(texts) || out[d.Index] != nil || len(d.Embedding) == 0 {
			return nil, fmt.Errorf("the answer's embedding index %d is missing, repeated or out of range", d.Index)
		}
		out[d.Index] = embeddings.NewEmbeddingFromFloat32(d.Embedding)
	}
	return out, nil
}

// idempotencyKey is a random key for one request.
func idempotencyKey() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// errorMessage is OpenAI's {"error": {"message": ..., "code": ...}},
// else the body (cut).
func errorMessage(body []byte) (msg, code string) {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Code    any    `json:"code"` // a string at OpenAI, a number at some servers
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		if c, ok := e.Error.Code.(string); ok {
			code = c
		}
		return e.Error.Message, code
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s, ""
}

// retryAfterHeader reads Retry-After (seconds or an HTTP date) and
// OpenAI's retry-after-ms.
func retryAfterHeader(h http.Header) time.Duration {
	if ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64); err == nil && ms >= 0 {
		return time.Duration(ms * float64(time.Millisecond))
	}
	v := h.Get("Retry-After")
	if s, err := strconv.ParseFloat(v, 64); err == nil && s >= 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
