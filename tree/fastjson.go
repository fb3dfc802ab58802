package tree

import (
	"strings"
	"unicode/utf8"

	json "github.com/goccy/go-json"
)

// The stored tree is one JSON object of up to millions of entries. A
// general decoder spends most of a big tree's load building the raw field
// values of every entry (and keeps the whole document alive through the
// keys it hands out); this scanner only finds where each entry's known
// fields lie — sub-slices of the document, nothing copied — and hands
// them to decodeEntry at once, exactly as the general decoder's are.
//
// It takes the common case and nothing else: strict JSON with plainly
// spelled field names (a slug with escapes or non-ASCII bytes is decoded
// by the general decoder, alone). Anything else — a syntax error, a field
// name the general decoder would match case-insensitively, nesting deeper
// than maxScanDepth — makes it give up, and the general decoder reads the
// whole document, errors included. FuzzFastScan
// checks both agree wherever the scanner answers.

// scanTree returns the entries of the document f gives, decoded, in
// document order, or ok=false when the general decoder must read it
// instead. It reads f as it comes (inflate.go): each step below that
// fails where the final bytes end is read again once there are more, and
// succeeds only where more bytes could not change what it read (a value
// that is not an object, a number perhaps, is read to the byte after it).
func scanTree(f feed) (out []item, ok bool) {
	s := scanner{b: f.bytes()}
	if !s.step(f, func() bool { s.ws(); return s.eat('{') }) {
		return nil, false
	}
	out = make([]item, 0, estimateEntries(f.size()))
	closed := false
	if !s.step(f, func() bool { s.ws(); closed = s.eat('}'); return closed || s.i < len(s.b) }) {
		return nil, false
	}
	for !closed {
		var slug string
		var w wire
		if !s.step(f, func() bool {
			var ok bool
			w = wire{}
			slug, ok = s.key()
			return ok && s.entry(&w) && s.i < len(s.b) // a number ends at the byte after it
		}) {
			return nil, false
		}
		out = append(out, newItem(slug, &w))
		if !s.step(f, func() bool {
			s.ws()
			closed = s.eat('}')
			if closed || !s.eat(',') {
				return closed
			}
			s.ws()
			return s.i < len(s.b)
		}) {
			return nil, false
		}
	}
	if raw, _, _ := f.all(); len(raw) > len(s.b) { // only white space may follow
		s.b = raw
	}
	return out, s.end()
}

// step runs read from where the scanner is; when it fails, and more of
// the document comes, it runs it again from there on the longer prefix.
// Each retry waits for at least as many new bytes as read had (so a long
// value is read again a logarithmic number of times, not once per
// publication).
func (s *scanner) step(f feed, read func() bool) bool {
	start := s.i
	for {
		if read() {
			return true
		}
		b, more := f.grow(len(s.b), len(s.b)+max(len(s.b)-start, 1))
		if !more {
			return false
		}
		s.b, s.i, s.depth = b, start, 0
	}
}

// estimateEntries guesses the number of entries from the document's size
// (a chromafs-ingest entry is ~250 bytes of JSON), to allocate once.
func estimateEntries(size int) int { return size/200 + 1 }

type scanner struct {
	b     []byte
	i     int
	depth int // of the value being skipped
}

// maxScanDepth bounds the nesting the scanner follows (a deeper document
// goes to the general decoder): an entry's fields nest two levels.
const maxScanDepth = 32

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *scanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// end accepts only white space after the top-level value.
func (s *scanner) end() bool {
	s.ws()
	return s.i == len(s.b)
}

// key reads `"slug"` and the colon after it.
func (s *scanner) key() (string, bool) {
	start := s.i
	if !s.str() {
		return "", false
	}
	body := s.b[start+1 : s.i-1]
	if !s.colon() {
		return "", false
	}
	if plainString(body) {
		return string(body), true
	}
	var slug string // escapes or non-ASCII: the general decoder's rules
	if err := json.Unmarshal(s.b[start:start+len(body)+2], &slug); err != nil {
		return "", false
	}
	return strings.Clone(slug), true
}

// plainString reports whether a string's body is printable ASCII without
// escapes, the bytes that decode to themselves.
func plainString(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c >= utf8.RuneSelf || c == '\\' {
			return false
		}
	}
	return true
}

// entry reads one entry's value: an object's known fields into w, or
// anything else as not an object (the entry is skipped with a warning).
func (s *scanner) entry(w *wire) bool {
	if s.i >= len(s.b) || s.b[s.i] != '{' {
		if !s.value() {
			return false
		}
		w.notObj = true
		return true
	}
	s.i++
	return s.list('}', func() bool {
		start := s.i
		if !s.str() {
			return false
		}
		name := s.b[start+1 : s.i-1]
		if !s.colon() {
			return false
		}
		vstart := s.i
		return s.value() && w.set(name, s.b[vstart:s.i])
	})
}

// fieldNames are the wire's JSON names, for the case-insensitive check.
var fieldNames = []string{"isPublic", "groups", "path", "size", "mtime", "mtime_ns", "exec", "chunks",
	"sha256", "uri", "chunk_sha256", "type", "target", "records", "reassembly"}

// set records a field's raw value; a later duplicate wins, as in the
// general decoder. It returns false for a name that the general decoder
// would match to a field although it is spelled differently.
func (w *wire) set(name, v []byte) bool {
	var dst *json.RawMessage
	switch string(name) {
	case "isPublic":
		dst = &w.IsPublic
	case "groups":
		dst = &w.Groups
	case "path":
		dst = &w.Path
	case "size":
		dst = &w.Size
	case "mtime":
		dst = &w.Mtime
	case "mtime_ns":
		dst = &w.MtimeNs
	case "exec":
		dst = &w.Exec
	case "chunks":
		dst = &w.Chunks
	case "sha256":
		dst = &w.SHA256
	case "uri":
		dst = &w.URI
	case "chunk_sha256":
		dst = &w.ChunkSHA
	case "type":
		dst = &w.Type
	case "target":
		dst = &w.Target
	case "records":
		dst = &w.Records
	case "reassembly":
		dst = &w.Reassem
	default:
		return !foldsToField(name)
	}
	*dst = v
	return true
}

// foldsToField reports whether name could be a differently spelled field
// name (any case, escapes, non-ASCII letters that fold to ASCII ones).
func foldsToField(name []byte) bool {
	for _, c := range name {
		if c == '\\' || c >= utf8.RuneSelf {
			return true
		}
	}
	for _, f := range fieldNames {
		if strings.EqualFold(f, string(name)) {
			return true
		}
	}
	return false
}

// value skips one JSON value, checking its syntax.
func (s *scanner) value() bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.str()
	case c == '{', c == '[':
		if s.depth >= maxScanDepth {
			return false
		}
		s.depth++
		defer func() { s.depth-- }()
		if c == '{' {
			return s.object()
		}
		return s.array()
	case c == 't':
		return s.lit("true")
	case c == 'f':
		return s.lit("false")
	case c == 'n':
		return s.lit("null")
	case c == '-' || c >= '0' && c <= '9':
		return s.number()
	}
	return false
}

func (s *scanner) lit(l string) bool {
	if len(s.b)-s.i >= len(l) && string(s.b[s.i:s.i+len(l)]) == l {
		s.i += len(l)
		return true
	}
	return false
}

// str skips a string: no control characters, only JSON's escapes. Bytes
// that are not UTF-8 are left to decodeEntry, like the general decoder
// leaves them to it in raw values.
func (s *scanner) str() bool {
	if !s.eat('"') {
		return false
	}
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if !s.escape() {
				return false
			}
		default:
			s.i++
		}
	}
	return false
}

func (s *scanner) escape() bool {
	if s.i+1 >= len(s.b) {
		return false
	}
	switch s.b[s.i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.i += 2
		return true
	case 'u':
		if s.i+6 > len(s.b) {
			return false
		}
		for _, h := range s.b[s.i+2 : s.i+6] {
			if !isHex(h) {
				return false
			}
		}
		s.i += 6
		return true
	}
	return false
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// number skips a number as JSON spells it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *scanner) number() bool {
	s.eat('-')
	switch {
	case s.eat('0'):
	case s.digits() == 0:
		return false
	}
	if s.eat('.') && s.digits() == 0 {
		return false
	}
	if s.eat('e') || s.eat('E') {
		if !s.eat('+') {
			s.eat('-')
		}
		if s.digits() == 0 {
			return false
		}
	}
	return true
}

func (s *scanner) digits() int {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i - start
}

// list reads the elements of an object or array, whose opening byte is
// read, up to close: each by elem, separated by commas.
func (s *scanner) list(close byte, elem func() bool) bool {
	s.ws()
	if s.eat(close) {
		return true
	}
	for {
		if !elem() {
			return false
		}
		s.ws()
		if s.eat(close) {
			return true
		}
		if !s.eat(',') {
			return false
		}
		s.ws()
	}
}

// colon reads the colon after a member's name, and white space.
func (s *scanner) colon() bool {
	s.ws()
	if !s.eat(':') {
		return false
	}
	s.ws()
	return true
}

func (s *scanner) object() bool {
	s.i++ // '{'
	return s.list('}', func() bool { return s.str() && s.colon() && s.value() })
}

func (s *scanner) array() bool {
	s.i++ // '['
	return s.list(']', s.value)
}
