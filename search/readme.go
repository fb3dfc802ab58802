package search

import (
	"context"
	"fmt"
	"strings"

	"github.com/chromafs/chromafs/tree"
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
  cat ".search/rotate api keys/.results"   rank, score, path, best-matching lines
  ls ".search/rotate api keys?mode=semantic&k=5/"

.results shows each result as "RANK<TAB>SCORE<TAB>PATH", then the 1-3 lines
of its best passage that hold the most query words, as grep -n shows them
("<TAB>PATH:LINE: text", at most 200 characters a line, 900 bytes a result: ten
results stay under 10 KiB). The whole page is one cat of its link away.

Options after the last "?": k=N (1 to 100, default 10),
mode=hybrid|semantic|lexical (default hybrid) and snippets=0 (paths only).
ls ".similar/PATH/" lists the pages like the page at PATH.

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
	if n := s.inexact(); n > 0 {
		fmt.Fprintf(&b, `
This mount also has %s, unlisted like .search/ (cat finds
it; ls, find and grep -r do not show it). It names %d of this view's files:
their bytes could not be reassembled exactly from another tool's chunks.
`, tree.ReportPath, n)
	}
	return []byte(b.String())
}

// inexact is the number of files the latest tree's report names.
func (s *Searcher) inexact() int {
	s.mu.Lock()
	t := s.latest
	s.mu.Unlock()
	if t == nil {
		return 0
	}
	return t.Inexact()
}
