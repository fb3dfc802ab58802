package chroma

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
)

// PageRef names one version of a page.
type PageRef struct {
	Slug string
	// SHA256 selects the chunks written for this version; "" accepts any
	// chunk of the page (collections not written by chromafs-ingest).
	SHA256 string
	// Chunks are the known chunk lengths; nil when unknown.
	Chunks []int64
	// Parts, when set, map the page onto records of another writer: chunk
	// i is bytes [From, To) of record ID's document (FORMAT.md "records").
	Parts []Part
}

// Part is a byte range of one record's document, or literal Text when
// ID is "".
type Part struct {
	ID       string
	From, To int64
	Text     string
}

// Page is the result of fetching one page: its chunks in index order, or
// the reason they could not be trusted.
type Page struct {
	Chunks []string
	Err    error
}

// maxSlugsPerGet bounds the size of one "$in" filter.
const maxSlugsPerGet = 100

type rawChunk struct {
	index int
	text  string
	err   error
}

// FetchPage returns the chunks of ref with the given indexes, in index
// order; nil idx means every chunk. It makes one request per MaxGet chunks.
func (s *Store) FetchPage(ctx context.Context, ref PageRef, idx []int) ([]string, error) {
	if ref.Chunks != nil && len(ref.Chunks) == 0 {
		return nil, nil
	}
	if ref.Parts != nil {
		return s.fetchParts(ctx, ref, idx)
	}
	if byID(ref) {
		want := idx
		if want == nil {
			want = allIndexes(ref, nil)
		}
		got, missing, err := s.getByIDs(ctx, []idRequest{{ref, want}})
		if err != nil {
			return nil, err
		}
		if !missing[ref.Slug] {
			return assemble(ref, got[ref.Slug], idx)
		}
	}
	where := []v2.WhereClause{v2.EqString(KeyPage, ref.Slug)}
	if ref.SHA256 != "" {
		where = append(where, v2.EqString(KeyPageSHA, ref.SHA256))
	}
	if idx != nil {
		where = append(where, v2.InInt(KeyChunkIndex, idx...))
	}
	got, err := s.getChunks(ctx, where)
	if err != nil {
		return nil, err
	}
	return assemble(ref, got[ref.Slug], idx)
}

// FetchPages fetches the whole content of many pages, at most
// maxSlugsPerGet pages per filter and MaxGet results per request. The error
// is for the transport; a page whose chunks are inconsistent gets its own
// Page.Err.
func (s *Store) FetchPages(ctx context.Context, refs []PageRef) (map[string]Page, error) {
	out := make(map[string]Page, len(refs))
	refs, err := s.fetchMapped(ctx, refs, out)
	if err != nil {
		return nil, err
	}
	refs, err = s.fetchPagesByID(ctx, refs, out)
	if err != nil {
		return nil, err
	}
	for start := 0; start < len(refs); start += maxSlugsPerGet {
		batch := refs[start:min(start+maxSlugsPerGet, len(refs))]
		got, err := s.getChunks(ctx, pagesFilter(batch))
		if err != nil {
			return nil, err
		}
		for _, ref := range batch {
			chunks, err := assemble(ref, got[ref.Slug], nil)
			out[ref.Slug] = Page{Chunks: chunks, Err: err}
		}
	}
	return out, nil
}

// byID reports whether ref's chunks can be fetched by id: the tree entry
// was written by chromafs-ingest (it has the page digest and the chunk
// lengths), so the ids follow ChunkID. Chroma looks ids up directly, which
// is much faster than a metadata filter for a range of chunks.
func byID(ref PageRef) bool { return ref.SHA256 != "" && ref.Chunks != nil }

type idRequest struct {
	ref PageRef
	idx []int
}

// fetchPagesByID fetches the whole pages that can be fetched by id, packing
// up to MaxGet ids per request, into out. It returns the refs left for the
// filter path: those that cannot go by id, or whose ids were not all found.
func (s *Store) fetchPagesByID(ctx context.Context, refs []PageRef, out map[string]Page) ([]PageRef, error) {
	var rest []PageRef
	var reqs []idRequest
	for _, r := range refs {
		if byID(r) && len(r.Chunks) > 0 {
			reqs = append(reqs, idRequest{r, allIndexes(r, nil)})
		} else {
			rest = append(rest, r)
		}
	}
	got, missing, err := s.getByIDs(ctx, reqs)
	if err != nil {
		return nil, err
	}
	for _, q := range reqs {
		if missing[q.ref.Slug] {
			rest = append(rest, q.ref)
			continue
		}
		chunks, err := assemble(q.ref, got[q.ref.Slug], nil)
		out[q.ref.Slug] = Page{Chunks: chunks, Err: err}
	}
	return rest, nil
}

// getByIDs gets the given chunks by id, MaxGet ids per request, and groups
// them by page; missing names the pages not all of whose ids were found.
func (s *Store) getByIDs(ctx context.Context, reqs []idRequest) (map[string][]chunkMeta, map[string]bool, error) {
	var ids []v2.DocumentID
	want := map[string]int{}
	for _, q := range reqs {
		for _, i := range q.idx {
			ids = append(ids, v2.DocumentID(ChunkID(q.ref.Slug, q.ref.SHA256, i)))
		}
		want[q.ref.Slug] += len(q.idx)
	}
	got := map[string][]chunkMeta{}
	for start := 0; start < len(ids); start += MaxGet {
		batch := ids[start:min(start+MaxGet, len(ids))]
		res, err := s.get(ctx, v2.WithIDs(batch...), v2.WithInclude(v2.IncludeDocuments, v2.IncludeMetadatas))
		if err != nil {
			return nil, nil, s.explain(err, "fetch chunks by id")
		}
		collect(res, got)
	}
	missing := map[string]bool{}
	for slug, n := range want {
		if len(got[slug]) != n {
			missing[slug] = true
		}
	}
	return got, missing, nil
}

func pagesFilter(refs []PageRef) []v2.WhereClause {
	slugs := make([]string, len(refs))
	shas := make([]string, 0, len(refs))
	for i, r := range refs {
		slugs[i] = r.Slug
		if r.SHA256 != "" {
			shas = append(shas, r.SHA256)
		}
	}
	where := []v2.WhereClause{v2.InString(KeyPage, slugs...)}
	if len(shas) == len(refs) {
		where = append(where, v2.InString(KeyPageSHA, shas...))
	}
	return where
}

// getChunks runs a paged get and groups the chunks by page; assemble drops
// those of other page versions.
func (s *Store) getChunks(ctx context.Context, where []v2.WhereClause) (map[string][]chunkMeta, error) {
	var filter v2.WhereClause = where[0]
	if len(where) > 1 {
		filter = v2.And(where...)
	}
	out := map[string][]chunkMeta{}
	for offset := 0; ; offset += MaxGet {
		res, err := s.get(ctx, v2.WithWhere(filter), v2.WithInclude(v2.IncludeDocuments, v2.IncludeMetadatas),
			v2.WithLimit(MaxGet), v2.WithOffset(offset))
		if err != nil {
			return nil, s.explain(err, "fetch chunks")
		}
		collect(res, out)
		if res.Count() < MaxGet {
			return out, nil
		}
	}
}

// collect adds the chunks of a get result to out, by page.
func collect(res *records, out map[string][]chunkMeta) {
	for i := 0; i < res.Count(); i++ {
		md := metadataAt(res, i)
		page, _ := mdString(md, KeyPage)
		sha, _ := mdString(md, KeyPageSHA)
		idx, ierr := chunkIndex(md)
		text, derr := decodeChunk(md, documentAt(res, i))
		if i >= len(res.Documents) || res.Documents[i] == nil {
			derr = errors.New("no document") // a chunk is its document: never read as empty
		}
		if ierr == nil {
			ierr = derr
		}
		out[page] = append(out[page], chunkMeta{sha: sha, rawChunk: rawChunk{idx, text, ierr}})
	}
}

// decodeChunk returns a chunk's bytes: the document itself, or for a
// binary chunk (KeyChunkEncoding) its base64 decoded. An encoding it does
// not know, or base64 that does not decode, is an error for the page.
func decodeChunk(md metadata, doc string) (string, error) {
	enc, ok := mdString(md, KeyChunkEncoding)
	switch {
	case !ok:
		return doc, nil
	case enc != EncodingBase64:
		return "", fmt.Errorf("unknown %s %q", KeyChunkEncoding, enc)
	}
	b, err := base64.StdEncoding.DecodeString(doc)
	if err != nil {
		return "", fmt.Errorf("binary chunk: %w", err)
	}
	return string(b), nil
}

type chunkMeta struct {
	sha string
	rawChunk
}

func mdString(md metadata, key string) (string, bool) {
	if md == nil {
		return "", false
	}
	return md.GetString(key)
}

// assemble checks the chunks of one page and orders them. want nil means
// the whole page: indexes 0..n-1 with n known from ref.Chunks or, when
// unknown, from the chunks themselves.
func assemble(ref PageRef, got []chunkMeta, want []int) ([]string, error) {
	byIndex := map[int]string{}
	for _, c := range got {
		if ref.SHA256 != "" && c.sha != ref.SHA256 {
			continue // another version of the page
		}
		if c.err != nil {
			return nil, fmt.Errorf("page %q: %w: %v", ref.Slug, ErrBadPage, c.err)
		}
		if _, dup := byIndex[c.index]; dup {
			return nil, fmt.Errorf("page %q: %w: duplicate chunk_index %d", ref.Slug, ErrBadPage, c.index)
		}
		byIndex[c.index] = c.text
	}
	if want == nil {
		want = allIndexes(ref, byIndex)
	}
	out := make([]string, len(want))
	for i, k := range want {
		text, ok := byIndex[k]
		if !ok {
			return nil, fmt.Errorf("page %q: %w: chunk_index %d missing (have %d chunks)", ref.Slug, ErrBadPage, k, len(byIndex))
		}
		if ref.Chunks != nil && (k >= len(ref.Chunks) || int64(len(text)) != ref.Chunks[k]) {
			return nil, fmt.Errorf("page %q: %w: chunk %d has %d bytes, the tree says otherwise", ref.Slug, ErrBadPage, k, len(text))
		}
		out[i] = text
	}
	if ref.Chunks == nil && len(want) != len(byIndex) {
		return nil, fmt.Errorf("page %q: %w: chunk indexes are not 0..%d", ref.Slug, ErrBadPage, len(byIndex)-1)
	}
	return out, nil
}

func allIndexes(ref PageRef, byIndex map[int]string) []int {
	n := len(byIndex)
	if ref.Chunks != nil {
		n = len(ref.Chunks)
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}
