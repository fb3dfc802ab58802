package chroma

import (
	"context"
	"fmt"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
)

// Pages mapped onto other writers' records (PageRef.Parts): their chunks
// are byte ranges of those records' documents, fetched by id (MaxGet ids a
// request), never written or changed by chromafs.

// fetchParts returns chunks idx (nil: all) of a mapped page.
func (s *Store) fetchParts(ctx context.Context, ref PageRef, idx []int) ([]string, error) {
	if idx == nil {
		idx = make([]int, len(ref.Parts))
		for i := range idx {
			idx[i] = i
		}
	}
	ids := make([]string, 0, len(idx))
	for _, i := range idx {
		if i < 0 || i >= len(ref.Parts) {
			return nil, fmt.Errorf("page %q: %w: no part %d", ref.Slug, ErrBadPage, i)
		}
		if ref.Parts[i].ID != "" {
			ids = append(ids, ref.Parts[i].ID)
		}
	}
	docs, err := s.documents(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(idx))
	for j, i := range idx {
		if out[j], err = slicePart(ref, i, docs); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// fetchMapped fetches the whole mapped pages among refs into out and
// returns the others.
func (s *Store) fetchMapped(ctx context.Context, refs []PageRef, out map[string]Page) ([]PageRef, error) {
	var rest, mapped []PageRef
	var ids []string
	for _, r := range refs {
		if r.Parts == nil {
			rest = append(rest, r)
			continue
		}
		mapped = append(mapped, r)
		for _, p := range r.Parts {
			if p.ID != "" {
				ids = append(ids, p.ID)
			}
		}
	}
	if len(mapped) == 0 {
		return rest, nil
	}
	docs, err := s.documents(ctx, ids)
	if err != nil {
		return nil, err
	}
	for _, r := range mapped {
		chunks := make([]string, len(r.Parts))
		var perr error
		for i := range r.Parts {
			if chunks[i], perr = slicePart(r, i, docs); perr != nil {
				break
			}
		}
		out[r.Slug] = Page{Chunks: chunks, Err: perr}
		if perr != nil {
			out[r.Slug] = Page{Err: perr}
		}
	}
	return rest, nil
}

// slicePart cuts part i of ref out of its record's document.
func slicePart(ref PageRef, i int, docs map[string]string) (string, error) {
	p := ref.Parts[i]
	if p.ID == "" {
		return p.Text, nil
	}
	doc, ok := docs[p.ID]
	switch {
	case !ok:
		return "", fmt.Errorf("page %q: %w: record %q is gone (re-run chromafs-ingest index)", ref.Slug, ErrBadPage, p.ID)
	case p.To > int64(len(doc)):
		return "", fmt.Errorf("page %q: %w: record %q has %d bytes, the tree maps %d-%d (changed since it was indexed?)",
			ref.Slug, ErrBadPage, p.ID, len(doc), p.From, p.To)
	}
	return doc[p.From:p.To], nil
}

// documents gets the documents of ids, MaxGet a request.
func (s *Store) documents(ctx context.Context, ids []string) (map[string]string, error) {
	out := make(map[string]string, len(ids))
	err := s.eachByID(ctx, ids, v2.IncludeDocuments, func(res *records) {
		for i, id := range res.IDs {
			out[id] = documentAt(res, i)
		}
	})
	return out, err
}

// eachByID gets the records ids, MaxGet a request, with include, and
// hands each answer to fn.
func (s *Store) eachByID(ctx context.Context, ids []string, include v2.Include, fn func(*records)) error {
	for start := 0; start < len(ids); start += MaxGet {
		batch := make([]v2.DocumentID, 0, MaxGet)
		for _, id := range ids[start:min(start+MaxGet, len(ids))] {
			batch = append(batch, v2.DocumentID(id))
		}
		res, err := s.get(ctx, v2.WithIDs(batch...), v2.WithInclude(include))
		if err != nil {
			return s.explain(err, "get records by id")
		}
		fn(res)
	}
	return nil
}
