package tree

import (
	"encoding/json"
	"fmt"
)

// Entry is one page of the path tree, as stored in the collection.
//
// IsPublic and Groups are Mintlify's access fields. The others are written by
// chromafs-ingest and are optional for readers: a foreign tree has none of
// them, and then the page is shown at "<slug>.mdx" with a size computed from
// its chunks.
type Entry struct {
	IsPublic bool     `json:"isPublic"`
	Groups   []string `json:"groups"`
	// Path is the display path relative to the mount root, with its real
	// extension. Empty means "<slug>.mdx".
	Path string `json:"path,omitempty"`
	// Size is the page's byte size; nil when unknown.
	Size *int64 `json:"size,omitempty"`
	// Mtime is the modification time in Unix seconds.
	Mtime int64 `json:"mtime,omitempty"`
	// Chunks holds the byte length of each chunk, by chunk_index.
	Chunks []int64 `json:"chunks,omitempty"`
	// SHA256 is the hex digest of the page's content; chunks written for
	// this version carry it in their page_sha256 metadata.
	SHA256 string `json:"sha256,omitempty"`
	// URI is an optional lazy pointer: the content is fetched from it on
	// first read instead of from the chunks.
	URI string `json:"uri,omitempty"`

	// aclOK is false when an access field was present but malformed; such
	// an entry is never visible.
	aclOK bool
}

// DisplayPath is the path at which the page appears in the mount.
func (e *Entry) DisplayPath(slug string) string {
	if e.Path != "" {
		return e.Path
	}
	return slug + ".mdx"
}

// decodeEntry parses one entry leniently. It returns ok=false when the entry
// must be skipped; warn describes any problem found.
func decodeEntry(raw json.RawMessage) (e Entry, ok bool, warn string) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return e, false, "entry is not a JSON object"
	}
	e.aclOK = true
	if w := decodeACL(&e, fields); w != "" {
		e.aclOK = false
		warn = w
	}
	if w := decodeLayout(&e, fields); w != "" {
		return e, false, w
	}
	return e, true, warn
}

func decodeACL(e *Entry, f map[string]json.RawMessage) string {
	if raw, ok := f["isPublic"]; ok {
		if err := json.Unmarshal(raw, &e.IsPublic); err != nil {
			return fmt.Sprintf("isPublic is not a boolean (%.40s): hidden", raw)
		}
	}
	if raw, ok := f["groups"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &e.Groups); err != nil {
			e.Groups = nil
			return fmt.Sprintf("groups is not a list of strings (%.40s): hidden", raw)
		}
	}
	return ""
}

func decodeLayout(e *Entry, f map[string]json.RawMessage) string {
	if err := optional(f, "path", &e.Path); err != nil {
		return "path is not a string"
	}
	if raw, ok := f["size"]; ok && string(raw) != "null" {
		var n int64
		if err := json.Unmarshal(raw, &n); err != nil || n < 0 {
			return fmt.Sprintf("size is not a non-negative integer (%.40s)", raw)
		}
		e.Size = &n
	}
	if err := optional(f, "mtime", &e.Mtime); err != nil {
		return "mtime is not an integer"
	}
	if err := optional(f, "chunks", &e.Chunks); err != nil {
		return "chunks is not a list of integers"
	}
	if err := optional(f, "sha256", &e.SHA256); err != nil {
		return "sha256 is not a string"
	}
	if err := optional(f, "uri", &e.URI); err != nil {
		return "uri is not a string"
	}
	return checkChunks(e)
}

func checkChunks(e *Entry) string {
	if len(e.Chunks) == 0 {
		return ""
	}
	var sum int64
	for _, n := range e.Chunks {
		if n < 0 {
			return "negative chunk length"
		}
		sum += n
	}
	if e.Size == nil {
		e.Size = &sum
	} else if *e.Size != sum {
		return fmt.Sprintf("size %d does not match the sum of its chunk lengths %d", *e.Size, sum)
	}
	return ""
}

func optional(f map[string]json.RawMessage, key string, dst any) error {
	raw, ok := f[key]
	if !ok || string(raw) == "null" {
		return nil
	}
	return json.Unmarshal(raw, dst)
}
