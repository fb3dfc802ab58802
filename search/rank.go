package search

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/chromafs/chromafs/tree"
)

// rrfK is reciprocal rank fusion's constant: a page ranked r-th (from 1)
// by a ranking scores 1/(rrfK + r) from it.
const rrfK = 60

// maxShownPassage bounds the passage a hit shows (ingest's chunks are at
// most 16 KiB; other tools' a little more).
const maxShownPassage = 1 << 20

// maxNumberedOffset bounds how far into its page a lexical passage may
// begin to have its lines numbered: the page is read from its start.
const maxNumberedOffset = 1 << 20

// maxSimilarVectors bounds the chunks of a page whose vectors .similar/
// queries with (one query holds them all).
const maxSimilarVectors = 16

// lexical ranks st's pages by BM25; a hit's text is its best passage,
// read from the page with what precedes it (its line number).
func (s *Searcher) lexical(ctx context.Context, st *state, text string, k int) ([]Hit, error) {
	ix, err := s.started(st).index(ctx)
	if err != nil {
		return nil, err
	}
	var out []Hit
	for _, h := range ix.Search(text, k) {
		n := st.t.Lookup(h.Name)
		if n == nil || n.File == nil { // cannot be: the index is of this tree's pages
			return nil, fmt.Errorf("lexical index names %q, which the tree does not hold", h.Name)
		}
		// an index read from the host tier is checked, but not against
		// this tree: a passage must lie inside its page
		size, ok := n.File.Size()
		if !ok {
			if err := s.cfg.Reader.EnsureSize(ctx, n); err != nil {
				return nil, fmt.Errorf("%s: %w", h.Name, err)
			}
			size, _ = n.File.Size()
		}
		if p := h.Passage; p.Off < 0 || p.Len < 0 || p.Len > maxShownPassage || p.Off > size-p.Len {
			return nil, fmt.Errorf("lexical index: passage [%d, +%d) of %s (%d bytes) is not in the page", p.Off, p.Len, h.Name, size)
		}
		// from the page's start, the lines before the passage numbering its
		// own, unless that is far in: then the passage alone, unnumbered
		from, line := int64(0), 0
		if h.Passage.Off > maxNumberedOffset {
			from, line = h.Passage.Off, -1
		}
		data, err := readRange(ctx, s.cfg.Reader, n.File, from, h.Passage.Off+h.Passage.Len-from)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", h.Name, err)
		}
		if line == 0 {
			line = 1 + bytes.Count(data[:h.Passage.Off], []byte{'\n'})
		}
		out = append(out, Hit{Path: h.Name, Score: h.Score, Text: string(data[h.Passage.Off-from:]), Line: line})
	}
	return out, nil
}

// semantic embeds the query and asks Chroma for its nearest chunks within
// the view (one query), folded to pages.
func (s *Searcher) semantic(ctx context.Context, st *state, text string, k int) ([]Hit, error) {
	if !st.exact {
		return nil, fmt.Errorf("%w: %s", ErrUnsupported, st.inexact)
	}
	vec, err := s.embed(ctx, text)
	if err != nil {
		return nil, err
	}
	s.st.chromaQueries.Add(1)
	groups, err := s.cfg.Vectors.Near(ctx, [][]float32{vec}, MaxResults, st.in, st.notIn)
	if err != nil {
		return nil, err
	}
	return st.fold(groups, k, nil), nil
}

// embed returns the query's vector, kept per query text.
func (s *Searcher) embed(ctx context.Context, text string) ([]float32, error) {
	if v, ok := s.embeds.Get(text); ok {
		return v, nil
	}
	sem, err := s.semantics(ctx)
	if err != nil {
		return nil, err
	}
	if sem.Embedder == nil {
		return nil, fmt.Errorf("%w: semantic search: %s", ErrUnsupported, sem.NoSemantic)
	}
	v, err := sem.Embedder.Embed(ctx, text)
	if err != nil {
		return nil, err
	}
	s.embeds.Add(text, v)
	return v, nil
}

// similar ranks the pages near the chunks of the page q names, by their
// stored vectors: one get of them, one query.
func (s *Searcher) similar(ctx context.Context, st *state, q Query) (*Results, error) {
	n := st.t.Lookup(q.Text)
	if n == nil || n.File == nil || n == st.t.Report {
		return nil, fmt.Errorf("%w: %s is not a page", ErrInvalid, q.Text)
	}
	if !st.exact {
		return nil, fmt.Errorf("%w: %s", ErrUnsupported, st.inexact)
	}
	ref := PageRef{Slug: n.File.Slug, SHA256: n.File.SHA256, Limit: maxSimilarVectors}
	if recs := n.File.Records(); recs != nil {
		for _, p := range recs {
			if p.ID != "" && !slices.Contains(ref.Records, p.ID) && len(ref.Records) < maxSimilarVectors {
				ref.Records = append(ref.Records, p.ID)
			}
		}
	} else if n.File.Chunks != nil && n.File.SHA256 != "" {
		ref.Chunks = min(len(n.File.Chunks), maxSimilarVectors)
	}
	vecs, err := s.cfg.Vectors.PageVectors(ctx, ref)
	if err != nil {
		return nil, err
	}
	if len(vecs) == 0 {
		return nil, fmt.Errorf("%w: %s has no stored vectors", ErrUnsupported, q.Text)
	}
	if len(vecs) > maxSimilarVectors {
		vecs = vecs[:maxSimilarVectors]
	}
	s.st.chromaQueries.Add(1)
	per := MaxResults / len(vecs) // len(vecs) <= maxSimilarVectors < MaxResults
	groups, err := s.cfg.Vectors.Near(ctx, vecs, per, st.in, st.notIn)
	if err != nil {
		return nil, err
	}
	return &Results{Query: q, Hits: st.fold(groups, q.K, n)}, nil
}

// fold maps Chroma's records onto the view's pages (a record of a page the
// view does not show, of another version of a page, or of no page is
// dropped), scores each page by its best chunk (smallest distance, over
// every group) and returns the k best, ties by path; skip is left out.
func (st *state) fold(groups [][]Neighbor, k int, skip *tree.Node) []Hit {
	type best struct {
		n  *tree.Node
		nb Neighbor
	}
	byPage := map[*tree.Node]*best{}
	for _, g := range groups {
		for _, nb := range g {
			n := st.pageOf(nb)
			if n == nil || n == skip {
				continue
			}
			if b, ok := byPage[n]; !ok || nb.Distance < b.nb.Distance {
				byPage[n] = &best{n, nb}
			}
		}
	}
	list := make([]*best, 0, len(byPage))
	for _, b := range byPage {
		list = append(list, b)
	}
	paths := make(map[*tree.Node]string, len(list))
	for _, b := range list {
		paths[b.n] = b.n.Path()
	}
	slices.SortFunc(list, func(a, b *best) int {
		return cmp.Or(cmp.Compare(a.nb.Distance, b.nb.Distance), cmp.Compare(paths[a.n], paths[b.n]))
	})
	out := make([]Hit, 0, min(k, len(list)))
	for _, b := range list[:min(k, len(list))] {
		out = append(out, Hit{Path: paths[b.n], Score: 1 - b.nb.Distance, Text: b.nb.Text, Line: b.nb.Line})
	}
	return out
}

// pageOf is the view's page a record belongs to, or nil.
func (st *state) pageOf(nb Neighbor) *tree.Node {
	if nb.Page != "" {
		n := st.bySlug[nb.Page]
		if n == nil {
			return nil
		}
		if nb.PageSHA != "" && n.File.SHA256 != "" && nb.PageSHA != n.File.SHA256 {
			return nil // a chunk of another version of the page
		}
		return n
	}
	return st.byRecord[nb.ID]
}

// fuse merges two rankings by reciprocal rank fusion: a page scores the
// sum of 1/(rrfK + its rank) over the rankings that hold it; ties by
// path. A page's text comes from the ranking that placed it higher.
// Hybrid fuses each ranking's top k: deeper lists let every page a few
// common words match (lexical finds many) outrank the best page of the
// other ranking alone, since being in both lists counts twice.
func fuse(k int, rankings ...[]Hit) []Hit {
	type fused struct {
		hit      Hit
		score    float64
		bestRank int
	}
	byPath := map[string]*fused{}
	for _, r := range rankings {
		for i, h := range r {
			f, ok := byPath[h.Path]
			if !ok {
				f = &fused{hit: h, bestRank: i}
				byPath[h.Path] = f
			} else if i < f.bestRank {
				f.hit.Text, f.hit.Line, f.bestRank = h.Text, h.Line, i
			}
			f.score += 1 / float64(rrfK+i+1)
		}
	}
	list := make([]*fused, 0, len(byPath))
	for _, f := range byPath {
		list = append(list, f)
	}
	slices.SortFunc(list, func(a, b *fused) int {
		return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(a.hit.Path, b.hit.Path))
	})
	out := make([]Hit, 0, min(k, len(list)))
	for _, f := range list[:min(k, len(list))] {
		h := f.hit
		h.Score = f.score
		out = append(out, h)
	}
	return out
}
