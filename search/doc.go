// Package search ranks a view's pages for the unlisted directories every
// mount has at its root: .search/QUERY/ (by meaning, by words, or both)
// and .similar/PATH/ (pages like a given one). It knows neither FUSE nor
// chroma-go: package fusefs shows its Results as symbolic links and a
// .results file, and package backend adapts Chroma to its Vectors.
//
// # One Searcher per view
//
// A Searcher serves one view (one set of groups) and is Prepared with
// every tree version the view serves. Everything it ranks is the view's:
//
//   - Lexical ranking is BM25 (package lexical) over an index of the
//     view's own pages, so a hidden page is not in it and cannot shift a
//     score, a rank or a count. Building it reads every page through the
//     read engine — from the nearest tier that holds it, verified — in
//     the background: Prepare never waits for it. The built index is kept
//     in the host tier, named by a digest of the view's pages (paths and
//     content versions), so every process of the host that shows the same
//     pages reads it instead of building it, and no other view can.
//     Lazy pages and pages that are not UTF-8 text are not indexed.
//   - Semantic ranking embeds the query with the collection's embedding
//     function (Embedder) and asks Chroma, in one query, for the
//     MaxResults nearest chunks within the view: a where filter on the
//     page metadata leaves out the hidden pages (not in the hidden slugs,
//     or in the visible ones, whichever the tree knows and is short; see
//     state.scope). The chunks are folded onto the view's pages through
//     its own tree — a record of a page it does not show, or of another
//     version of a page, is dropped — and a page scores its best chunk.
//   - Hybrid fuses the two rankings by reciprocal rank fusion; without an
//     embedding function it is lexical, and says so.
//   - .similar/ queries with a page's own stored vectors: no model.
//
// # Costs
//
// Results are kept per tree version and query (an LRU), and one flight
// runs a query for every concurrent asker (the cache re-checked inside
// it). A search is bounded by Config.Timeout, waits for the lexical index
// included; a search that fails returns its error (the file system says
// EIO) and logs the reason; nothing that failed is kept.
package search
