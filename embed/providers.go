package embed

import (
	"fmt"
	"strings"

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
	str := func(key string) string { v, _ := cfg[key].(string); return v }
	switch name {
	case "openai":
		model := str("model_name")
		if model == "" {
			model = "text-embedding-ada-002" // chroma-go's default
		}
		base := str("api_base")
		if base == "" {
			base = "https://api.openai.com/v1/"
		}
		count, counter, err := openAICounter(model)
		if err != nil {
			return Config{}, false, err
		}
		client, err := NewOpenAI(cfg, nil)
		if err != nil {
			return Config{}, false, err
		}
		return Config{Func: client, Where: fmt.Sprintf("openai model %s at %s", model, base), Limits: OpenAILimits, Count: count, Counter: counter}, true, nil
	case "ollama":
		model, base := str("model_name"), str("url")
		if base == "" {
			base = "http://localhost:11434"
		}
		return Config{Where: fmt.Sprintf("ollama model %s at %s", model, base), Limits: Limits{Inputs: 512}}, true, nil
	case "", "consistent_hash", "default":
		return Config{}, false, nil
	}
	return Config{Where: name + " embedding function", Limits: Limits{Inputs: 300}}, true, nil
}

// openAICounter counts tokens as OpenAI's embedding models do: cl100k_base
// (text-embedding-3-small, -3-large, ada-002), o200k_base for the models
// the tokenizer knows to use it. Both encodings are embedded in the
// binary: nothing is downloaded.
func openAICounter(model string) (func(string) int, string, error) {
	codec, err := tokenizer.ForModel(tokenizer.Model(model))
	if err != nil || strings.HasPrefix(model, "text-embedding-3") {
		codec, err = tokenizer.Get(tokenizer.Cl100kBase)
	}
	if err != nil {
		return nil, "", fmt.Errorf("tokenizer for %s: %w", model, err)
	}
	count := func(text string) int {
		n, err := codec.Count(text)
		if err != nil { // invalid UTF-8: a binary chunk's description never is; estimate
			return Estimate(text)
		}
		return n
	}
	return count, "counted with " + codec.GetName(), nil
}
