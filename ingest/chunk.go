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

// cutPoint picks where to end a chunk inside w (len(w) = size+1, so a cut
// at size is allowed). Preferred cuts must keep the chunk at least a
// quarter full, so small chunks do not multiply.
func cutPoint(w []byte) int {
	size := len(w) - 1
	floor := size / 4
	for _, sep := range [][]byte{[]byte("\n#"), []byte("\n\n"), []byte("\n")} {
		if i := bytes.LastIndex(w[:size], sep); i >= 0 && i+1 > floor {
			return i + 1 // keep the newline with the chunk before
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
