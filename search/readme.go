package search

import (
	"context"
	"fmt"
	"strings"
)

// README is the text of .search/.README: how to search, and which modes
// this collection supports.
func (s *Searcher) README(ctx context.Context) []byte {
	sem, err := s.semantics(ctx)
	if err != nil {
		s.cfg.Log.Warn("search: the collection's embedding function could not be asked for", "err", err)
	}
	var b strings.Builder
	b.WriteString(`.search/ ranks the pages of this mount (it is not listed: ls -a, find, du
and tar see only the docs). Look a query up by name:

  ls ".search/rotate api keys/"            the best pages, as links 01-..., best first
  cat ".search/rotate api keys/.results"   rank, score, path, best-matching text
  ls ".search/rotate api keys?mode=semantic&k=5/"

Options after the last "?": k=N (1 to 100, default 10) and
mode=hybrid|semantic|lexical (default hybrid). ls ".similar/PATH/" lists the
pages like the page at PATH.

Modes here:
  lexical: BM25 over the pages' words (stemmed, stop words dropped).
`)
	if sem.Embedder != nil {
		fmt.Fprintf(&b, "  semantic: by meaning, the query embedded with %s.\n", sem.Embedder.Name())
		b.WriteString("  hybrid: both rankings fused (reciprocal rank fusion).\n")
	} else {
		fmt.Fprintf(&b, "  semantic: not available (%s).\n", sem.NoSemantic)
		b.WriteString("  hybrid: lexical only, since semantic is not available.\n")
	}
	if sem.Similar {
		b.WriteString("  .similar/: by the pages' stored embeddings.\n")
	} else {
		b.WriteString("  .similar/: not available (the stored embeddings carry no meaning).\n")
	}
	return []byte(b.String())
}
