package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/chromafs/chromafs/tree"
)

// LazyPiece is the byte length of the pieces a lazy pointer's content is
// verified in (the last may be shorter): a ranged read fetches and checks
// only the pieces it covers.
const LazyPiece = 1 << 20

// Lazy says which files become lazy pointers: tree entries whose content
// is fetched from BaseURL + "/" + the file's path (each component
// URL-escaped) instead of being stored in chunks. The user publishes the
// files there; the mount checks every byte against the size and SHA-256
// digests recorded here.
type Lazy struct {
	BaseURL string   // http:// or https://; empty: no lazy pointers
	Over    int64    // files larger than this many bytes; 0: none by size
	Match   []string // or whose path, or base name, matches one of these (path.Match)
}

// Check reports what is wrong with the options, if anything.
func (l Lazy) Check() error {
	if l.BaseURL == "" {
		if l.Over > 0 || len(l.Match) > 0 {
			return fmt.Errorf("lazy pointers need a base URL (--lazy-base-url) where the files are published")
		}
		return nil
	}
	u, err := url.Parse(l.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("lazy base URL %q: want http://HOST/PATH or https://HOST/PATH", l.BaseURL)
	}
	if l.Over <= 0 && len(l.Match) == 0 {
		return fmt.Errorf("lazy base URL given, but no file would become a pointer: add --lazy-over SIZE or --lazy-match GLOB")
	}
	for _, m := range l.Match {
		if _, err := path.Match(m, ""); err != nil {
			return fmt.Errorf("lazy pattern %q: %w", m, err)
		}
	}
	return nil
}

// applies reports whether the file at rel, of size bytes, becomes a
// pointer.
func (l Lazy) applies(rel string, size int) bool {
	if l.BaseURL == "" {
		return false
	}
	if l.Over > 0 && int64(size) > l.Over {
		return true
	}
	for _, m := range l.Match {
		if ok, _ := path.Match(m, rel); ok {
			return true
		}
		if ok, _ := path.Match(m, path.Base(rel)); ok {
			return true
		}
	}
	return false
}

// URI is where the file at rel is published.
func (l Lazy) URI(rel string) string {
	parts := strings.Split(rel, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.TrimRight(l.BaseURL, "/") + "/" + strings.Join(parts, "/")
}

// lazyPage records f as a lazy pointer: no records, an entry with the URI,
// the size, the page's digest and one digest per LazyPiece.
func (r *run) lazyPage(f SourceFile, slug string, data []byte, acc Access) error {
	sum := sha256.Sum256(data)
	size := int64(len(data))
	e := tree.Entry{
		IsPublic: acc.Public, Groups: acc.Groups, Path: f.Rel, Size: &size, Mtime: f.Mtime, MtimeNsec: f.Nsec,
		Exec: f.Exec, SHA256: hex.EncodeToString(sum[:]), URI: r.opt.Lazy.URI(f.Rel),
	}
	for off := 0; off < len(data); off += LazyPiece {
		piece := data[off:min(off+LazyPiece, len(data))]
		ps := sha256.Sum256(piece)
		e.Chunks = append(e.Chunks, int64(len(piece)))
		e.ChunkSHA256 = append(e.ChunkSHA256, hex.EncodeToString(ps[:]))
	}
	r.entries[slug] = e
	r.sum.Files++
	r.sum.Lazy++
	r.sum.Bytes += size
	if old, ok := r.old[slug]; ok && old.URI == e.URI && old.SHA256 == e.SHA256 {
		r.sum.Unchanged++
	} else {
		r.sum.Written++
	}
	return nil
}
