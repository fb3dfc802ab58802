package lexical

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"unicode/utf8"
)

// The encoded form:
//
//	magic "CFSLEX", version byte, tokenizer fingerprint (4 bytes, LE)
//	pages:    count, then each: name length, name
//	passages: count, then each: page, offset, length in bytes, length in tokens
//	terms:    count, then each in ascending order: length, term, df,
//	          length of its postings, its postings (as in Index.post)
//	CRC-32C of all the above (4 bytes, LE)
//
// Every number but the fixed-size ones is an unsigned varint.
const (
	magic   = "CFSLEX"
	version = 1
	header  = len(magic) + 1 + 4
	trailer = 4
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrInvalid is what every error of Unmarshal wraps.
var ErrInvalid = errors.New("lexical: not a valid index")

// MarshalBinary encodes the index. It fails only for a page name that is not
// valid UTF-8, which Unmarshal would refuse.
func (ix *Index) MarshalBinary() ([]byte, error) {
	size := header + trailer + 3*binary.MaxVarintLen64 + len(ix.terms) + len(ix.post) +
		len(ix.passPage)*(2*binary.MaxVarintLen32+binary.MaxVarintLen64) + len(ix.df)*(3*binary.MaxVarintLen32)
	size += ix.Pages()*binary.MaxVarintLen32 + len(ix.names)
	out := make([]byte, 0, size)
	out = append(out, magic...)
	out = append(out, version)
	out = binary.LittleEndian.AppendUint32(out, tokenizerPrint)

	out = binary.AppendUvarint(out, uint64(ix.Pages()))
	for i := range ix.Pages() {
		n := ix.name(uint32(i))
		if !utf8.ValidString(n) {
			return nil, fmt.Errorf("lexical: name of page %d is not valid UTF-8: %q", i, n)
		}
		out = binary.AppendUvarint(out, uint64(len(n)))
		out = append(out, n...)
	}
	out = binary.AppendUvarint(out, uint64(len(ix.passPage)))
	for i := range ix.passPage {
		out = binary.AppendUvarint(out, uint64(ix.passPage[i]))
		out = binary.AppendUvarint(out, uint64(ix.passOff[i]))
		out = binary.AppendUvarint(out, uint64(ix.passLen[i]))
		out = binary.AppendUvarint(out, uint64(ix.passDL[i]))
	}
	out = binary.AppendUvarint(out, uint64(len(ix.df)))
	for i := range ix.df {
		t := ix.term(i)
		out = binary.AppendUvarint(out, uint64(len(t)))
		out = append(out, t...)
		out = binary.AppendUvarint(out, uint64(ix.df[i]))
		p := ix.post[ix.postOff[i]:ix.postOff[i+1]]
		out = binary.AppendUvarint(out, uint64(len(p)))
		out = append(out, p...)
	}
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, crcTable)), nil
}

// Unmarshal decodes an index MarshalBinary encoded. It checks everything
// and returns an error wrapping [ErrInvalid] on bytes that are not a valid
// index. Every count is bounded by the bytes that must follow it, so that
// what it allocates is at most about ten times len(data) whatever the
// lengths in it claim. It does not keep data.
func Unmarshal(data []byte) (*Index, error) {
	if len(data) < header+trailer {
		return nil, invalid("%d bytes is too short", len(data))
	}
	if string(data[:len(magic)]) != magic {
		return nil, invalid("no magic header")
	}
	if v := data[len(magic)]; v != version {
		return nil, invalid("format version %d, want %d", v, version)
	}
	body, sum := data[:len(data)-trailer], binary.LittleEndian.Uint32(data[len(data)-trailer:])
	if got := crc32.Checksum(body, crcTable); got != sum {
		return nil, invalid("checksum %08x, want %08x", got, sum)
	}
	if p := binary.LittleEndian.Uint32(data[len(magic)+1:]); p != tokenizerPrint {
		return nil, invalid("built by another tokenizer (%08x, this one is %08x)", p, tokenizerPrint)
	}
	return decode(body[header:])
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}

// decoder reads uvarints and byte strings off a buffer; the first failure
// sticks.
type decoder struct {
	p   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = invalid(format, args...)
	}
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Uvarint(d.p)
	if n <= 0 {
		d.fail("%s: bad varint", what)
		return 0
	}
	d.p = d.p[n:]
	return x
}

// count reads a number of items each at least min bytes long, which bounds
// it by what is left.
func (d *decoder) count(what string, min int, max uint64) int {
	n := d.uvarint(what)
	if d.err == nil && (n > uint64(len(d.p)/min) || n > max) {
		d.fail("%s: %d is more than the data can hold", what, n)
		return 0
	}
	return int(n)
}

func (d *decoder) bytes(what string) []byte {
	n := d.uvarint(what)
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.p)) {
		d.fail("%s: length %d beyond the end", what, n)
		return nil
	}
	b := d.p[:n]
	d.p = d.p[n:]
	return b
}

func decode(p []byte) (*Index, error) {
	d := &decoder{p: p}
	ix := &Index{}

	// Pages: their names in one string.
	nPages := d.count("pages", 1, math.MaxUint32)
	if d.err != nil {
		return nil, d.err
	}
	ix.nameOff = make([]uint32, nPages+1)
	var names []byte
	for i := range nPages {
		n := d.bytes("page name")
		if d.err != nil {
			return nil, fmt.Errorf("page %d: %w", i, d.err)
		}
		if !utf8.Valid(n) {
			return nil, invalid("page %d: name is not valid UTF-8", i)
		}
		names = append(names, n...)
		if uint64(len(names)) > math.MaxUint32 {
			return nil, invalid("names beyond 4 GiB")
		}
		ix.nameOff[i+1] = uint32(len(names))
	}
	ix.names = string(names)

	// Passages.
	nPass := d.count("passages", 4, math.MaxUint32)
	if d.err != nil {
		return nil, d.err
	}
	ix.passPage = make([]uint32, nPass)
	ix.passOff = make([]int64, nPass)
	ix.passLen = make([]int64, nPass)
	ix.passDL = make([]uint32, nPass)
	for i := range nPass {
		pg := d.uvarint("passage page")
		off := d.uvarint("passage offset")
		n := d.uvarint("passage length")
		dl := d.uvarint("passage tokens")
		switch {
		case d.err != nil:
			return nil, fmt.Errorf("passage %d: %w", i, d.err)
		case pg >= uint64(nPages):
			return nil, invalid("passage %d: page %d of %d", i, pg, nPages)
		case off > math.MaxInt64 || n > math.MaxInt64-off:
			return nil, invalid("passage %d: bytes [%d, +%d) overflow", i, off, n)
		case dl > math.MaxUint32:
			return nil, invalid("passage %d: %d tokens", i, dl)
		}
		ix.passPage[i], ix.passOff[i], ix.passLen[i], ix.passDL[i] = uint32(pg), int64(off), int64(n), uint32(dl)
	}

	// Terms and postings. seen sums each passage's frequencies, to be
	// checked against its length.
	nTerms := d.count("terms", 4, math.MaxUint32)
	if d.err != nil {
		return nil, d.err
	}
	seen := make([]uint64, nPass)
	ix.termOff = make([]uint32, nTerms+1)
	ix.df = make([]uint32, nTerms)
	ix.postOff = make([]uint32, nTerms+1)
	// The postings are most of what is left: room for them at once.
	post := make([]byte, 0, len(d.p))
	var terms, prev []byte
	for i := range nTerms {
		t := d.bytes("term")
		df := d.count("document frequency", 2, uint64(nPass))
		pb := d.bytes("postings")
		if d.err != nil {
			return nil, fmt.Errorf("term %d: %w", i, d.err)
		}
		switch {
		case !utf8.Valid(t):
			return nil, invalid("term %d is not valid UTF-8", i)
		case i > 0 && bytes.Compare(t, prev) <= 0:
			return nil, invalid("term %d is not after term %d", i, i-1)
		case df == 0:
			return nil, invalid("term %d has no postings", i)
		}
		prev = t
		if err := checkPostings(pb, df, seen); err != nil {
			return nil, fmt.Errorf("term %d: %w", i, err)
		}
		terms = append(terms, t...)
		post = append(post, pb...)
		if uint64(len(terms)) > math.MaxUint32 || uint64(len(post)) > math.MaxUint32 {
			return nil, invalid("beyond 4 GiB")
		}
		ix.termOff[i+1] = uint32(len(terms))
		ix.df[i] = uint32(df)
		ix.postOff[i+1] = uint32(len(post))
	}
	if len(d.p) != 0 {
		return nil, invalid("%d bytes after the terms", len(d.p))
	}
	for i, n := range seen {
		if n != uint64(ix.passDL[i]) {
			return nil, invalid("passage %d: %d tokens, its postings hold %d", i, ix.passDL[i], n)
		}
	}
	ix.terms = string(terms)
	ix.post = slices.Clone(post) // without append's spare capacity
	ix.finish()
	return ix, nil
}

// checkPostings checks one term's postings: df pairs, nothing after, passage
// ids ascending and in range, frequencies at least 1. It adds the
// frequencies to seen, by passage.
func checkPostings(p []byte, df int, seen []uint64) error {
	d := &decoder{p: p}
	var pass uint64
	for j := range df {
		delta := d.uvarint("passage")
		tf := d.uvarint("frequency")
		switch {
		case d.err != nil:
			return fmt.Errorf("posting %d: %w", j, d.err)
		case j > 0 && delta == 0:
			return invalid("posting %d: passage repeated", j)
		case delta >= uint64(len(seen)) || pass+delta >= uint64(len(seen)):
			return invalid("posting %d: passage %d+%d of %d", j, pass, delta, len(seen))
		case tf == 0 || tf > math.MaxUint32:
			return invalid("posting %d: frequency %d", j, tf)
		}
		pass += delta
		seen[pass] += tf
	}
	if len(d.p) != 0 {
		return invalid("%d bytes after %d postings", len(d.p), df)
	}
	return nil
}
