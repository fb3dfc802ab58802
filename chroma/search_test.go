package chroma

import (
	"strings"
	"testing"
)

func TestOwnSecret(t *testing.T) {
	for env, want := range map[string]bool{
		"CHROMA_TOKEN": true, "chroma_api_key": true, "CHROMAFS_REDIS_PASSWORD": true,
		"OPENAI_API_KEY": false, "CHROMAFS_TEST_EMBED_KEY": false, "": false,
	} {
		if got := ownSecret(env); got != want {
			t.Errorf("ownSecret(%q) = %v, want %v", env, got, want)
		}
	}
}

// TestStoredConfig: what a collection's stored configuration may decide.
func TestStoredConfig(t *testing.T) {
	local := []string{"http://127.0.0.1:"}
	for _, tc := range []struct {
		name          string
		stored, flags map[string]any
		allow         []string
		want          string // "" for accepted, else a word of the refusal
		endpoint      string // the api_base used, when accepted
	}{
		{"a local endpoint", map[string]any{"api_base": "http://127.0.0.1:9/v1", "api_key_env_var": "K"}, nil, local, "", "http://127.0.0.1:9/v1"},
		{"an endpoint elsewhere", map[string]any{"api_base": "http://evil.invalid/v1", "api_key_env_var": "OPENAI_API_KEY"}, nil, local, "not one --embedding-allow lists", ""},
		{"the default endpoint, not allowed", map[string]any{"api_key_env_var": "OPENAI_API_KEY"}, nil, local, "api.openai.com", ""},
		{"the default endpoint, allowed", map[string]any{"api_key_env_var": "OPENAI_API_KEY"}, nil, []string{"https://api.openai.com/"}, "", ""},
		{"the operator's endpoint wins", map[string]any{"api_base": "http://evil.invalid/v1", "api_key_env_var": "K"}, map[string]any{"api_base": "http://operator.invalid/v1"}, local, "", "http://operator.invalid/v1"},
		{"the token's variable", map[string]any{"api_base": "http://127.0.0.1:9/v1", "api_key_env_var": "CHROMA_TOKEN"}, nil, local, "CHROMA_TOKEN", ""},
		{"the operator's variable over it", map[string]any{"api_base": "http://127.0.0.1:9/v1", "api_key_env_var": "CHROMA_TOKEN"}, map[string]any{"api_key_env_var": "K"}, local, "", "http://127.0.0.1:9/v1"},
		{"none allowed", map[string]any{"api_base": "http://127.0.0.1:9/v1", "api_key_env_var": "K"}, nil, []string{}, "not one", ""},
		// a second endpoint key cannot vouch for the one the function reads
		{"an allowed key beside one elsewhere", map[string]any{"api_base": "http://evil.invalid/v1", "base_url": "http://127.0.0.1:9/v1", "api_key_env_var": "K"}, nil, local, "evil.invalid", ""},
		{"the operator's other key beside one elsewhere", map[string]any{"api_base": "http://evil.invalid/v1", "api_key_env_var": "K"}, map[string]any{"url": "http://127.0.0.1:9"}, local, "evil.invalid", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flags := tc.flags
			if flags == nil {
				flags = map[string]any{}
			}
			cfg, err := storedConfig("openai", tc.stored, flags, tc.allow)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v (config %v), want a refusal naming %q", err, cfg, tc.want)
			case tc.want == "" && tc.endpoint != "" && cfg["api_base"] != tc.endpoint:
				t.Errorf("api_base %v, want %s", cfg["api_base"], tc.endpoint)
			}
		})
	}
}

func TestMeaningless(t *testing.T) {
	for _, name := range []string{"consistent_hash", "chromafs_unit"} {
		if Meaningful(name) {
			t.Errorf("Meaningful(%q)", name)
		}
		if _, err := buildQueryFunction(name, map[string]any{}); err == nil {
			t.Errorf("%s builds a query function", name)
		}
	}
	if !Meaningful("openai") || !Meaningful("default") {
		t.Error("openai and default vectors mean something")
	}
	if err := CheckEmbeddingName("no-such-function"); err == nil || !strings.Contains(err.Error(), "openai") {
		t.Errorf("CheckEmbeddingName: %v, want the known names listed", err)
	}
	if e := off("a reason", nil); !strings.Contains(e.Error(), "a reason") {
		t.Errorf("NoEmbedding: %v", e)
	}
}
