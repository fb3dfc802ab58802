// Package lexical is the BM25 index behind a mount's lexical search
// (.search/<query>/): it ranks the pages of one view by the words of a query.
//
// # One index per view
//
// An [Index] holds exactly the pages of one view: the pages a user of the
// mount may see. Nothing in it is ever filtered at query time, because
// everything BM25 computes from the corpus (the number of passages, document
// frequencies, the average passage length) would otherwise leak the hidden
// pages: a page a user may not read could shift the score, the rank or the
// count of the pages they may. With one index per view it cannot, by
// construction.
//
// # Passages
//
// A page is indexed as passages: byte ranges of its text (the chunks the
// ingest stored in Chroma). BM25 scores passages, not pages — a long page is
// not favoured for being long, and a page matches where it speaks of the
// query — and a page scores its best passage, which [Index.Search] returns with it
// so that a caller can show the place. A page with no passage that matches
// is not a hit.
//
// # Tokens and scoring
//
// [Tokenize] is chroma-go's BM25 tokenizer (pkg/embeddings/bm25): lowercase,
// split on anything but letters and digits, drop its English stop words and
// tokens longer than 40 runes, stem with the English Snowball stemmer. The
// same tokens are what Chroma's own BM25 sparse embedding sees. This package
// reimplements its loop on the same stop words and stemmer, and its tests
// (and a fuzz test) hold it equal to chroma-go's: chroma-go's takes some 8 s
// over 50 MB of text, mostly in a regular expression and the stemmer, while
// the [Builder] splits without one and stems each distinct word once.
//
// A passage's score for a query is
//
//	sum over distinct query terms t in the passage:
//	    idf(t) * tf * (k1+1) / (tf + k1 * (1 - b + b * dl/avgdl))
//	idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))
//
// with k1 = 1.2, b = 0.75, tf the term's count in the passage, dl the
// passage's length in tokens, N the number of passages, df the number of
// passages holding t and avgdl the mean passage length. A term repeated in
// the query counts once. Terms are summed in the order of the dictionary so
// that a score does not depend on the order of the query's words, and equal
// scores are equal bit for bit. Pages rank by score, then by name.
//
// # Layout
//
// The index is a few flat arrays, pointer-free but for the page names: the
// dictionary is one string of the sorted terms and their offsets (a term's
// id is its rank, found by binary search); each term's postings are
// (passage delta, term frequency) pairs as unsigned varints in one byte
// slice, so the heap holds them as compactly as the encoded form does; the
// passages are parallel arrays of page number, byte range, length in tokens
// and the length norm of the formula above. A search walks the postings of
// the query's terms into a per-passage accumulator (pooled, reset by the
// list of passages it touched), keeps each page's best passage and selects
// the top k with a heap.
//
// # Encoding
//
// [Index.MarshalBinary] writes a magic header and a format version, a
// fingerprint of the tokenizer (an index built with other stop words or
// another stemmer is refused rather than silently answering worse), then
// the pages, the passages and the terms with their postings, all as
// unsigned varints, and a CRC-32C of everything before it. [Unmarshal]
// trusts none of it: every count is bounded by the bytes left before
// anything is allocated, and it checks the ranges, the order of the terms,
// the postings' passage numbers and frequencies (a passage's frequencies
// must sum to its length), the passages' page numbers and the UTF-8 of the
// names; any failure is an error wrapping [ErrInvalid].
package lexical
