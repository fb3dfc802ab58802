package chroma

import (
	"context"
	"fmt"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
)

// Record is one record to write.
type Record struct {
	ID       string
	Text     string
	Metadata v2.DocumentMetadata
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
		),
	}
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
	err := s.call(ctx, func(ctx context.Context) error {
		return s.coll.Upsert(ctx, v2.WithIDs(ids...), v2.WithTexts(texts...), v2.WithMetadatas(mds...))
	})
	if err != nil {
		return s.explain(err, fmt.Sprintf("upsert %d records (first %q)", len(recs), recs[0].ID))
	}
	return nil
}

// IDs lists the ids of every record in the collection, paged.
func (s *Store) IDs(ctx context.Context) ([]string, error) {
	var out []string
	for offset := 0; ; offset += MaxGet {
		var res v2.GetResult
		err := s.call(ctx, func(ctx context.Context) (err error) {
			res, err = s.coll.Get(ctx, v2.WithInclude(v2.IncludeMetadatas), v2.WithLimit(MaxGet), v2.WithOffset(offset))
			return err
		})
		if err != nil {
			return nil, s.explain(err, "list record ids")
		}
		for _, id := range res.GetIDs() {
			out = append(out, string(id))
		}
		if res.Count() < MaxGet {
			return out, nil
		}
	}
}

// Delete removes records by id, in batches of at most MaxWrite.
func (s *Store) Delete(ctx context.Context, ids []string) error {
	for start := 0; start < len(ids); start += MaxWrite {
		end := min(start+MaxWrite, len(ids))
		batch := make([]v2.DocumentID, 0, end-start)
		for _, id := range ids[start:end] {
			batch = append(batch, v2.DocumentID(id))
		}
		err := s.call(ctx, func(ctx context.Context) error { return s.coll.Delete(ctx, v2.WithIDs(batch...)) })
		if err != nil {
			return s.explain(err, fmt.Sprintf("delete %d records", len(batch)))
		}
	}
	return nil
}
