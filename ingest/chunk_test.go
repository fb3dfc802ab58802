package ingest

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestSplit(t *testing.T) {
	heading := strings.Repeat("intro line\n", 10) + "# Heading\n" + strings.Repeat("body\n", 5)
	tests := []struct {
		name  string
		data  string
		size  int
		first string // expected first chunk, "" = don't care
		n     int    // expected chunk count, 0 = don't care
	}{
		{"empty", "", 64, "", 0},
		{"small", "hello", 64, "hello", 1},
		{"exact", strings.Repeat("a", 64), 64, "", 1},
		{"heading preferred", heading, 120, strings.Repeat("intro line\n", 10), 0},
		{"blank line preferred", strings.Repeat("w", 40) + "\n\n" + strings.Repeat("x\n", 40), 64, strings.Repeat("w", 40) + "\n\n", 0},
		{"crlf kept", strings.Repeat("line\r\n", 40), 64, "", 0},
		{"no newline", strings.Repeat("z", 200), 64, strings.Repeat("z", 64), 4},
		{"multibyte", strings.Repeat("日本語", 100), 64, strings.Repeat("日本語", 7), 0},
		{"emoji", strings.Repeat("🎉", 100), 65, strings.Repeat("🎉", 16), 0},
		{"bom", "\xef\xbb\xbf" + strings.Repeat("é", 100), 64, "", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chunks := Split([]byte(tc.data), tc.size)
			checkChunks(t, []byte(tc.data), chunks, tc.size)
			if tc.first != "" && string(chunks[0]) != tc.first {
				t.Errorf("first chunk %q, want %q", chunks[0], tc.first)
			}
			if tc.n != 0 && len(chunks) != tc.n {
				t.Errorf("%d chunks, want %d", len(chunks), tc.n)
			}
		})
	}
}

func TestSplitLarge(t *testing.T) {
	data := bytes.Repeat([]byte("# Title\r\n\r\nSome text — with ünïcödé, and 日本語.\r\n"), 200_000)
	chunks := Split(data, 16<<10)
	checkChunks(t, data, chunks, 16<<10)
	if len(chunks) < len(data)/(16<<10) {
		t.Errorf("%d chunks for %d bytes", len(chunks), len(data))
	}
}

// checkChunks asserts the chunker's contract.
func checkChunks(t *testing.T, data []byte, chunks [][]byte, size int) {
	t.Helper()
	if !bytes.Equal(bytes.Join(chunks, nil), data) {
		t.Fatalf("chunks do not join back to the input")
	}
	valid := utf8.Valid(data)
	for i, c := range chunks {
		if len(c) == 0 || len(c) > max(size, MinChunkSize) {
			t.Fatalf("chunk %d has %d bytes (limit %d)", i, len(c), size)
		}
		if valid && !utf8.Valid(c) {
			t.Fatalf("chunk %d splits a rune: %q", i, c)
		}
	}
}

func FuzzSplit(f *testing.F) {
	f.Add([]byte("# a\n\nb\r\nc"), 64)
	f.Add([]byte(strings.Repeat("日本語🎉\n", 50)), 70)
	f.Add([]byte{}, 0)
	f.Fuzz(func(t *testing.T, data []byte, size int) {
		size = size%(20<<10) + 1
		if size < 0 {
			size = -size
		}
		checkChunks(t, data, Split(data, size), size)
	})
}

// TestSplitBinary: chunks join to the bytes, and each one's base64 fits the
// chunk size (Chroma Cloud's 16 KiB document limit at the largest).
func TestSplitBinary(t *testing.T) {
	for _, size := range []int{MinChunkSize, 8 << 10, 16 << 10} {
		for _, n := range []int{1, 2, 3, 12287, 12288, 12289, 100000} {
			data := bytes.Repeat([]byte{0xff, 0x00, 0x80}, n/3+1)[:n]
			chunks := SplitBinary(data, size)
			if !bytes.Equal(bytes.Join(chunks, nil), data) {
				t.Fatalf("size %d, %d bytes: chunks do not join to the data", size, n)
			}
			for _, c := range chunks {
				if enc := base64.StdEncoding.EncodedLen(len(c)); enc > size {
					t.Fatalf("size %d: a chunk of %d bytes is %d bytes of base64", size, len(c), enc)
				}
			}
		}
	}
}
