package main

import (
	"context"
	"io"
	"strings"
	"testing"
)

func TestEmbeddingFunction(t *testing.T) {
	ef, _, err := embeddingFunction("", "")
	if err != nil || ef.Name() != "consistent_hash" {
		t.Fatalf("default: %v %v", ef, err)
	}
	ef, _, err = embeddingFunction("consistent_hash", `{"dim": 8}`)
	if err != nil {
		t.Fatal(err)
	}
	if v, err := ef.EmbedQuery(context.Background(), "x"); err != nil || len(v.ContentAsFloat32()) != 8 {
		t.Errorf("dim from --embedding-config not applied: %v %v", v, err)
	}
	if _, _, err := embeddingFunction("nope", ""); err == nil || !strings.Contains(err.Error(), "available:") {
		t.Errorf("unknown embedding: %v", err)
	}
	if _, _, err := embeddingFunction("consistent_hash", "{not json"); err == nil {
		t.Error("bad --embedding-config accepted")
	}
}

func TestFlags(t *testing.T) {
	t.Setenv("CHROMAFS_COLLECTION", "docs")
	if _, src, err := parseFlags([]string{"./dir"}, io.Discard); err != nil || src != "./dir" {
		t.Errorf("collection from env: %q %v", src, err)
	}
	for _, args := range [][]string{{"--chunk-size", "20000", "d"}, {"--chunk-size", "10", "d"}, {}, {"a", "b"}} {
		if _, _, err := parseFlags(args, io.Discard); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
