package chroma

import (
	"context"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
)

// RawRecord is a record as another tool wrote it: its id, document and
// metadata (numbers as json.Number).
type RawRecord struct {
	ID   string
	Doc  string
	Meta map[string]any
}

// Scan reads every record of the collection but chromafs's own tree
// records, MaxGet a request, and calls fn with each page of them, in the
// server's order. It reads; it never writes.
func (s *Store) Scan(ctx context.Context, fn func([]RawRecord) error) (int, error) {
	total := 0
	for offset := 0; ; offset += MaxGet {
		res, err := s.get(ctx, v2.WithInclude(v2.IncludeDocuments, v2.IncludeMetadatas), v2.WithLimit(MaxGet), v2.WithOffset(offset))
		if err != nil {
			return total, s.explain(err, "scan records")
		}
		recs := make([]RawRecord, 0, res.Count())
		for i, id := range res.IDs {
			if IsTreeRecord(id) {
				continue
			}
			var md fields // nil when absent: plain gives an empty map
			if i < len(res.Metadatas) {
				md = res.Metadatas[i]
			}
			recs = append(recs, RawRecord{ID: id, Doc: documentAt(res, i), Meta: md.plain()})
		}
		total += len(recs)
		if err := fn(recs); err != nil {
			return total, err
		}
		if res.Count() < MaxGet {
			return total, nil
		}
	}
}

// IsTreeRecord reports whether id is chromafs's path tree or one of its
// parts.
func IsTreeRecord(id string) bool {
	return id == TreeID || len(id) > len(TreeID) && id[:len(TreeID)+1] == TreeID+"#"
}

// Count is how many records the collection holds.
func (s *Store) Count(ctx context.Context) (int, error) {
	var n int
	err := s.callColl(ctx, func(ctx context.Context, coll v2.Collection) (err error) {
		n, err = coll.Count(ctx)
		return err
	})
	if err != nil {
		return 0, s.explain(err, "count records")
	}
	return n, nil
}
