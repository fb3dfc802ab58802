package chroma

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
	"github.com/amikos-tech/chroma-go/pkg/embeddings"

	"github.com/chromafs/chromafs/embed"
)

// ErrNoEmbedding is wrapped by QueryEmbedder's error when the collection
// has no embedding function a query can be embedded with: semantic search
// is then not available (a *NoEmbedding says why).
var ErrNoEmbedding = errors.New("no usable embedding function")

// NoEmbedding is QueryEmbedder's error when semantic search is off: Reason
// can be shown to the mount's users (it names no endpoint, variable or
// model of the operator's); Detail is for the log.
type NoEmbedding struct {
	Reason string
	Detail error
}

func (e *NoEmbedding) Error() string {
	if e.Detail == nil {
		return ErrNoEmbedding.Error() + ": " + e.Reason
	}
	return ErrNoEmbedding.Error() + ": " + e.Reason + ": " + e.Detail.Error()
}

func (e *NoEmbedding) Unwrap() error { return ErrNoEmbedding }

func off(reason string, detail error) error { return &NoEmbedding{Reason: reason, Detail: detail} }

// Meaningful reports whether vectors of the named function mean anything
// (the stored vectors of a collection written with it can rank pages).
func Meaningful(name string) bool {
	switch name {
	case "consistent_hash", "chromafs_unit":
		return false
	}
	return true
}

// Embedder embeds queries with one embedding function, through an
// embedding stage (package embed): a query is one text of at most 255
// bytes, within every provider's limits for one request; a 429 (after its
// Retry-After), a 5xx or a timeout is tried again twice within the
// search's own deadline; errors name the endpoint and model, and show no
// secret of them.
type Embedder struct {
	ef    embeddings.EmbeddingFunction
	From  string // "collection" (its stored configuration) or "flags"
	stage *embed.Stage
}

// queryRetries bounds the tries of a query's embedding after the first.
const queryRetries = 2

func newEmbedder(ef embeddings.EmbeddingFunction, from string, cfg map[string]any) *Embedder {
	return &Embedder{ef: ef, From: from, stage: embed.New(embed.Config{Func: queries{ef}, Where: embed.Where(ef.Name(), cfg),
		Retries: queryRetries, Concurrency: 8, Secrets: embed.Secrets(cfg)})}
}

// queries embeds its one text as a query (EmbedQuery: some providers
// embed a query unlike a document).
type queries struct{ ef embeddings.EmbeddingFunction }

func (q queries) EmbedDocuments(ctx context.Context, texts []string) ([]embeddings.Embedding, error) {
	out := make([]embeddings.Embedding, len(texts))
	for i, t := range texts {
		emb, err := q.ef.EmbedQuery(ctx, t)
		if err != nil {
			return nil, err
		}
		out[i] = emb
	}
	return out, nil
}

// Name is the embedding function's name.
func (e *Embedder) Name() string { return e.ef.Name() }

// Embed returns text's query vector.
func (e *Embedder) Embed(ctx context.Context, text string) ([]float32, error) {
	embs, err := e.stage.Embed(ctx, []string{text})
	if err != nil {
		return nil, err
	}
	return embs[0].ContentAsFloat32(), nil
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

// EmbedPolicy is what the operator says about embedding queries:
// chromafs-ingest's --embedding and --embedding-config, and the endpoints
// a collection's stored configuration may name (--embedding-allow).
type EmbedPolicy struct {
	Name, Config string
	// Allow are the URL prefixes a stored configuration's endpoint must
	// start with (its api_base or url, or the function's default one).
	Allow []string
}

// DefaultEmbedAllow is --embedding-allow's default: endpoints on this host.
const DefaultEmbedAllow = "http://127.0.0.1:,http://localhost:,http://[::1]:,https://127.0.0.1:,https://localhost:,https://[::1]:"

// QueryEmbedder returns the function to embed queries with: the one the
// collection's configuration names (the function it was written with),
// else the one p names (name "" for none).
//
// A stored configuration is other people's input: it may name the
// function, its model and its dimensions, but the endpoint it names (or
// the function's default one) must be one p.Allow lists, and the
// variable it takes a key from must not be one chromafs keeps its own
// secrets in (ownSecret) — else a collection could have the host's key,
// or the token, sent where it likes. The operator's --embedding-config is
// laid over it (an endpoint or key variable given there is trusted); an
// --embedding of another function, or another model, than the
// collection's is refused: its vectors would not be comparable. A
// collection embedded with a function whose vectors mean nothing has no
// semantic search, whatever the flags.
func (s *Store) QueryEmbedder(ctx context.Context, p EmbedPolicy) (*Embedder, error) {
	info, err := s.embeddingInfo(ctx)
	if err != nil {
		return nil, err
	}
	flags := map[string]any{}
	if p.Config != "" {
		if err := json.Unmarshal([]byte(p.Config), &flags); err != nil {
			return nil, fmt.Errorf("--embedding-config: %w", err)
		}
	}
	switch {
	case info == nil && p.Name == "":
		return nil, off("the collection keeps no embedding function and none is configured (--embedding)", nil)
	case info == nil:
		ef, err := buildQueryFunction(p.Name, flags)
		if err != nil {
			return nil, off("the configured embedding function cannot be used (the log says why)", fmt.Errorf("--embedding %s: %w", p.Name, err))
		}
		return newEmbedder(ef, "flags", flags), nil
	case !Meaningful(info.Name):
		return nil, off(fmt.Sprintf("the collection's chunks were embedded with %s, whose vectors carry no meaning (ingest with a real embedding function, e.g. chromafs-ingest --embedding openai)", info.Name), nil)
	case !info.IsKnown() || !embeddings.HasDense(info.Name):
		return nil, off(fmt.Sprintf("the collection was embedded with %q, a function chromafs does not know", info.Name), nil)
	case p.Name != "" && p.Name != info.Name:
		return nil, off("the configured embedding function is not the collection's (the log says why)", fmt.Errorf("the collection was embedded with %s; --embedding %s would rank by another function's vectors", info.Name, p.Name))
	}
	stored, _ := info.Config["model_name"].(string)
	if given, _ := flags["model_name"].(string); given != "" && stored != "" && given != stored {
		return nil, off("the configured model is not the collection's (the log says why)", fmt.Errorf("the collection was embedded with model %q; --embedding-config names %q", stored, given))
	}
	cfg, err := storedConfig(info.Name, info.Config, flags, p.Allow)
	if err != nil {
		return nil, off("the collection's embedding function may not be used from here (the log says why)", fmt.Errorf("the collection's %s: %w", info.Name, err))
	}
	ef, err := buildQueryFunction(info.Name, cfg)
	if err != nil {
		return nil, off("the collection's embedding function cannot be used here (the log says why)", fmt.Errorf("the collection's %s: %w", info.Name, err))
	}
	return newEmbedder(ef, "collection", cfg), nil
}

// storedConfig lays the operator's configuration over a stored one and
// checks what still comes from the collection: its endpoint against
// allow, its key variable against ownSecret.
func storedConfig(name string, stored, flags map[string]any, allow []string) (map[string]any, error) {
	cfg := map[string]any{}
	for k, v := range stored {
		if _, over := flags[k]; !over {
			cfg[k] = v
		}
	}
	// every endpoint key the collection's configuration sets (and the
	// operator's does not) must be allowed: a function reads the key it
	// knows, whichever of them that is; with none set anywhere, the
	// function's default endpoint must be
	named := false
	for _, k := range embed.EndpointKeys {
		if v, ok := flags[k].(string); ok && v != "" {
			named = true // the operator's: trusted
			continue
		}
		if v, ok := stored[k].(string); ok && v != "" {
			named = true
			if !allowed(v, allow) {
				return nil, fmt.Errorf("its endpoint %q (%s) is not one --embedding-allow lists (give it there, or give %s in --embedding-config)", v, k, k)
			}
		}
	}
	if endpoint := embed.DefaultEndpoints[name]; !named && !allowed(endpoint, allow) {
		return nil, fmt.Errorf("its endpoint %q is not one --embedding-allow lists (give it there, or give api_base in --embedding-config)", endpoint)
	}
	for k, v := range cfg {
		if env, ok := v.(string); ok && strings.HasSuffix(k, "env_var") && ownSecret(env) {
			return nil, fmt.Errorf("its configuration names %s, an environment variable chromafs keeps its own secrets in: refused", env)
		}
	}
	for k, v := range flags {
		cfg[k] = v
	}
	return cfg, nil
}

func allowed(endpoint string, allow []string) bool {
	if endpoint == "" {
		return false
	}
	for _, p := range allow {
		if strings.HasPrefix(endpoint, p) {
			return true
		}
	}
	return false
}

func buildQueryFunction(name string, cfg map[string]any) (embeddings.EmbeddingFunction, error) {
	if !Meaningful(name) {
		return nil, fmt.Errorf("%s vectors carry no meaning", name)
	}
	if !embeddings.HasDense(name) {
		return nil, fmt.Errorf("unknown function %q", name)
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
	Line     int // its chunk_line metadata (the line of the page it begins on), 0 without
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
				// chromafs-ingest's chunk_line only: another writer's key of
				// that name may count otherwise
				if l, ok := md.GetInt(KeyChunkLine); ok && l > 0 && l <= math.MaxInt32 && nb.PageSHA != "" && Owned(md) {
					nb.Line = int(l)
				}
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

// Vectors returns the stored embeddings of the records ids (in the order
// Chroma answers); a record not found, or without an embedding, is left
// out.
func (s *Store) Vectors(ctx context.Context, ids []string) ([][]float32, error) {
	var out [][]float32
	err := s.eachByID(ctx, ids, v2.IncludeEmbeddings, func(res *records) {
		for _, e := range res.Embeddings {
			if len(e) > 0 {
				out = append(out, e)
			}
		}
	})
	return out, err
}

// PageVectors returns the stored embeddings of a page's chunks found by its
// metadata (collections whose ids chromafs cannot derive): page = slug,
// and page_sha256 = sha when sha is set. At most limit (and MaxGet).
func (s *Store) PageVectors(ctx context.Context, slug, sha string, limit int) ([][]float32, error) {
	limit = min(max(limit, 1), MaxGet)
	var w v2.WhereClause = v2.EqString(KeyPage, slug)
	if sha != "" {
		w = v2.And(w, v2.EqString(KeyPageSHA, sha))
	}
	res, err := s.get(ctx, v2.WithWhere(w), v2.WithInclude(v2.IncludeEmbeddings), v2.WithLimit(limit))
	if err != nil {
		return nil, s.explain(err, "get a page's embeddings")
	}
	var out [][]float32
	for _, e := range res.Embeddings {
		if len(e) > 0 {
			out = append(out, e)
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
