package hostcache

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/chromafs/chromafs/cache"
)

// An entry, on disk or in a remote tier, is a header — magic, collection,
// page digest, part, size, each on its own line, then the SHA-256 of the
// content — followed by the content compressed with zstd.

// magic starts every entry.
const magic = "chromafs-page-v1\n"

// MaxPage is the largest page the page decoder takes (and the most a
// corrupt entry of a page can make Decode decompress).
const MaxPage = 64 << 20

// MaxEntry is the largest content of any entry: a big tree's stored text
// or snapshot (a 1,000,000-page tree's snapshot is ~135 MB). Entries over
// MaxPage are decoded by a decoder of their own, bounded by MaxEntry.
const MaxEntry = 1 << 30

// codec is the host's one encoder and page decoder. The encoder's window
// is 1 MiB (its default is 8 MiB): it keeps a history of about its
// window and of the largest entry it encoded for the life of the
// process (measured: 3.5 instead of 9.6 MiB kept after an 8 MiB entry),
// and pages are mostly far smaller than a window; only a big page or
// tree snapshot may find fewer repeats.
var codec = sync.OnceValues(func() (*zstd.Encoder, *zstd.Decoder) {
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20))
	if err != nil {
		panic(err) // only for invalid options
	}
	return enc, newDecoder(MaxPage)
})

var largeDecoder = sync.OnceValue(func() *zstd.Decoder { return newDecoder(MaxEntry) })

func newDecoder(maxMemory uint64) *zstd.Decoder {
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxMemory), zstd.WithDecoderConcurrency(0))
	if err != nil {
		panic(err) // only for invalid options
	}
	return dec
}

// decoderFor returns the decoder for content of size bytes.
func decoderFor(size int64) *zstd.Decoder {
	if size > MaxPage {
		return largeDecoder()
	}
	_, dec := codec()
	return dec
}

// Encode makes the entry for page (or part) k. ok is false when k names a
// whole page whose digest is not that of data: such an entry is never made.
func Encode(k cache.PageKey, data []byte) (entry []byte, ok bool) {
	return AppendEntry(nil, k, data)
}

// AppendEntry appends the entry for page (or part) k to dst, as Encode
// makes it, growing dst once at most (to what the entry may take: the
// compressor's output grows by doubling otherwise).
func AppendEntry(dst []byte, k cache.PageKey, data []byte) (entry []byte, ok bool) {
	sum := hexDigest(data)
	if k.SHA256 == "" || len(data) > MaxEntry || (k.Part == "" && string(sum[:]) != k.SHA256) {
		return nil, false
	}
	hdr := header(k, int64(len(data)))
	// zstd's bound for incompressible input: the data, a few bytes per
	// block of 128 KiB, and a frame header
	dst = slices.Grow(dst, len(hdr)+len(sum)+1+len(data)+len(data)>>10+64)
	dst = append(append(append(dst, hdr...), sum[:]...), '\n')
	enc, _ := codec()
	return enc.EncodeAll(data, dst), true
}

// Decode checks an entry's header against k and size, decompresses it and
// verifies length and digest: anything else is an error, never wrong bytes.
func Decode(raw []byte, k cache.PageKey, size int64) ([]byte, error) {
	raw, ok := cutHeader(raw, k, size)
	if !ok {
		return nil, errors.New("header does not match")
	}
	nl := bytes.IndexByte(raw, '\n')
	if nl != sha256.Size*2 {
		return nil, errors.New("header has no content digest")
	}
	sum := raw[:nl]
	if k.Part == "" && string(sum) != k.SHA256 {
		return nil, errors.New("content digest is not the page's")
	}
	if size < 0 || size > MaxEntry {
		return nil, fmt.Errorf("size %d out of range", size)
	}
	data, err := decoderFor(size).DecodeAll(raw[nl+1:], make([]byte, 0, size))
	if err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	if int64(len(data)) != size {
		return nil, fmt.Errorf("%d bytes, want %d", len(data), size)
	}
	if got := hexDigest(data); !bytes.Equal(got[:], sum) {
		return nil, errors.New("sha256 does not match")
	}
	return data, nil
}

// cutHeader returns what follows header(k, size) in raw, and whether raw
// begins with it, allocating nothing (every read of the tier checks one).
func cutHeader(raw []byte, k cache.PageKey, size int64) ([]byte, bool) {
	var num [20]byte
	for _, want := range headerFields(k) {
		var ok bool
		if raw, ok = cutPrefix(raw, want); !ok {
			return nil, false
		}
	}
	n := strconv.AppendInt(num[:0], size, 10)
	if !bytes.HasPrefix(raw, n) {
		return nil, false
	}
	return cutPrefix(raw[len(n):], "\n")
}

func cutPrefix(b []byte, prefix string) ([]byte, bool) {
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return nil, false
	}
	return b[len(prefix):], true
}

// header is the part of an entry's header that Get knows in advance (its
// fields, then the size and a newline); the content digest follows it on
// its own line.
func header(k cache.PageKey, size int64) []byte {
	var b []byte
	for _, f := range headerFields(k) {
		b = append(b, f...)
	}
	return append(strconv.AppendInt(b, size, 10), '\n')
}

// headerFields are the header's first parts, in order: one layout for
// header and cutHeader.
func headerFields(k cache.PageKey) [7]string {
	return [...]string{magic, k.Collection, "\n", k.SHA256, "\n", k.Part, "\n"}
}

// hexDigest is data's SHA-256 in hex, as entries and keys spell it, on the
// stack.
func hexDigest(data []byte) (h [2 * sha256.Size]byte) {
	sum := sha256.Sum256(data)
	hex.Encode(h[:], sum[:])
	return h
}
