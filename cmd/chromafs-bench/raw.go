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
	// entries is the collection's tree, loaded by entry on first use
	entries map[string]tree.Entry
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

// loadTree reads and decodes the collection's stored tree.
func loadTree(ctx context.Context, c *config, collection string) (*tree.Doc, error) {
	cfg := chroma.Config{URL: c.url, Collection: collection, Tenant: chroma.DefaultTenant, Database: chroma.DefaultDatabase, Timeout: time.Minute}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	st, err := chroma.Open(ctx, cfg, nil)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	doc, err := st.LoadTree(ctx)
	if err != nil {
		return nil, err
	}
	return tree.Decode(doc, tree.DefaultLimits)
}

// entry is the tree entry of page slug (the tree is read once, untimed:
// a mount has it before its first read too).
func (r *raw) entry(ctx context.Context, c *config, collection, slug string) (tree.Entry, error) {
	if r.entries == nil {
		d, err := loadTree(ctx, c, collection)
		if err != nil {
			return tree.Entry{}, err
		}
		r.entries = d.Entries()
	}
	e, ok := r.entries[slug]
	if !ok || e.Type != "" || e.SHA256 == "" || len(e.Chunks) == 0 {
		return tree.Entry{}, fmt.Errorf("raw client: the tree of %s has no chunked page %s", collection, slug)
	}
	return e, nil
}

// materialize writes every page into dir, as a sandbox must before its
// first command: the tree, then every chunk, then the files.
func (r *raw) materialize(ctx context.Context, c *config, collection, dir string) error {
	d, err := loadTree(ctx, c, collection)
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

// pageByID is the best the raw client does for one page whose tree entry
// it has: its chunks got by id (chroma.ChunkID, ingest's ids), documents
// only, chroma.MaxGet ids a get and rawConcurrency gets in flight, as the
// floor fetches the collection; the page assembled in order and checked
// whole. It returns the page's bytes and the gets made.
func (r *raw) pageByID(ctx context.Context, slug string, e tree.Entry) (int64, int, error) {
	ids := make([]v2.DocumentID, len(e.Chunks))
	at := make(map[v2.DocumentID]int, len(ids)) // id: its chunk
	offsets := make([]int64, len(e.Chunks)+1)
	for i, n := range e.Chunks {
		ids[i] = v2.DocumentID(chroma.ChunkID(slug, e.SHA256, i))
		at[ids[i]] = i
		offsets[i+1] = offsets[i] + n
	}
	page := make([]byte, offsets[len(e.Chunks)])
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(rawConcurrency)
	gets := 0
	for start := 0; start < len(ids); start += chroma.MaxGet {
		batch := ids[start:min(start+chroma.MaxGet, len(ids))]
		gets++
		g.Go(func() error {
			res, err := r.coll.Get(gctx, v2.WithIDs(batch...), v2.WithInclude(v2.IncludeDocuments))
			if err != nil {
				return err
			}
			docs, got := res.GetDocuments(), res.GetIDs()
			if len(docs) != len(batch) || len(got) != len(batch) {
				return fmt.Errorf("raw client: %s: %d of %d chunks by id", slug, len(docs), len(batch))
			}
			for k, id := range got {
				i, ok := at[id]
				text := docs[k].ContentString()
				if !ok || int64(len(text)) != e.Chunks[i] {
					return fmt.Errorf("raw client: %s: chunk %q is not the tree's", slug, id)
				}
				copy(page[offsets[i]:], text) // each chunk has its own range: no two writers meet
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, gets, err
	}
	return int64(len(page)), gets, nil
}

// page fetches one page's chunks with a filter on its page metadata,
// paged, sequentially (what is stored for it, not a timed baseline).
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
