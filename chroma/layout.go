package chroma

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
)

// Limits of Chroma Cloud and distributed Chroma, which ingest and readers
// respect everywhere.
const (
	MaxDocument  = 16 << 10 // bytes in one document
	MaxGet       = 300      // results in one get
	MaxWrite     = 300      // records in one write
	MaxID        = 128      // bytes in one record id
	TreePartSize = 15 << 10 // bytes of stored tree per part record
)

// Record ids and metadata keys of the layout.
const (
	TreeID        = "__path_tree__"
	KeyPage       = "page"
	KeyChunkIndex = "chunk_index"
	KeyPageSHA    = "page_sha256"
	// KeyChunkLine is the line of its page a text chunk begins on (from
	// 1), written by chromafs-ingest: a search numbers the lines it shows
	// of a chunk without reading the page. Optional.
	KeyChunkLine = "chunk_line"
	// KeyChunkEncoding is "base64" on the chunks of a binary page (bytes
	// that are not UTF-8 text): the document is the base64 of the chunk's
	// bytes. Text chunks do not carry it, so full-text filters still work
	// on them.
	KeyChunkEncoding = "chunk_encoding"
	EncodingBase64   = "base64"
	KeyFormat        = "chromafs_format"
	KeyTreeSHA       = "chromafs_tree_sha256"
	KeyTreeParts     = "chromafs_tree_parts"
	KeyTreeBytes     = "chromafs_tree_bytes"
	KeyTreePart      = "chromafs_tree_part"
	// KeyIndexRecords, on the header of a tree chromafs-ingest index wrote,
	// is how many records the collection held once the index was written
	// (the tool's records and the tree's own): a different count later
	// means the other tool added or removed records since.
	KeyIndexRecords = "chromafs_index_records"
	FormatVersion   = 1

	// KeyOwner marks every record chromafs-ingest writes (chunks, tree
	// header, tree parts) with the value OwnerIngest. Ingest overwrites and
	// deletes only records that carry it; a record without it belongs to
	// another writer, whatever its id looks like.
	KeyOwner    = "chromafs_owner"
	OwnerIngest = "chromafs-ingest"
)

// Owned reports whether md carries chromafs-ingest's ownership mark.
func Owned(md metadata) bool {
	if md == nil {
		return false
	}
	v, ok := md.GetString(KeyOwner)
	return ok && v == OwnerIngest
}

func ownerMark() *v2.MetaAttribute { return v2.NewStringAttribute(KeyOwner, OwnerIngest) }

// ChunkID is the id chromafs-ingest gives chunk i of a page version. It
// includes the content hash, so a new version is written beside the old one
// and the old stays readable until the new tree replaces it. It is
// `<slug>#<i>@<sha16>` when that fits MaxID (Chroma Cloud refuses longer
// ids), else `~<first 32 hex digits of SHA-256(slug)>#<i>@<sha16>`, which
// always does (at most 74 bytes); the two forms could only meet through a
// 128-bit SHA-256 preimage. Readers that miss an id fall back to the
// page's metadata, so collections written with longer ids still read.
func ChunkID(slug, sha string, i int) string {
	id := fmt.Sprintf("%s#%d@%s", slug, i, shortSHA(sha))
	if len(id) <= MaxID {
		return id
	}
	sum := sha256.Sum256([]byte(slug))
	return fmt.Sprintf("~%s#%d@%s", hex.EncodeToString(sum[:16]), i, shortSHA(sha))
}

// treePartID is the id of part k of the stored tree whose digest is sha.
func treePartID(sha string, k int) string {
	return fmt.Sprintf("%s#%s#%d", TreeID, shortSHA(sha), k)
}

func shortSHA(sha string) string {
	if len(sha) > 16 {
		return sha[:16]
	}
	return sha
}

// chunkIndex reads chunk_index, which readers accept as an integer or as a
// decimal string.
func chunkIndex(md metadata) (int, error) {
	if md == nil {
		return 0, fmt.Errorf("no metadata")
	}
	if i, ok := md.GetInt(KeyChunkIndex); ok {
		return checkIndex(float64(i))
	}
	if f, ok := md.GetFloat(KeyChunkIndex); ok {
		return checkIndex(f)
	}
	if s, ok := md.GetString(KeyChunkIndex); ok {
		n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 31)
		if err != nil {
			return 0, fmt.Errorf("chunk_index %q is not a decimal integer", s)
		}
		return int(n), nil
	}
	return 0, fmt.Errorf("chunk_index missing")
}

func checkIndex(f float64) (int, error) {
	if f < 0 || f != math.Trunc(f) || f > math.MaxInt32 {
		return 0, fmt.Errorf("chunk_index %v is not a non-negative integer", f)
	}
	return int(f), nil
}
