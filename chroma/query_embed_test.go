package chroma

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/amikos-tech/chroma-go/pkg/embeddings"
)

// flaky answers its first queries with a rate limit, as chroma-go's
// openai function reports one.
type flaky struct {
	unitEmbedding
	fails, calls int
}

func (f *flaky) EmbedQuery(ctx context.Context, text string) (embeddings.Embedding, error) {
	f.calls++
	if f.calls <= f.fails {
		return nil, errors.New(`unexpected response 429 Too Many Requests, {"error":{"message":"Rate limit reached. Please try again in 10ms."}}`)
	}
	return f.unitEmbedding.EmbedQuery(ctx, text)
}

// TestQueryEmbedderRetries: a query's embedding is tried again after a
// rate limit (twice at most), and its error names the endpoint and model
// without the URL's password.
func TestQueryEmbedderRetries(t *testing.T) {
	f := &flaky{unitEmbedding: unitEmbedding{dim: 3}, fails: 2}
	e := newEmbedder(f, "flags", map[string]any{"model_name": "m", "url": "http://u:pw-s3cret@h:1"})
	v, err := e.Embed(t.Context(), "rotate keys")
	if err != nil || len(v) != 3 || f.calls != 3 {
		t.Fatalf("after two rate limits: %v %v, %d calls", v, err, f.calls)
	}
	f = &flaky{unitEmbedding: unitEmbedding{dim: 3}, fails: 5}
	e = newEmbedder(f, "flags", map[string]any{"model_name": "m", "url": "http://u:pw-s3cret@h:1"})
	_, err = e.Embed(t.Context(), "rotate keys")
	if err == nil || f.calls != 1+queryRetries || !strings.Contains(err.Error(), "chromafs_unit model m at http://h:1") || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("rate limited throughout: %v (%d calls)", err, f.calls)
	}
}
