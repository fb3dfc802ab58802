package main

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"
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

// progressLines: without a terminal, one line a period at most, with the
// rate and the time left; none at the end (the summary follows).
func TestProgressLines(t *testing.T) {
	var b strings.Builder
	now := time.Unix(0, 0)
	p := progressLines(&b, time.Minute, func() time.Time { return now })
	for i, at := range []time.Duration{10 * time.Second, 61 * time.Second, 90 * time.Second, 130 * time.Second, 200 * time.Second} {
		now = time.Unix(0, 0).Add(at)
		p((i+1)*100, 1000)
	}
	p(1000, 1000)
	want := "chromafs-ingest: 200 of 1000 files read (3.3 files/s), about 4m4s left\n" +
		"chromafs-ingest: 400 of 1000 files read (3.1 files/s), about 3m15s left\n" +
		"chromafs-ingest: 500 of 1000 files read (2.5 files/s), about 3m20s left\n" // at 61, 130 and 200 s (90 s is within a minute of 61 s)
	if b.String() != want {
		t.Errorf("progress lines:\n%s\nwant:\n%s", b.String(), want)
	}
}
