// Package fusefs serves a [tree.Tree] as a read-only FUSE file system with
// go-fuse's fs API. It is the only package that knows FUSE, and a thin
// adapter: it answers from the tree and asks a [Reader] (content.Engine,
// the read engine with its cache tiers) for the bytes of files.
//
// Metadata never leaves memory: Lookup, Getattr, Readdir and Readlink are
// answered from the tree (directories, files and the symbolic links the
// tree placed, each its own node type), so ls, find, stat and du cost no
// request. A content read
// tells the Reader first (it prefetches the directory's walk-order group in
// the background), then reads.
//
// Kernel caching does the rest. Entries, attributes and negative lookups
// are cached for a long time (content is immutable for a tree version).
// Open and Flush answer ENOSYS, which makes the kernel stop sending
// OPEN/FLUSH/RELEASE and keep the page cache across opens; OPENDIR answers
// ENOSYS too (see noOpendir), so the kernel caches listings itself; each
// READDIR(PLUS) then reads a dirStream of the directory by position (see
// plusDirMax for what the answers of a big directory hold). Pages
// the Reader prefetched are pushed into the kernel's page cache for inodes
// the kernel knows (see pusher), and a listing under a directory being
// read pushes its files' pages in its handler (see pushListed), so their
// first read does not reach us.
//
// With an access log (Config.Access), every lookup of a missing name,
// listing, read and readlink that reaches this process is written there,
// with the caller from the request header.
//
// With a [Searcher] (Config.Search), the root also answers two names it
// never lists, .search and .similar (search.go): a lookup below them runs
// a search and answers a directory of relative links to the pages and a
// .results file, all held in memory under inode numbers of their own (a
// keyed hash with the top bit set); a tree swap drops the two names from
// the kernel's caches. The tree's own unlisted report of inexact files
// (tree.Tree.Report, .chromafs-reassembly.txt) is answered at the root
// the same way: found by name, never listed, dropped on a swap that
// changes it.
//
// Errors pass through one function, [toErrno]: anything that goes wrong
// while reading content is EIO (never a short read or zero-filled data),
// a cancelled request is EINTR, and ENOENT comes only from the tree (a
// search's own codes, EINVAL and EOPNOTSUPP, pass through searchErrno).
package fusefs
