// Package chroma is the only package that knows chroma-go and the layout of
// a chromafs collection (docs/FORMAT.md).
//
// A [Store] wraps one collection. It owns the HTTP client (real dial, TLS and
// header timeouts, a cap on response bodies, redirects refused so a token
// never follows one to another host) and puts a deadline on every call.
// HTTP 429/503 are [ErrBusy], carrying the server's Retry-After when it
// sent one ([RetryAfter]). [Open] opens the collection by name; [OpenByID]
// addresses a collection whose id a mount remembers, so that a restart
// costs one request ([Store.TreeStamp] and the tree header) and the
// collection is opened only when a read needs it.
// Reads are paged (at most [MaxGet] results a get) and verified: a page whose
// chunks have a missing, duplicate or malformed chunk_index, or whose
// lengths disagree with the tree, is an error for that page, never silently
// joined. Every get's answer is decoded here, not by chroma-go
// (records.go: a fifth of its CPU and garbage); the request is still
// chroma-go's. Writes are batched (at most [MaxWrite] records a request).
//
// The path tree lives in the record "__path_tree__". When its stored form is
// larger than [TreePartSize] it is split into content-addressed part records
// that are written first, so a reader always sees either the old tree or the
// new one, and checks the parts against a SHA-256 in the header.
package chroma
