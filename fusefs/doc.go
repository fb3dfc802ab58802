// Package fusefs serves a [tree.Tree] as a read-only FUSE file system with
// go-fuse's fs API. It is the only package that knows FUSE.
//
// Metadata never leaves memory: Lookup, Getattr and Readdir are answered
// from the tree, so ls, find, stat and du cost no Chroma request. File
// content is read lazily through a [Source] (chroma.Store in production)
// into a byte-bounded [cache.Cache], in windows of chunks so that reading
// the first KiB of a 50 MiB page does not download 50 MiB, and with
// in-flight de-duplication so that 64 readers of one uncached page make one
// request.
//
// Kernel caching does the rest. Entries, attributes and negative lookups
// are cached for a long time (content is immutable for a tree version).
// Open and Flush answer ENOSYS, which makes the kernel stop sending
// OPEN/FLUSH/RELEASE and keep the page cache across opens; directories are
// opened with FOPEN_CACHE_DIR. The first content read in a directory starts
// a background prefetch of its files in batched requests, so grep -r costs
// about one request per directory rather than one per file, while find and
// ls -lR, which read no content, cost none.
//
// Errors pass through one function, [toErrno]: anything that goes wrong
// while fetching content is EIO (never a short read or zero-filled data),
// a cancelled request is EINTR, and ENOENT comes only from the tree.
//
// The core (reader.go, prefetch.go, sizes.go) has no kernel in it and is
// tested with a fake Source; the real mount is tested in integration_test.
package fusefs
