package ingest

import (
	"bytes"
	"unicode/utf8"
)

// MinChunkSize is the smallest chunk size Split accepts.
const MinChunkSize = 64

// Split cuts data into chunks of at most size bytes whose concatenation is
// data, byte for byte. Cuts fall on UTF-8 rune boundaries and prefer, in
// order, the start of a Markdown heading line, a blank line, a line end.
// Empty data gives no chunks.
func Split(data []byte, size int) [][]byte {
	size = max(size, MinChunkSize)
	var out [][]byte
	for len(data) > size {
		cut := cutPoint(data[:size+1])
		out = append(out, data[:cut])
		data = data[cut:]
	}
	if len(data) > 0 {
		out = append(out, data)
	}
	return out
}

// cuts are the preferred places to end a chunk, best first; keep is how
// many bytes of the separator stay with the chunk before.
var cuts = []struct {
	sep  []byte
	keep int
}{
	{[]byte("\n#"), 1},  // a heading starts the next chunk
	{[]byte("\n\n"), 2}, // a blank line ends this one
	{[]byte("\n"), 1},
}

// cutPoint picks where to end a chunk inside w (len(w) = size+1, so a cut
// at size is allowed). Preferred cuts must keep the chunk at least a
// quarter full, so small chunks do not multiply.
func cutPoint(w []byte) int {
	size := len(w) - 1
	floor := size / 4
	for _, c := range cuts {
		if i := bytes.LastIndex(w[:size], c.sep); i >= 0 && i+c.keep > floor {
			return i + c.keep
		}
	}
	return runeCut(w, size)
}

// runeCut backs off from size to the start of a rune. Invalid UTF-8 (which
// ingest rejects earlier) is cut at size.
func runeCut(w []byte, size int) int {
	for cut := size; cut > size-utf8.UTFMax && cut > 0; cut-- {
		if utf8.RuneStart(w[cut]) {
			return cut
		}
	}
	return size
}

// SplitBinary cuts the bytes of a binary page into chunks of at most 3/4
// of chunkSize (a multiple of 3), so that each chunk's base64 — its stored
// document — is at most chunkSize bytes.
func SplitBinary(data []byte, chunkSize int) [][]byte {
	size := max(chunkSize/4*3, 3)
	var out [][]byte
	for len(data) > 0 {
		n := min(size, len(data))
		out = append(out, data[:n])
		data = data[n:]
	}
	return out
}
