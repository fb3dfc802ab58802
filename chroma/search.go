package chroma

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
	"github.com/amikos-tech/chroma-go/pkg/embeddings"
)

// ErrNoEmbedding is wrapped by QueryEmbedder's error when the collection
// has no embedding function a query can be embedded with: semantic search
// is then not available (the error says why).
var ErrNoEmbedding = errors.New("no usable embedding function")

// meaningless names the embedding functions whose vectors carry no meaning
// (consistent_hash, chromafs's own unit vector) or that would download a
// model at run time (Chroma's default ONNX function): a mount never embeds
// a query with them.
var meaningless = map[string]string{
	"consistent_hash":    "its vectors carry no meaning",
	"chromafs_unit":      "its vectors carry no meaning",
	"default":            "Chroma's default function downloads a model at run time; pass --embedding",
	"onnx_mini_lm_l6_v2": "it downloads a model at run time; pass --embedding",
}

// Meaningful reports whether vectors of the named function mean anything
// (the stored vectors of a collection written with it can rank pages).
func Meaningful(name string) bool {
	switch name {
	case "consistent_hash", "chromafs_unit":
		return false
	}
	return true
}

// Embedder embeds queries with one embedding function.
type Embedder struct {
	ef   embeddings.EmbeddingFunction
	From string // "collection" (its stored configuration) or "flags"
}

// Name is the embedding function's name.
func (e *Embedder) Name() string { return e.ef.Name() }

// Embed returns text's query vector.
func (e *Embedder) Embed(ctx context.Context, text string) ([]float32, error) {
	emb, err := e.ef.EmbedQuery(ctx, text)
	if err != nil {
		return nil, fmt.Errorf("embedding function %s: %w", e.ef.Name(), err)
	}
	if emb == nil || emb.Len() == 0 {
		return nil, fmt.Errorf("embedding function %s returned no vector", e.ef.Name())
	}
	return emb.ContentAsFloat32(), nil
}

// EmbeddingName is the name of the embedding function the collection's
// configuration records, or "".
func (s *Store) EmbeddingName(ctx context.Context) (string, error) {
	info, err := s.embeddingInfo(ctx)
	if err != nil || info == nil {
		return "", err
	}
	return info.Name, nil
}

func (s *Store) embeddingInfo(ctx context.Context) (*v2.EmbeddingFunctionInfo, error) {
	coll, err := s.collection(ctx)
	if err != nil {
		return nil, err
	}
	cfg, ok := coll.Configuration().(*v2.CollectionConfigurationImpl)
	if !ok || cfg == nil {
		return nil, nil
	}
	info, ok := cfg.GetEmbeddingFunctionInfo()
	if !ok || info == nil {
		return nil, nil
	}
	return info, nil
}

// QueryEmbedder returns the function to embed queries with: the one the
// collection's configuration names (the function it was written with),
// else the one name and configJSON give (chromafs-ingest's --embedding and
// --embedding-config; name "" for none). A configuration written into the
// collection is other people's input: one that names an environment
// variable chromafs keeps its own secrets in (see ownSecret) is refused,
// so that a collection can never have the token sent elsewhere. A
// collection embedded with a function whose vectors mean nothing has no
// semantic search, whatever the flags.
func (s *Store) QueryEmbedder(ctx context.Context, name, configJSON string) (*Embedder, error) {
	info, err := s.embeddingInfo(ctx)
	if err != nil {
		return nil, err
	}
	var why []string
	switch {
	case info != nil && !Meaningful(info.Name):
		return nil, fmt.Errorf("%w: the collection's chunks were embedded with %s, whose vectors carry no meaning (ingest with a real embedding function, e.g. chromafs-ingest --embedding openai)", ErrNoEmbedding, info.Name)
	case info != nil && info.IsKnown():
		ef, err := buildQueryFunction(info.Name, info.Config, true)
		if err == nil {
			return &Embedder{ef: ef, From: "collection"}, nil
		}
		why = append(why, fmt.Sprintf("the collection's function %s: %v", info.Name, err))
	case info != nil:
		why = append(why, fmt.Sprintf("the collection's function %q is not one chromafs knows", info.Name))
	}
	if name != "" {
		cfg := map[string]any{}
		if configJSON != "" {
			if err := json.Unmarshal([]byte(configJSON), &cfg); err != nil {
				return nil, fmt.Errorf("--embedding-config: %w", err)
			}
		}
		ef, err := buildQueryFunction(name, cfg, false)
		if err == nil {
			return &Embedder{ef: ef, From: "flags"}, nil
		}
		why = append(why, fmt.Sprintf("--embedding %s: %v", name, err))
	}
	if len(why) == 0 {
		why = append(why, "the collection keeps no embedding function and --embedding is not set")
	}
	return nil, fmt.Errorf("%w: %s", ErrNoEmbedding, strings.Join(why, "; "))
}

func buildQueryFunction(name string, cfg map[string]any, foreign bool) (embeddings.EmbeddingFunction, error) {
	if why, bad := meaningless[name]; bad && (foreign || !Meaningful(name)) {
		return nil, errors.New(why)
	}
	if !embeddings.HasDense(name) {
		return nil, fmt.Errorf("unknown function %q", name)
	}
	if foreign {
		for k, v := range cfg {
			env, ok := v.(string)
			if ok && strings.HasSuffix(k, "env_var") && ownSecret(env) {
				return nil, fmt.Errorf("its configuration names %s, an environment variable chromafs keeps its own secrets in: refused", env)
			}
		}
	}
	return embeddings.BuildDense(name, embeddings.EmbeddingFunctionConfig(cfg))
}

// ownSecret reports whether env is a variable chromafs reads a secret of
// its own from (CHROMA_TOKEN, CHROMAFS_REDIS_PASSWORD) or one of Chroma's
// clients (CHROMA_*, e.g. CHROMA_API_KEY).
func ownSecret(env string) bool {
	e := strings.ToUpper(env)
	return strings.HasPrefix(e, "CHROMA_") || e == "CHROMAFS_REDIS_PASSWORD"
}

// Neighbor is a record near a query vector.
type Neighbor struct {
	ID       string
	Page     string // its page metadata (a slug), "" when it has none
	PageSHA  string // its page_sha256 metadata, when it has one
	Text     string // its document ("" for a binary chunk)
	Distance float64
}

// PageFilter restricts a query to the records whose page metadata is
// among In (when set) and not among NotIn (when set).
type PageFilter struct{ In, NotIn []string }

func (f PageFilter) where() v2.WhereClause {
	var w []v2.WhereClause
	if len(f.In) > 0 {
		w = append(w, v2.InString(KeyPage, f.In...))
	}
	if len(f.NotIn) > 0 {
		w = append(w, v2.NinString(KeyPage, f.NotIn...))
	}
	switch len(w) {
	case 0:
		return nil
	case 1:
		return w[0]
	}
	return v2.And(w...)
}

// Near asks, in one query, for the n nearest records of each vector
// (n at most MaxGet in all, as Chroma Cloud allows), within f.
func (s *Store) Near(ctx context.Context, vectors [][]float32, n int, f PageFilter) ([][]Neighbor, error) {
	if len(vectors) == 0 || n <= 0 {
		return nil, nil
	}
	embs := make([]embeddings.Embedding, len(vectors))
	for i, v := range vectors {
		embs[i] = embeddings.NewEmbeddingFromFloat32(v)
	}
	opts := []v2.CollectionQueryOption{v2.WithQueryEmbeddings(embs...), v2.WithNResults(n),
		v2.WithInclude(v2.IncludeDocuments, v2.IncludeMetadatas, v2.IncludeDistances)}
	if w := f.where(); w != nil {
		opts = append(opts, v2.WithWhere(w))
	}
	var res v2.QueryResult
	err := s.callColl(ctx, func(ctx context.Context, coll v2.Collection) (err error) {
		res, err = coll.Query(ctx, opts...)
		return err
	})
	if err != nil {
		return nil, s.explain(err, "query by embedding")
	}
	return neighbors(res, len(vectors))
}

func neighbors(res v2.QueryResult, want int) ([][]Neighbor, error) {
	ids, docs, mds, dists := res.GetIDGroups(), res.GetDocumentsGroups(), res.GetMetadatasGroups(), res.GetDistancesGroups()
	if len(ids) != want || len(dists) != want {
		return nil, fmt.Errorf("query by embedding: %d result lists for %d vectors", len(ids), want)
	}
	out := make([][]Neighbor, want)
	for g := range ids {
		if len(dists[g]) != len(ids[g]) {
			return nil, fmt.Errorf("query by embedding: %d distances for %d records", len(dists[g]), len(ids[g]))
		}
		for i, id := range ids[g] {
			nb := Neighbor{ID: string(id), Distance: float64(dists[g][i])}
			binary := false
			if g < len(mds) && i < len(mds[g]) {
				md := mds[g][i]
				nb.Page, _ = mdString(md, KeyPage)
				nb.PageSHA, _ = mdString(md, KeyPageSHA)
				enc, _ := mdString(md, KeyChunkEncoding)
				binary = enc == EncodingBase64 // base64 of bytes: no text to show
			}
			if !binary && g < len(docs) && i < len(docs[g]) && docs[g][i] != nil {
				nb.Text = docs[g][i].ContentString()
			}
			out[g] = append(out[g], nb)
		}
	}
	return out, nil
}

// Vectors returns the stored embeddings of the records ids, in the order
// of ids; a record not found (or without an embedding) is left out.
func (s *Store) Vectors(ctx context.Context, ids []string) ([][]float32, error) {
	var out [][]float32
	for start := 0; start < len(ids); start += MaxGet {
		batch := make([]v2.DocumentID, 0, MaxGet)
		for _, id := range ids[start:min(start+MaxGet, len(ids))] {
			batch = append(batch, v2.DocumentID(id))
		}
		var res v2.GetResult
		err := s.callColl(ctx, func(ctx context.Context, coll v2.Collection) (err error) {
			res, err = coll.Get(ctx, v2.WithIDs(batch...), v2.WithInclude(v2.IncludeEmbeddings))
			return err
		})
		if err != nil {
			return nil, s.explain(err, "get embeddings")
		}
		for _, e := range res.GetEmbeddings() {
			if e != nil && e.Len() > 0 {
				out = append(out, e.ContentAsFloat32())
			}
		}
	}
	return out, nil
}

// PageVectors returns the stored embeddings of a page's chunks found by its
// metadata (collections whose ids chromafs cannot derive): page = slug,
// and page_sha256 = sha when sha is set. At most MaxGet.
func (s *Store) PageVectors(ctx context.Context, slug, sha string) ([][]float32, error) {
	var w v2.WhereClause = v2.EqString(KeyPage, slug)
	if sha != "" {
		w = v2.And(w, v2.EqString(KeyPageSHA, sha))
	}
	var res v2.GetResult
	err := s.callColl(ctx, func(ctx context.Context, coll v2.Collection) (err error) {
		res, err = coll.Get(ctx, v2.WithWhere(w), v2.WithInclude(v2.IncludeEmbeddings), v2.WithLimit(MaxGet))
		return err
	})
	if err != nil {
		return nil, s.explain(err, "get a page's embeddings")
	}
	var out [][]float32
	for _, e := range res.GetEmbeddings() {
		if e != nil && e.Len() > 0 {
			out = append(out, e.ContentAsFloat32())
		}
	}
	return out, nil
}

// CheckEmbeddingName fails for an embedding function chroma-go does not
// know, naming those it does.
func CheckEmbeddingName(name string) error {
	if embeddings.HasDense(name) {
		return nil
	}
	names := embeddings.ListDense()
	slices.Sort(names)
	return fmt.Errorf("%q: unknown; available: %s", name, strings.Join(names, ", "))
}
