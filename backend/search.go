package backend

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/lazy"
	"github.com/chromafs/chromafs/search"
)

// Vectors adapts st to search's Vectors: nearest records and a page's
// stored vectors, found by the ids chromafs-ingest gave its chunks, by the
// records another tool's page is mapped onto, else by its page metadata.
func Vectors(st *chroma.Store) search.Vectors { return vectors{st} }

type vectors struct{ st *chroma.Store }

func (v vectors) Near(ctx context.Context, vecs [][]float32, n int, in, notIn []string) ([][]search.Neighbor, error) {
	groups, err := v.st.Near(ctx, vecs, n, chroma.PageFilter{In: in, NotIn: notIn})
	if err != nil {
		return nil, err
	}
	out := make([][]search.Neighbor, len(groups))
	for i, g := range groups {
		out[i] = make([]search.Neighbor, len(g))
		for j, nb := range g {
			out[i][j] = search.Neighbor{ID: nb.ID, Page: nb.Page, PageSHA: nb.PageSHA, Text: nb.Text, Distance: nb.Distance, Line: nb.Line}
		}
	}
	return out, nil
}

func (v vectors) PageVectors(ctx context.Context, p search.PageRef) ([][]float32, error) {
	switch {
	case len(p.Records) > 0:
		return v.st.Vectors(ctx, p.Records)
	case p.Chunks > 0 && p.SHA256 != "":
		ids := make([]string, p.Chunks)
		for i := range ids {
			ids[i] = chroma.ChunkID(p.Slug, p.SHA256, i)
		}
		return v.st.Vectors(ctx, ids)
	}
	return v.st.PageVectors(ctx, p.Slug, p.SHA256, p.Limit)
}

// SearchOptions are the search flags chromafs-mount and chromafsd take.
type SearchOptions struct {
	Enabled bool
	// Embedding and EmbeddingConfig name the function queries are
	// embedded with when the collection keeps none (chromafs-ingest's
	// flags of the same names); laid over the collection's otherwise.
	Embedding, EmbeddingConfig string
	// EmbeddingAllow are the URL prefixes a collection's stored
	// configuration may send queries to (comma-separated).
	EmbeddingAllow string
	// Prebuild builds a view's lexical index soon after mounting when no
	// process of the host has kept it (else on the first search).
	Prebuild bool
}

// RegisterFlags adds --search, --embedding and --embedding-config.
func (o *SearchOptions) RegisterFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.Enabled, "search", true, "answer the unlisted .search/QUERY/ and .similar/PATH/ at the root: pages\nranked by meaning and by words (cat .search/.README); =false: ENOENT")
	fs.StringVar(&o.Embedding, "embedding", "", "embedding function for semantic search when the collection keeps none\n(as chromafs-ingest --embedding: openai, ollama, ...; the collection's own\nconfiguration comes first)")
	fs.StringVar(&o.EmbeddingConfig, "embedding-config", "", `JSON configuration for --embedding, e.g. '{"model_name":"text-embedding-3-small",`+"\n"+`"api_key_env_var":"OPENAI_API_KEY","api_base":"http://127.0.0.1:11434/v1"}'; with a`+"\n"+`collection that keeps its own, laid over it (an api_base or key variable given here is trusted)`)
	fs.BoolVar(&o.Prebuild, "search-prebuild", false, "build the view's lexical index 2 s after mounting when no process of this\nhost has kept it yet (the host's first mount of the view), so that no\nsearch waits for it (default: on the first search that needs it)")
	fs.StringVar(&o.EmbeddingAllow, "embedding-allow", chroma.DefaultEmbedAllow, "comma-separated URL prefixes the embedding endpoint a collection's stored\nconfiguration names may have (its api_base, or the function's default, e.g.\nhttps://api.openai.com/v1): a collection cannot have queries and keys sent\nelsewhere; none: use only --embedding-config's")
}

// Validate checks the flags.
func (o *SearchOptions) Validate() error {
	if o.EmbeddingConfig != "" {
		var m map[string]any
		if err := json.Unmarshal([]byte(o.EmbeddingConfig), &m); err != nil {
			return fmt.Errorf("--embedding-config: %w", err)
		}
		if o.Embedding == "" {
			return errors.New("--embedding-config needs --embedding")
		}
	}
	if o.Embedding != "" {
		if err := chroma.CheckEmbeddingName(o.Embedding); err != nil {
			return fmt.Errorf("--embedding %w", err)
		}
	}
	if _, err := o.allow(); err != nil {
		return fmt.Errorf("--embedding-allow %w", err)
	}
	return nil
}

// allow is --embedding-allow as a list ("none" is empty).
func (o *SearchOptions) allow() ([]string, error) {
	if strings.TrimSpace(o.EmbeddingAllow) == "" {
		return []string{}, nil
	}
	return lazy.ParseAllow(o.EmbeddingAllow)
}

// NewSearcher makes a view's searcher over st: semantic search with the
// collection's embedding function (else o's), .similar/ when the stored
// vectors mean something — both found when a search or .README first
// needs them, so a mount that never searches asks Chroma nothing more.
// cfg gives the rest (identity, reader, host tier, timeout, log); nil
// when o is off.
func NewSearcher(st *chroma.Store, o SearchOptions, cfg search.Config) *search.Searcher {
	if !o.Enabled {
		return nil
	}
	cfg.Vectors = Vectors(st)
	if o.Prebuild {
		cfg.FirstBuild = prebuildAfter
	} else {
		cfg.FirstBuild = -1
	}
	allow, _ := o.allow()
	policy := chroma.EmbedPolicy{Name: o.Embedding, Config: o.EmbeddingConfig, Allow: allow}
	cfg.Resolve = func(ctx context.Context) (search.Embedding, error) {
		var out search.Embedding
		emb, err := st.QueryEmbedder(ctx, policy)
		var ne *chroma.NoEmbedding
		switch {
		case errors.As(err, &ne): // a reason that names none of the operator's endpoints or variables
			out.NoSemantic = ne.Reason
			if cfg.Log != nil {
				cfg.Log.Info("semantic search not available", "reason", err)
			}
		case err != nil:
			return out, err
		default:
			out.Embedder = emb
			if cfg.Log != nil {
				cfg.Log.Info("semantic search", "embedding", emb.Name(), "configured_by", emb.From)
			}
		}
		name, err := st.EmbeddingName(ctx)
		if err != nil {
			return out, err
		}
		out.Similar = chroma.Meaningful(name)
		return out, nil
	}
	return search.New(cfg)
}

// prebuildAfter is how long after mounting --search-prebuild looks for
// the view's index in the host tier: the mount's first requests first.
const prebuildAfter = 2 * time.Second
