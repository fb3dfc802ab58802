package chroma

import (
	"context"
	"encoding/base64"
	"fmt"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
	"github.com/amikos-tech/chroma-go/pkg/embeddings"
)

// Record is one record to write.
type Record struct {
	ID       string
	Text     string
	Metadata v2.DocumentMetadata
	// EmbedText, when set, is what the embedding is made of instead of
	// Text (a binary chunk's document is base64, which means nothing).
	EmbedText string
	// Embedding, when set on every record of a write, is written as it
	// is: the caller embedded the records (ingest's embedding stage),
	// and the write embeds nothing.
	Embedding embeddings.Embedding
}

// EmbedSource is what the record's embedding is made of.
func (r Record) EmbedSource() string {
	if r.EmbedText != "" {
		return r.EmbedText
	}
	return r.Text
}

// ChunkRecord builds the record for chunk i of a page version.
func ChunkRecord(slug, sha string, i int, text string) Record {
	return Record{
		ID:   ChunkID(slug, sha, i),
		Text: text,
		Metadata: v2.NewDocumentMetadata(
			v2.NewStringAttribute(KeyPage, slug),
			v2.NewIntAttribute(KeyChunkIndex, int64(i)),
			v2.NewStringAttribute(KeyPageSHA, sha),
			ownerMark(),
		),
	}
}

// BinaryChunkRecord builds the record for chunk i of a binary page: the
// document is the base64 of the bytes (so it stays inside MaxDocument when
// the chunk is at most 3/4 of it), marked with KeyChunkEncoding, and the
// embedding is made of describe (e.g. the file's path and type).
func BinaryChunkRecord(slug, sha string, i int, data []byte, describe string) Record {
	r := ChunkRecord(slug, sha, i, base64.StdEncoding.EncodeToString(data))
	r.Metadata.SetString(KeyChunkEncoding, EncodingBase64)
	r.EmbedText = describe
	return r
}

// Upsert writes records in batches of at most MaxWrite.
func (s *Store) Upsert(ctx context.Context, recs []Record) error {
	for start := 0; start < len(recs); start += MaxWrite {
		end := min(start+MaxWrite, len(recs))
		if err := s.upsert(ctx, recs[start:end]); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) upsert(ctx context.Context, recs []Record) error {
	ids := make([]v2.DocumentID, len(recs))
	texts := make([]string, len(recs))
	mds := make([]v2.DocumentMetadata, len(recs))
	for i, r := range recs {
		ids[i], texts[i], mds[i] = v2.DocumentID(r.ID), r.Text, r.Metadata
	}
	opts := []v2.CollectionAddOption{v2.WithIDs(ids...), v2.WithTexts(texts...), v2.WithMetadatas(mds...)}
	if embs, err := s.embedOwn(ctx, recs); err != nil {
		return fmt.Errorf("embed %d records: %w", len(recs), err)
	} else if embs != nil {
		opts = append(opts, v2.WithEmbeddings(embs...))
	}
	err := s.callColl(ctx, func(ctx context.Context, coll v2.Collection) error {
		return coll.Upsert(ctx, opts...)
	})
	if err != nil {
		return s.explain(err, fmt.Sprintf("upsert %d records (first %q)", len(recs), recs[0].ID))
	}
	return nil
}

// embedOwn returns the embeddings of a batch whose records all carry
// theirs; else makes them when a record has its own EmbedText (chroma-go
// would embed the documents); nil otherwise.
func (s *Store) embedOwn(ctx context.Context, recs []Record) ([]embeddings.Embedding, error) {
	given := make([]embeddings.Embedding, len(recs))
	for i, r := range recs {
		given[i] = r.Embedding
		if r.Embedding == nil {
			given = nil
			break
		}
	}
	if given != nil {
		return given, nil
	}
	own := false
	texts := make([]string, len(recs))
	for i, r := range recs {
		texts[i] = r.EmbedSource()
		own = own || r.EmbedText != ""
	}
	if !own {
		return nil, nil
	}
	if s.embedWith != nil {
		return s.embedWith(ctx, texts)
	}
	return s.ef.EmbedDocuments(ctx, texts)
}

// EmbedWith makes f embed what the Store's writes embed themselves (the
// path tree's records, a binary chunk's description): ingest's embedding
// stage, with its limits, deadline and retries. Records that carry their
// Embedding are written as they are.
func (s *Store) EmbedWith(f func(ctx context.Context, texts []string) ([]embeddings.Embedding, error)) {
	s.embedWith = f
}

// IDs lists the ids of every record in the collection, whoever wrote it.
func (s *Store) IDs(ctx context.Context) ([]string, error) {
	return s.listIDs(ctx, nil, "list record ids")
}

// Inventory is what ingest must know of a collection before it writes:
// which records are its own and how many belong to other writers.
type Inventory struct {
	Owned   []string // ids of the records that carry the ownership mark
	Foreign int      // records without it: never overwritten or deleted
}

// Inventory lists the ids of the records chromafs-ingest wrote and counts
// the others.
func (s *Store) Inventory(ctx context.Context) (Inventory, error) {
	owned, err := s.listIDs(ctx, v2.EqString(KeyOwner, OwnerIngest), "list chromafs-ingest's records")
	if err != nil {
		return Inventory{}, err
	}
	total, err := s.Count(ctx)
	if err != nil {
		return Inventory{}, err
	}
	return Inventory{Owned: owned, Foreign: max(total-len(owned), 0)}, nil
}

// listIDs pages through the ids of the records matching where (all when
// nil). Chroma needs something to include; URIs are the smallest field.
func (s *Store) listIDs(ctx context.Context, where v2.WhereFilter, what string) ([]string, error) {
	var out []string
	for offset := 0; ; offset += MaxGet {
		opts := []v2.CollectionGetOption{v2.WithInclude(v2.IncludeURIs), v2.WithLimit(MaxGet), v2.WithOffset(offset)}
		if where != nil {
			opts = append(opts, v2.WithWhere(where))
		}
		res, err := s.get(ctx, opts...)
		if err != nil {
			return nil, s.explain(err, what)
		}
		out = append(out, res.IDs...)
		if res.Count() < MaxGet {
			return out, nil
		}
	}
}

// NotOwned returns those of ids that exist in the collection without the
// ownership mark: records of another writer that a write under the same id
// would overwrite.
func (s *Store) NotOwned(ctx context.Context, ids []string) ([]string, error) {
	var out []string
	for start := 0; start < len(ids); start += MaxGet {
		batch := docIDs(ids[start:min(start+MaxGet, len(ids))])
		res, err := s.get(ctx, v2.WithIDs(batch...), v2.WithInclude(v2.IncludeMetadatas))
		if err != nil {
			return nil, s.explain(err, "check record ownership")
		}
		for i, id := range res.IDs {
			if !Owned(metadataAt(res, i)) {
				out = append(out, id)
			}
		}
	}
	return out, nil
}

// DeleteOwned removes records by id, in batches of at most MaxWrite. The
// server deletes only those that carry the ownership mark, so a record
// another writer put under one of these ids survives.
func (s *Store) DeleteOwned(ctx context.Context, ids []string) error {
	mine := v2.EqString(KeyOwner, OwnerIngest)
	for start := 0; start < len(ids); start += MaxWrite {
		batch := docIDs(ids[start:min(start+MaxWrite, len(ids))])
		err := s.callColl(ctx, func(ctx context.Context, coll v2.Collection) error {
			return coll.Delete(ctx, v2.WithIDs(batch...), v2.WithWhere(mine))
		})
		if err != nil {
			return s.explain(err, fmt.Sprintf("delete %d records", len(batch)))
		}
	}
	return nil
}

func docIDs(ids []string) []v2.DocumentID {
	out := make([]v2.DocumentID, len(ids))
	for i, id := range ids {
		out[i] = v2.DocumentID(id)
	}
	return out
}
