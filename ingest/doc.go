// Package ingest loads a directory of documentation into a collection in
// the chromafs layout (docs/FORMAT.md).
//
// [Run] scans the source directory, reads each file, takes a text file's
// access control from YAML frontmatter ([ParseAccess]), cuts it into chunks
// that join back byte for byte ([Split]; a file that is not UTF-8 text into
// binary chunks stored as base64, [SplitBinary]) and writes the chunks of new or
// changed pages under ids that include the content hash. Only then does it
// write the path tree, and only after that does it delete stale records, so
// a run that fails midway leaves the previous tree readable. The store is a
// small interface ([Store]) so the logic is testable without a server.
package ingest
