// Package search ranks a view's pages for the unlisted directories every
// mount has at its root: .search/QUERY/ (by meaning, by words, or both)
// and .similar/PATH/ (pages like a given one). It knows neither FUSE nor
// chroma-go: package fusefs shows its Results as symbolic links and a
// .results file, and package backend adapts Chroma to its Vectors.
//
// # One Searcher per view
//
// A Searcher serves one view (one set of groups; the daemon's mounts of a
// view share one) and is Prepared with every tree version the view
// serves; every search is of the latest. Everything it ranks is the
// view's:
//
//   - Lexical ranking is BM25 (package lexical) over an index of the
//     view's own pages, so a hidden page is not in it and cannot shift a
//     score, a rank or a count. Building it reads every page through the
//     read engine — from the nearest tier that holds it, verified, in the
//     engine's per-directory batches — in the background. The built index
//     is kept in the host tier, named by a digest of the view's pages
//     (paths and content versions), so every process of the host that
//     shows the same pages reads it instead of building it, and no other
//     view can. It is built on the first search that needs it, or, for
//     the first view of a host to lack it, Config.FirstBuild after
//     Prepare (once per host); Prepare itself never waits. Lazy pages,
//     pages that are not UTF-8 text and pages that cannot be read (up to a
//     tenth of them; more fail the build, and such an index is not kept)
//     are left out.
//   - Semantic ranking embeds the query with the collection's embedding
//     function (Embedder) and asks Chroma, in one query, for the
//     MaxResults nearest chunks within the view: a where filter on the
//     page metadata leaves out the hidden pages (not in the hidden slugs,
//     or in the visible ones; see state.scope). A view no filter can
//     limit has no semantic mode, rather than fewer results. The chunks
//     are folded onto the view's pages through its own tree — a record of
//     a page it does not show, or of another version of a page, is
//     dropped — and a page scores its best chunk.
//   - Hybrid fuses the two rankings' top k by reciprocal rank fusion;
//     without semantic it is lexical, and while the lexical index is
//     being built it is semantic alone (not kept), each time saying so.
//   - .similar/ queries with up to 16 of a page's own stored vectors: no
//     model.
//
// # Costs
//
// A search costs one Chroma query (.similar/: one get and one query;
// a lexical hit's text is read from its page, through the tiers). Results
// are kept per tree version and query (an LRU within maxKeptBytes), and
// one flight runs a query for every concurrent asker (the cache re-checked
// inside it). A search is bounded by Config.Timeout, waits for the
// lexical index included; a search that fails returns its error (the file
// system says EIO) and logs the reason once; a failed search is never
// kept, a failed build for retryAfter. Close stops the builds and waits
// for them and for the searches in flight.
package search
