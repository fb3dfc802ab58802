package tree

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	json "github.com/goccy/go-json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
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
	// Mtime is the modification time in Unix seconds; MtimeNsec its
	// nanoseconds (0-999999999) where the source had them.
	Mtime     int64 `json:"mtime,omitempty"`
	MtimeNsec int64 `json:"mtime_ns,omitempty"`
	// Exec is the source file's executable bit: the file is 0555, not 0444.
	Exec bool `json:"exec,omitempty"`
	// Chunks holds the byte length of each chunk, by chunk_index.
	Chunks []int64 `json:"chunks,omitempty"`
	// SHA256 is the hex digest of the page's content; chunks written for
	// this version carry it in their page_sha256 metadata.
	SHA256 string `json:"sha256,omitempty"`
	// URI is an optional lazy pointer: the content is fetched from it
	// (http or https, ranged requests) instead of from chunks, and checked
	// against SHA256 and Size, or piece by piece against ChunkSHA256.
	URI string `json:"uri,omitempty"`
	// ChunkSHA256 holds the hex SHA-256 of each piece of a lazy page (the
	// byte ranges Chunks gives), so a ranged read is verified on its own.
	ChunkSHA256 []string `json:"chunk_sha256,omitempty"`
	// Type is "" for a file, TypeDir for a directory (an empty one, or the
	// attributes of one; path "." is the root) and TypeSymlink for a
	// symbolic link to Target.
	Type string `json:"type,omitempty"`
	// Target is a symbolic link's content, as readlink prints it: a
	// relative path that must resolve inside the tree, to something the
	// mount shows.
	Target string `json:"target,omitempty"`
	// Records maps a page onto records another tool wrote (a LangChain or
	// LlamaIndex collection indexed by chromafs-ingest index): chunk i is
	// bytes [From, To) of record ID's document. Chunks and ChunkSHA256
	// then give each part's length and digest.
	Records []Part `json:"records,omitempty"`
	// Reassembly says how a mapped page was put together when not exactly
	// ("joined", "gaps", "conflict", "unordered"; see package foreign); a
	// view that shows such a page lists it in its report (ReportPath).
	Reassembly string `json:"reassembly,omitempty"`

	// aclOK is false when an access field was present but malformed; such
	// an entry is never visible.
	aclOK bool
}

// Part is a byte range of one record's document (UTF-8), or, without an
// ID, literal Text that no record holds (a separator a splitter stripped).
type Part struct {
	ID   string `json:"id,omitempty"`
	From int64  `json:"from"`
	To   int64  `json:"to"`
	Text string `json:"text,omitempty"`
}

// Entry types (the "type" field).
const (
	TypeFile    = ""
	TypeDir     = "dir"
	TypeSymlink = "symlink"
)

// DisplayPath is the path at which the page appears in the mount.
func (e *Entry) DisplayPath(slug string) string {
	if e.Path != "" {
		return e.Path
	}
	return slug + ".mdx"
}

// wire is one entry as stored. Every field stays raw, so that one decode
// pass over the document reads all entries and a bad field is a problem of
// its own entry only.
type wire struct {
	IsPublic json.RawMessage `json:"isPublic"`
	Groups   json.RawMessage `json:"groups"`
	Path     json.RawMessage `json:"path"`
	Size     json.RawMessage `json:"size"`
	Mtime    json.RawMessage `json:"mtime"`
	MtimeNs  json.RawMessage `json:"mtime_ns"`
	Exec     json.RawMessage `json:"exec"`
	Chunks   json.RawMessage `json:"chunks"`
	SHA256   json.RawMessage `json:"sha256"`
	URI      json.RawMessage `json:"uri"`
	ChunkSHA json.RawMessage `json:"chunk_sha256"`
	Type     json.RawMessage `json:"type"`
	Target   json.RawMessage `json:"target"`
	Records  json.RawMessage `json:"records"`
	Reassem  json.RawMessage `json:"reassembly"`
	notObj   bool
}

// UnmarshalJSON accepts anything: a value that is not an object is
// recorded, to skip the entry, instead of failing the whole document.
func (w *wire) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || b[0] != '{' {
		w.notObj = true
		return nil
	}
	type plain wire
	return json.Unmarshal(b, (*plain)(w))
}

// decodeEntry checks one entry leniently. It returns ok=false when the
// entry must be skipped; warn describes any problem found.
func decodeEntry(w *wire) (e Entry, ok bool, warn string) {
	if w.notObj {
		return e, false, "entry is not a JSON object"
	}
	e.aclOK = true
	if msg := decodeACL(&e, w); msg != "" {
		e.aclOK = false
		warn = msg
	}
	if msg := decodeLayout(&e, w); msg != "" {
		return e, false, msg
	}
	return e, true, warn
}

func decodeACL(e *Entry, w *wire) string {
	switch string(w.IsPublic) {
	case "", "null", "false":
	case "true":
		e.IsPublic = true
	default:
		return fmt.Sprintf("isPublic is not a boolean (%.40s): hidden", w.IsPublic)
	}
	if len(w.Groups) > 0 && string(w.Groups) != "null" && string(w.Groups) != "[]" {
		if err := json.Unmarshal(w.Groups, &e.Groups); err != nil {
			e.Groups = nil
			return fmt.Sprintf("groups is not a list of strings (%.40s): hidden", w.Groups)
		}
	}
	return ""
}

func decodeLayout(e *Entry, w *wire) string {
	var err error
	if e.Path, err = rawString(w.Path); err != nil {
		return "path is not a string"
	}
	if len(w.Size) > 0 && string(w.Size) != "null" {
		n, err := strconv.ParseInt(string(w.Size), 10, 64)
		if err != nil || n < 0 {
			return fmt.Sprintf("size is not a non-negative integer (%.40s)", w.Size)
		}
		e.Size = &n
	}
	if len(w.Mtime) > 0 && string(w.Mtime) != "null" {
		if e.Mtime, err = strconv.ParseInt(string(w.Mtime), 10, 64); err != nil {
			return "mtime is not an integer"
		}
	}
	if len(w.MtimeNs) > 0 && string(w.MtimeNs) != "null" {
		if e.MtimeNsec, err = strconv.ParseInt(string(w.MtimeNs), 10, 64); err != nil || e.MtimeNsec < 0 || e.MtimeNsec > 999999999 {
			return "mtime_ns is not an integer from 0 to 999999999"
		}
	}
	switch string(w.Exec) {
	case "", "null", "false":
	case "true":
		e.Exec = true
	default:
		return "exec is not a boolean"
	}
	if len(w.Chunks) > 0 && string(w.Chunks) != "null" {
		if e.Chunks, err = rawInts(w.Chunks); err != nil {
			return "chunks is not a list of integers"
		}
	}
	if e.SHA256, err = rawString(w.SHA256); err != nil {
		return "sha256 is not a string"
	}
	if e.URI, err = rawString(w.URI); err != nil {
		return "uri is not a string"
	}
	if msg := decodeKind(e, w); msg != "" {
		return msg
	}
	if len(w.ChunkSHA) > 0 && string(w.ChunkSHA) != "null" {
		if err := json.Unmarshal(w.ChunkSHA, &e.ChunkSHA256); err != nil {
			return "chunk_sha256 is not a list of strings"
		}
	}
	if msg := decodeRecords(e, w); msg != "" {
		return msg
	}
	if e.Reassembly, err = rawString(w.Reassem); err != nil {
		return "reassembly is not a string"
	}
	if msg := checkChunks(e); msg != "" {
		return msg
	}
	return checkLazy(e)
}

// decodeRecords reads a mapped page's parts: each a non-empty id and a
// range 0 <= from <= to, whose lengths become the chunk lengths. A mapped
// page needs one digest per part, so that every part is verified.
func decodeRecords(e *Entry, w *wire) string {
	if len(w.Records) == 0 || string(w.Records) == "null" {
		return ""
	}
	if err := json.Unmarshal(w.Records, &e.Records); err != nil {
		return "records is not a list of {id, from, to}"
	}
	lens := make([]int64, len(e.Records))
	for i, r := range e.Records {
		switch {
		case r.ID == "" && r.Text != "":
			e.Records[i].From, e.Records[i].To = 0, int64(len(r.Text))
		case r.ID == "" || r.From < 0 || r.To < r.From:
			return fmt.Sprintf("records[%d]: want an id and 0 <= from <= to, or a text", i)
		}
		lens[i] = e.Records[i].To - e.Records[i].From
	}
	if e.Chunks != nil && !slices.Equal(e.Chunks, lens) {
		return "records and chunks give different lengths"
	}
	e.Chunks = lens
	if len(e.ChunkSHA256) != len(lens) {
		return "records without one chunk_sha256 per record: the parts could not be verified"
	}
	return checkDigests(e.ChunkSHA256)
}

// checkDigests requires hex SHA-256 digests: the pieces of lazy and mapped
// pages are verified against them.
func checkDigests(ds []string) string {
	for _, d := range ds {
		if !isDigest(d) {
			return "chunk_sha256 holds a value that is not a hex SHA-256"
		}
	}
	return ""
}

// decodeKind reads the entry's type and, for a symbolic link, its target.
func decodeKind(e *Entry, w *wire) string {
	var err error
	if e.Type, err = rawString(w.Type); err != nil {
		return "type is not a string"
	}
	if e.Target, err = rawString(w.Target); err != nil {
		return "target is not a string"
	}
	switch e.Type {
	case TypeFile:
		return ""
	case TypeDir:
		e.Size, e.Chunks, e.URI, e.SHA256, w.Records = nil, nil, "", "", nil
		return ""
	case TypeSymlink:
		e.Size, e.Chunks, e.URI, e.SHA256, w.Records = nil, nil, "", "", nil
		return checkTarget(e.Target)
	}
	return fmt.Sprintf("unknown type %.40q", e.Type)
}

// checkTarget accepts a symbolic link's target when it is relative, has no
// NUL byte and fits PATH_MAX; whether it resolves is decided once the tree
// is built.
func checkTarget(t string) string {
	switch {
	case t == "":
		return "symlink without a target"
	case t[0] == '/':
		return "symlink target is absolute"
	case len(t) > MaxPathLen:
		return fmt.Sprintf("symlink target of %d bytes exceeds %d", len(t), MaxPathLen)
	case strings.IndexByte(t, 0) >= 0:
		return "NUL byte in symlink target"
	}
	return ""
}

// checkLazy requires of a lazy pointer what its content is checked
// against: an http(s) URI, the size and the page's SHA-256, and, with
// piece lengths, a digest per piece.
func checkLazy(e *Entry) string {
	if e.URI == "" {
		if e.Records == nil {
			e.ChunkSHA256 = nil
		}
		return ""
	}
	switch {
	case !strings.HasPrefix(e.URI, "https://") && !strings.HasPrefix(e.URI, "http://"):
		return fmt.Sprintf("uri %.60q: only http:// and https:// are served", e.URI)
	case e.Size == nil || !isDigest(e.SHA256):
		return "lazy pointer without size and sha256: its content could not be verified"
	case e.Chunks != nil && len(e.ChunkSHA256) != len(e.Chunks):
		return "lazy pointer: chunk_sha256 does not give one digest per chunk"
	}
	return checkDigests(e.ChunkSHA256)
}

func isDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// rawString reads a JSON string, without the decoder when it has no
// escapes; absent and null are "".
func rawString(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if len(raw) >= 2 && raw[0] == '"' && raw[len(raw)-1] == '"' &&
		bytes.IndexByte(raw[1:len(raw)-1], '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

// rawInts reads a JSON list of integers, like [8192,8192,17], in one
// pass with the scanner (a large tree holds one per chunk: splitting and
// converting each was a fifth of its decode). It takes what
// strconv.ParseInt takes of each comma-separated element, JSON's white
// space around it: a decimal that fits an int64, with an optional sign.
func rawInts(raw json.RawMessage) ([]int64, error) {
	s := scanner{b: raw}
	s.ws()
	if !s.eat('[') {
		return nil, errNotList
	}
	out := make([]int64, 0, bytes.Count(raw, []byte(","))+1)
	if s.ws(); s.eat(']') {
		return out, s.endOf()
	}
	for {
		n, ok := s.int64()
		if !ok {
			return nil, errNotList
		}
		out = append(out, n)
		switch s.ws(); {
		case s.eat(']'):
			return out, s.endOf()
		case !s.eat(','):
			return nil, errNotList
		}
	}
}

// errNotList is rawInts' error; its caller says what the field should be.
var errNotList = errors.New("not a list of integers")

// endOf is rawInts' check that nothing but white space follows the list.
func (s *scanner) endOf() error {
	if !s.end() {
		return errNotList
	}
	return nil
}

// int64 reads a decimal integer with an optional sign, white space before
// it, as strconv.ParseInt does: false past an int64.
func (s *scanner) int64() (int64, bool) {
	s.ws()
	neg := s.eat('-')
	if !neg {
		s.eat('+')
	}
	const limit = uint64(1) << 63 // |MinInt64|
	var u uint64
	start := s.i
	for ; s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9'; s.i++ {
		d := uint64(s.b[s.i] - '0')
		if u > (limit-d)/10 {
			return 0, false // beyond any int64
		}
		u = u*10 + d
	}
	if s.i == start || !neg && u == limit {
		return 0, false
	}
	if neg {
		return -int64(u), true // u == limit gives MinInt64
	}
	return int64(u), true
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
