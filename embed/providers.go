package embed

import (
	"fmt"
	"net/url"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/amikos-tech/chroma-go/pkg/embeddings"
	"github.com/tiktoken-go/tokenizer"
)

// ForFunction describes the stage of the named chroma-go embedding
// function with its configuration: the provider's limits, how its tokens
// are counted and where it is; for openai, the client that sends its
// requests (Config.Func; others leave it to the caller: chroma-go's
// function). ok is false for a function that runs in
// this process (consistent_hash, the default): it has no endpoint, no
// limits and nothing to wait for, so it needs no stage.
func ForFunction(name string, cfg embeddings.EmbeddingFunctionConfig) (c Config, ok bool, err error) {
	switch name {
	case "openai":
		model := openAIModel(cfg)
		count, cut, counter, err := openAICounter(model)
		if err != nil {
			return Config{}, false, err
		}
		client, err := NewOpenAI(cfg, nil)
		if err != nil {
			return Config{}, false, err
		}
		return Config{Func: client, Where: Where(name, cfg), Limits: OpenAILimits, Count: count, Cut: cut, Counter: counter, Secrets: Secrets(cfg)}, true, nil
	case "ollama":
		return Config{Where: Where(name, cfg), Limits: Limits{Inputs: 512}, Secrets: Secrets(cfg)}, true, nil
	case "", "consistent_hash", "default":
		return Config{}, false, nil
	}
	// another provider: 96 inputs a request, the smallest of the common
	// ones (Cohere 96; Gemini, Together, Cloudflare 100)
	return Config{Where: Where(name, cfg), Limits: Limits{Inputs: 96}, Secrets: Secrets(cfg)}, true, nil
}

// DefaultEndpoints are where chroma-go's functions send their requests
// when their configuration names no endpoint.
var DefaultEndpoints = map[string]string{"openai": "https://api.openai.com/v1/", "ollama": "http://localhost:11434"}

// EndpointKeys are the configuration keys chroma-go's functions take an
// endpoint from.
var EndpointKeys = []string{"api_base", "url", "base_url"}

// Secrets are what a stage must never show of cfg: the API key the
// environment variable it names holds, and the user information of its
// endpoint's URL.
func Secrets(cfg embeddings.EmbeddingFunctionConfig) []string {
	var out []string
	if env, _ := cfg["api_key_env_var"].(string); env != "" {
		if k := strings.TrimSpace(os.Getenv(env)); len(k) >= 4 {
			out = append(out, k)
		}
	}
	for _, key := range EndpointKeys {
		raw, _ := cfg[key].(string)
		if u, err := url.Parse(raw); err == nil && u.User != nil {
			if p, ok := u.User.Password(); ok && p != "" {
				out = append(out, p)
			}
			if n := u.User.Username(); len(n) >= 4 {
				out = append(out, n)
			}
		}
	}
	return out
}

// Where names the function's endpoint and model for messages ("openai
// model text-embedding-3-small at https://api.openai.com/v1/"); it reads
// the configuration only (no key, no tokenizer).
func Where(name string, cfg embeddings.EmbeddingFunctionConfig) string {
	str := func(key string) string { v, _ := cfg[key].(string); return v }
	orDefault := func(key string) string {
		if v := str(key); v != "" {
			return redact(v)
		}
		return DefaultEndpoints[name]
	}
	switch name {
	case "openai":
		return fmt.Sprintf("openai model %s at %s", openAIModel(cfg), orDefault("api_base"))
	case "ollama":
		return fmt.Sprintf("ollama model %s at %s", str("model_name"), orDefault("url"))
	}
	w := name + " embedding function"
	if m := str("model_name"); m != "" {
		w = fmt.Sprintf("%s model %s", name, m)
	}
	for _, key := range EndpointKeys {
		if u := str(key); u != "" {
			return w + " at " + redact(u)
		}
	}
	return w
}

// redact drops a URL's user information (a password in it would go to
// every message) and its query.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(an api_base that is not a URL)"
	}
	u.User, u.RawQuery = nil, ""
	return u.String()
}

// openAIModel is the configured model, or chroma-go's default.
func openAIModel(cfg embeddings.EmbeddingFunctionConfig) string {
	if m, _ := cfg["model_name"].(string); m != "" {
		return m
	}
	return "text-embedding-ada-002"
}

// openAICounter counts tokens as OpenAI's embedding models do: cl100k_base
// (text-embedding-3-small, -3-large, ada-002), o200k_base for the models
// the tokenizer knows to use it. Both encodings are embedded in the
// binary: nothing is downloaded.
func openAICounter(model string) (count func(string) int, cut func(string, int) string, name string, err error) {
	codec, err := tokenizer.ForModel(tokenizer.Model(model))
	if err != nil || strings.HasPrefix(model, "text-embedding-3") {
		codec, err = tokenizer.Get(tokenizer.Cl100kBase)
	}
	if err != nil {
		return nil, nil, "", fmt.Errorf("tokenizer for %s: %w", model, err)
	}
	count = func(text string) int {
		n, err := codec.Count(text)
		if err != nil { // invalid UTF-8: a binary chunk's description never is; estimate
			return Estimate(text)
		}
		return n
	}
	cut = func(text string, n int) string {
		ids, _, err := codec.Encode(text)
		if err != nil || len(ids) <= n {
			return text
		}
		// the first n tokens, or fewer where the n-th ends inside a
		// character (a byte-level token may hold part of one)
		for k := n; k > 0 && k > n-4; k-- {
			if head, err := codec.Decode(ids[:k]); err == nil && utf8.ValidString(head) && strings.HasPrefix(text, head) {
				return head
			}
		}
		return cutEstimate(text, n/3)
	}
	return count, cut, "counted with " + codec.GetName(), nil
}
