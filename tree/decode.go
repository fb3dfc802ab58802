package tree

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	json "github.com/goccy/go-json"
)

// Limits bound what a tree document may cost to decode.
type Limits struct {
	// MaxDecoded caps the decompressed JSON size in bytes (gzip bombs).
	MaxDecoded int64
	// MaxEntries caps the number of pages.
	MaxEntries int
	// MaxDepth caps the number of components in a path.
	MaxDepth int
	// MaxWarnings caps how many warnings are kept; the rest are counted.
	MaxWarnings int
}

// DefaultLimits are generous for documentation and small for an attacker.
var DefaultLimits = Limits{
	MaxDecoded:  512 << 20,
	MaxEntries:  5_000_000,
	MaxDepth:    128,
	MaxWarnings: 100,
}

// ErrInvalid is wrapped by every error that rejects a whole tree document.
var ErrInvalid = errors.New("invalid path tree")

// Doc is a decoded tree document: every page that could be read, by slug.
type Doc struct {
	list    []item           // the readable entries, sorted by slug
	entries map[string]Entry // by slug, built on the first Entries call
	// Version identifies the content of the tree: the hex SHA-256 of the
	// decoded JSON. Cache keys include it so they never change meaning.
	Version  string
	Warnings Warnings
	kinds    bool // some entry is a directory or a symbolic link
}

// item is one entry of a document as decoded: ok=false when it must be
// skipped, warn any problem found.
type item struct {
	slug string
	e    Entry
	ok   bool
	warn string
}

// Len is the number of readable entries.
func (d *Doc) Len() int { return len(d.list) }

// Entries returns the readable entries by slug (a map built once, on the
// first call: mounting needs only the sorted list).
func (d *Doc) Entries() map[string]Entry {
	if d.entries == nil {
		d.entries = make(map[string]Entry, len(d.list))
		for i := range d.list {
			d.entries[d.list[i].slug] = d.list[i].e
		}
	}
	return d.entries
}

// Warnings collects per-entry problems, keeping at most a fixed number.
type Warnings struct {
	List    []string
	Dropped int
	max     int
}

func (w *Warnings) add(format string, args ...any) {
	if w.max > 0 && len(w.List) >= w.max {
		w.Dropped++
		return
	}
	w.List = append(w.List, fmt.Sprintf(format, args...))
}

// Count is the total number of warnings, kept or dropped.
func (w *Warnings) Count() int { return len(w.List) + w.Dropped }

// Decode parses a tree document: base64(gzip(JSON)), or plain JSON when the
// document starts with '{' (after optional white space).
func Decode(doc []byte, lim Limits) (*Doc, error) {
	trimmed := bytes.TrimSpace(doc)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		if int64(len(trimmed)) > lim.MaxDecoded {
			return nil, fmt.Errorf("%w: %d bytes of JSON exceed the %d-byte limit", ErrInvalid, len(trimmed), lim.MaxDecoded)
		}
		return decodeJSON(wholeFeed(trimmed), lim)
	}
	gz := make([]byte, base64.StdEncoding.DecodedLen(len(trimmed)))
	n, err := base64.StdEncoding.Decode(gz, trimmed)
	if err != nil {
		return nil, fmt.Errorf("%w: neither JSON nor base64: %v", ErrInvalid, err)
	}
	return decodeJSON(inflate(gz[:n], lim.MaxDecoded), lim)
}

// gunzippedSize is what gzip data gz says it holds (the trailer's size,
// modulo 4 GiB), at most 32 times its length (a tree's JSON compresses
// 3-33x): a guess to size the buffer and the entries' list with, never
// trusted, which a hostile trailer cannot make larger than that.
func gunzippedSize(gz []byte) int64 {
	if len(gz) < 18 { // a header and a trailer
		return 0
	}
	n := int64(binary.LittleEndian.Uint32(gz[len(gz)-4:]))
	return min(n, 32*int64(len(gz)))
}

// decodeJSON reads the entries of the JSON f gives, as it comes; an
// error of f's (its gzip) comes first.
func decodeJSON(f feed, lim Limits) (*Doc, error) {
	items, ok := scanTree(f)
	raw, version, err := f.all()
	if err != nil {
		return nil, err
	}
	if ok {
		items = sortUnique(items)
	} else if items, err = decodeGeneral(raw); err != nil {
		return nil, err
	}
	return newDoc(version, items, lim)
}

// newDoc keeps the readable entries of a document of the given version
// (items sorted by slug, unique) and their warnings.
func newDoc(version string, items []item, lim Limits) (*Doc, error) {
	if lim.MaxEntries > 0 && len(items) > lim.MaxEntries {
		return nil, fmt.Errorf("%w: %d entries exceed the limit of %d", ErrInvalid, len(items), lim.MaxEntries)
	}
	d := &Doc{Version: version}
	d.Warnings.max = lim.MaxWarnings
	kept := items[:0]
	for i := range items {
		it := &items[i]
		if it.warn != "" {
			d.Warnings.add("%q: %s", it.slug, it.warn)
		}
		if it.ok {
			kept = append(kept, *it)
			d.kinds = d.kinds || it.e.Type != TypeFile
		}
	}
	d.list = slices.Clip(kept)
	return d, nil
}

// decodeGeneral reads a tree document the scanner does not take, with a
// general JSON decoder: the entries sorted by slug.
func decodeGeneral(raw []byte) (items []item, err error) {
	defer func() { // the JSON decoder is a dependency: never let it take the mount down
		if r := recover(); r != nil {
			items, err = nil, fmt.Errorf("%w: JSON decoder failed: %v", ErrInvalid, r)
		}
	}()
	var top map[string]*wire
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, fmt.Errorf("%w: JSON: %v", ErrInvalid, err)
	}
	if top == nil {
		return nil, fmt.Errorf("%w: top level is null, want an object keyed by slug", ErrInvalid)
	}
	items = make([]item, 0, len(top))
	for _, slug := range sortedKeys(top) {
		w := top[slug]
		if w == nil { // a JSON null
			w = &wire{notObj: true}
		}
		items = append(items, newItem(strings.Clone(slug), w)) // keys may point into the decoder's copy of raw
	}
	return items, nil
}

func newItem(slug string, w *wire) item {
	e, ok, warn := decodeEntry(w)
	return item{slug: slug, e: e, ok: ok, warn: warn}
}

// sortUnique sorts items by slug, keeping the last of equal slugs (a JSON
// object's later member wins). A tree chromafs-ingest wrote is sorted
// already: one pass checks.
func sortUnique(items []item) []item {
	bySlug := func(a, b item) int { return strings.Compare(a.slug, b.slug) }
	if !slices.IsSortedFunc(items, bySlug) {
		slices.SortStableFunc(items, bySlug)
	}
	out := items[:0]
	for i := range items {
		if i+1 < len(items) && items[i+1].slug == items[i].slug {
			continue
		}
		out = append(out, items[i])
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
