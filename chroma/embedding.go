package chroma

import (
	"context"
	"fmt"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
	"github.com/amikos-tech/chroma-go/pkg/embeddings"
)

// CheckDimension fails with ErrDimension when the collection already holds
// embeddings of another dimension than the store's embedding function
// makes: the server would refuse every write, so ingest asks first, before
// it writes anything (and a dry run fails as the real run would).
func (s *Store) CheckDimension(ctx context.Context) error {
	have, err := s.dimension(ctx)
	if err != nil || have == 0 {
		return err
	}
	emb, err := s.ef.EmbedDocuments(ctx, []string{"chromafs embedding dimension probe"})
	if err != nil {
		return fmt.Errorf("embedding function %s: %w", s.ef.Name(), err)
	}
	if len(emb) != 1 || emb[0] == nil {
		return fmt.Errorf("embedding function %s returned no embedding", s.ef.Name())
	}
	if got := emb[0].Len(); got != have {
		return fmt.Errorf("collection %q holds %d-dimensional embeddings, embedding function %s makes %d-dimensional ones: %w",
			s.cfg.Collection, have, s.ef.Name(), got, ErrDimension)
	}
	return nil
}

// dimension is the collection's embedding dimension: as the server reports
// it with the collection, else from one stored record; 0 when it has none.
func (s *Store) dimension(ctx context.Context) (int, error) {
	coll, err := s.collection(ctx)
	if err != nil {
		return 0, err
	}
	if d := coll.Dimension(); d > 0 {
		return d, nil
	}
	res, err := s.get(ctx, v2.WithLimit(1), v2.WithInclude(v2.IncludeEmbeddings))
	if err != nil {
		return 0, s.explain(err, "read an embedding")
	}
	if len(res.Embeddings) > 0 {
		return len(res.Embeddings[0]), nil
	}
	return 0, nil
}

// Dimension is the collection's embedding dimension (0 when it holds no
// embedding yet).
func (s *Store) Dimension(ctx context.Context) (int, error) { return s.dimension(ctx) }

// unitEmbedding gives every text the same unit vector (1, 0, 0, ...): the
// embedding of the path-tree records chromafs-ingest index adds to a
// collection of another tool, whose own embedding function it does not
// have. A tree record means nothing to a semantic search; one fixed vector
// keeps it from following the collection's documents around.
type unitEmbedding struct{ dim int }

// UnitEmbedding returns the fixed embedding function of dimension dim.
func UnitEmbedding(dim int) embeddings.EmbeddingFunction { return unitEmbedding{dim} }

func (u unitEmbedding) vector() embeddings.Embedding {
	v := make([]float32, u.dim)
	if u.dim > 0 {
		v[0] = 1
	}
	return embeddings.NewEmbeddingFromFloat32(v)
}

func (u unitEmbedding) EmbedDocuments(_ context.Context, texts []string) ([]embeddings.Embedding, error) {
	out := make([]embeddings.Embedding, len(texts))
	for i := range out {
		out[i] = u.vector()
	}
	return out, nil
}

func (u unitEmbedding) EmbedQuery(context.Context, string) (embeddings.Embedding, error) {
	return u.vector(), nil
}

func (u unitEmbedding) Name() string { return "chromafs_unit" }
func (u unitEmbedding) GetConfig() embeddings.EmbeddingFunctionConfig {
	return embeddings.EmbeddingFunctionConfig{"dimension": u.dim}
}
func (u unitEmbedding) DefaultSpace() embeddings.DistanceMetric { return embeddings.L2 }
func (u unitEmbedding) SupportedSpaces() []embeddings.DistanceMetric {
	return []embeddings.DistanceMetric{embeddings.L2, embeddings.COSINE, embeddings.IP}
}
