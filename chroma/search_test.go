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
	// a collection's configuration naming the token's variable is refused,
	// the same configuration given by the operator is not
	cfg := map[string]any{"api_key_env_var": "CHROMA_TOKEN", "model_name": "text-embedding-3-small", "api_base": "http://127.0.0.1:1/v1", "insecure": true}
	t.Setenv("CHROMA_TOKEN", "s3cr3t")
	if _, err := buildQueryFunction("openai", cfg, true); err == nil || !strings.Contains(err.Error(), "CHROMA_TOKEN") {
		t.Errorf("a collection's configuration naming CHROMA_TOKEN: %v, want refused", err)
	}
	if _, err := buildQueryFunction("openai", cfg, false); err != nil {
		t.Errorf("the operator's configuration: %v", err)
	}
}

func TestMeaningless(t *testing.T) {
	for _, name := range []string{"consistent_hash", "chromafs_unit"} {
		if Meaningful(name) {
			t.Errorf("Meaningful(%q)", name)
		}
		if _, err := buildQueryFunction(name, map[string]any{}, false); err == nil {
			t.Errorf("%s builds a query function", name)
		}
	}
	// Chroma's default function downloads a model: not from a collection's
	// configuration, but an operator may ask for it
	if _, err := buildQueryFunction("default", map[string]any{}, true); err == nil {
		t.Error("a collection's \"default\" function builds (it would download a model)")
	}
	if !Meaningful("openai") || !Meaningful("default") {
		t.Error("openai and default vectors mean something")
	}
	if err := CheckEmbeddingName("no-such-function"); err == nil || !strings.Contains(err.Error(), "openai") {
		t.Errorf("CheckEmbeddingName: %v, want the known names listed", err)
	}
}
