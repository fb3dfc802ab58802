// Package tree turns the collection's path-tree document into the in-memory
// directory tree that chromafs serves.
//
// The pipeline has three steps, each a pure function so that it can be tested
// without a server or a kernel:
//
//  1. [Decode] takes the raw `__path_tree__` document (base64 of gzip of JSON,
//     or plain JSON) and returns a [Doc]: one [Entry] per page, keyed by slug.
//     Everything that makes the whole document untrustworthy (bad base64,
//     truncated gzip, a decompressed size over [Limits.MaxDecoded], invalid
//     JSON, a top level that is not an object, too many entries) is an error.
//     The JSON is read by a scanner of its own (fastjson.go: no copies, a
//     million entries in about a second) as it is inflated, on the other
//     core (inflate.go), or where the scanner gives up, by a general
//     decoder once it is whole; FuzzFastScan checks the two agree, and that
//     the scanner reads the same when it gets the document a few bytes at a
//     time. The entries are kept as a
//     list sorted by slug; [Doc.Entries] builds the map on demand.
//     Fields of single entries are checked leniently: a malformed access field
//     makes the entry hidden, a malformed size makes it skipped, both with a
//     warning.
//
//  2. [BuildVisible] prunes by access groups. A page is visible when it is
//     public, or when its groups intersect the mount's. Anything missing or
//     malformed fails closed. Hidden entries are dropped before the tree is
//     built, so nothing about them can leak through the tree.
//
//  3. It then validates each visible entry's path (no empty, "." or ".."
//     components, no absolute paths, no NUL, components of at most 255 bytes,
//     bounded depth and length), resolves clashes (a directory wins over a
//     file at the same path; of two files at one path the smaller slug wins)
//     and produces a [Tree] of [Node]s with sorted children, exact sizes where
//     known and inode numbers that depend only on the path (and a file's
//     content version, a link's target), so they are stable across mounts
//     and tree versions. Directory entries make empty directories exist and
//     give directories their mtimes (unless something hidden lies below);
//     symbolic links are placed last, only where their target resolves to
//     something the mount shows (links.go). Where some file it shows is
//     not reassembled exactly (a page mapped onto another tool's records,
//     Entry.Reassembly), the tree gets a report of those files at
//     [ReportPath], written for this view from what it shows (report.go):
//     [Tree.Report], unlisted (a lookup by name finds it; listings and
//     walks show the docs only); an entry stored at that path is never
//     served.
//
// [Encode] is the inverse used by ingest. [Tree.Snapshot] and
// [FromSnapshot] keep a built tree in a compact binary form, for warm
// restarts. docs/FORMAT.md is the contract.
package tree
