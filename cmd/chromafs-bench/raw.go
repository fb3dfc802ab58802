package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
	"github.com/amikos-tech/chroma-go/pkg/embeddings"
	"golang.org/x/sync/errgroup"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/tree"
)

// The baselines use chroma-go directly: what a sandbox or an agent would
// do without chromafs. Concurrency matches the mount's request limit.
const rawConcurrency = 8

type raw struct {
	client v2.Client
	coll   v2.Collection
}

func openRaw(ctx context.Context, url, collection string) (*raw, error) {
	client, err := v2.NewHTTPClient(v2.WithBaseURL(url))
	if err != nil {
		return nil, err
	}
	coll, err := client.GetCollection(ctx, collection, v2.WithEmbeddingFunctionGet(embeddings.NewConsistentHashEmbeddingFunction()))
	if err != nil {
		return nil, err
	}
	return &raw{client: client, coll: coll}, nil
}

func (r *raw) close() { _ = r.client.Close() }

type rawChunk struct {
	page string
	idx  int
	text string
}

// all fetches every record, paged, rawConcurrency gets at a time.
func (r *raw) all(ctx context.Context, withMeta bool) ([]rawChunk, error) {
	total, err := r.coll.Count(ctx)
	if err != nil {
		return nil, err
	}
	include := []v2.Include{v2.IncludeDocuments}
	if withMeta {
		include = append(include, v2.IncludeMetadatas)
	}
	var mu sync.Mutex
	var out []rawChunk
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(rawConcurrency)
	for off := 0; off < total; off += chroma.MaxGet {
		g.Go(func() error {
			res, err := r.coll.Get(gctx, v2.WithInclude(include...), v2.WithLimit(chroma.MaxGet), v2.WithOffset(off))
			if err != nil {
				return err
			}
			chunks := toChunks(res, withMeta)
			mu.Lock()
			out = append(out, chunks...)
			mu.Unlock()
			return nil
		})
	}
	return out, g.Wait()
}

func toChunks(res v2.GetResult, withMeta bool) []rawChunk {
	docs, mds := res.GetDocuments(), res.GetMetadatas()
	out := make([]rawChunk, len(docs))
	for i, d := range docs {
		out[i].text = d.ContentString()
		if withMeta && i < len(mds) && mds[i] != nil {
			out[i].page, _ = mds[i].GetString(chroma.KeyPage)
			idx, _ := mds[i].GetInt(chroma.KeyChunkIndex)
			out[i].idx = int(idx)
		}
	}
	return out
}

// floor fetches every chunk as fast as the raw client can: the lower bound
// for a cold grep -r over the collection.
func (r *raw) floor(ctx context.Context) (int64, error) {
	chunks, err := r.all(ctx, false)
	var n int64
	for _, c := range chunks {
		n += int64(len(c.text))
	}
	return n, err
}

// materialize writes every page into dir, as a sandbox must before its
// first command: the tree, then every chunk, then the files.
func (r *raw) materialize(ctx context.Context, c *config, collection, dir string) error {
	cfg := chroma.Config{URL: c.url, Collection: collection, Tenant: chroma.DefaultTenant, Database: chroma.DefaultDatabase, Timeout: time.Minute}
	if err := cfg.Validate(); err != nil {
		return err
	}
	st, err := chroma.Open(ctx, cfg, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	doc, err := st.LoadTree(ctx)
	if err != nil {
		return err
	}
	d, err := tree.Decode(doc, tree.DefaultLimits)
	if err != nil {
		return err
	}
	chunks, err := r.all(ctx, true)
	if err != nil {
		return err
	}
	byPage := map[string][]rawChunk{}
	for _, ch := range chunks {
		byPage[ch.page] = append(byPage[ch.page], ch)
	}
	for slug, e := range d.Entries() {
		p := filepath.Join(dir, e.DisplayPath(slug))
		switch e.Type {
		case tree.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			continue
		case tree.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.Symlink(e.Target, p); err != nil {
				return err
			}
			continue
		}
		cs := byPage[slug]
		sort.Slice(cs, func(i, j int) bool { return cs[i].idx < cs[j].idx })
		var sb strings.Builder
		for _, ch := range cs {
			sb.WriteString(ch.text)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// page fetches one page's chunks, paged, sequentially.
func (r *raw) page(ctx context.Context, slug string) (int64, int, error) {
	var n int64
	reqs := 0
	for off := 0; ; off += chroma.MaxGet {
		res, err := r.coll.Get(ctx, v2.WithWhere(v2.EqString(chroma.KeyPage, slug)),
			v2.WithInclude(v2.IncludeDocuments, v2.IncludeMetadatas), v2.WithLimit(chroma.MaxGet), v2.WithOffset(off))
		reqs++
		if err != nil {
			return 0, reqs, err
		}
		for _, d := range res.GetDocuments() {
			n += int64(len(d.ContentString()))
		}
		if res.Count() < chroma.MaxGet {
			return n, reqs, nil
		}
	}
}

func mustRaw(ctx context.Context, c *config, collection string) (*raw, error) {
	r, err := openRaw(ctx, c.url, collection)
	if err != nil {
		return nil, fmt.Errorf("raw client: %w", err)
	}
	return r, nil
}
