package search

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromafs/chromafs/lexical"
)

// hostileIndex encodes an index of one page, name, with one passage
// "rotate api keys" at offset 0, and rewrites that passage's length to
// passLen (the CRC made right again): an entry of the host tier that
// lexical.Unmarshal accepts, but that no build of the view wrote.
func hostileIndex(t *testing.T, name string, passLen uint64) []byte {
	t.Helper()
	b := lexical.NewBuilder()
	const text = "rotate api keys"
	b.Add(b.AddPage(name), 0, text)
	data, err := b.Build().MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// pages: 1, the name; passages: 1, then page 0, offset 0, its length.
	mark := append(binary.AppendUvarint([]byte{1}, uint64(len(name))), name...)
	mark = append(mark, 1, 0, 0)
	i := bytes.Index(data, mark)
	if i < 0 || bytes.Contains(data[i+1:], mark) {
		t.Fatal("cannot find the passage in the encoded index")
	}
	at := i + len(mark)
	if data[at] != byte(len(text)) {
		t.Fatalf("passage length byte %d, want %d", data[at], len(text))
	}
	body := append(append(slices.Clone(data[:at]), binary.AppendUvarint(nil, passLen)...), data[at+1:len(data)-4]...)
	out := binary.LittleEndian.AppendUint32(body, crc32.Checksum(body, crc32.MakeTable(crc32.Castagnoli)))
	if _, err := lexical.Unmarshal(out); err != nil {
		t.Fatalf("the rewritten index does not decode: %v", err)
	}
	return out
}

// An index in the host tier is bytes another process wrote: a search
// over one that names what the tree does not hold, or a passage no page
// has, answers an error, never a panic or an allocation of what the
// entry claims.
func TestHostileHostIndex(t *testing.T) {
	for _, tc := range []struct {
		name    string
		page    string
		passLen uint64
	}{
		{"a page the tree does not hold", "nope.md", 15},
		{"a directory", "guides", 15},
		{"a passage past the page's end", "guides/keys.md", 1 << 20},
		{"a passage of an exabyte", "guides/keys.md", 1 << 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := treeOf(t, corpus)
			host := newHost()
			rd := newReader(corpus)
			s := newSearcher(t, Config{Reader: rd, Host: host})
			k := s.hostKey(newState(tr))
			data := hostileIndex(t, tc.page, tc.passLen)
			host.Put(k, data)
			host.SetRef(sizeRef(k), strconv.Itoa(len(data)))

			// Called directly, not through Search: a panic in Search's
			// flight would end the test binary.
			var err error
			func() {
				defer func() {
					if r := recover(); r != nil {
						err = fmt.Errorf("panic: %v", r)
						t.Errorf("a hostile index from the host tier panics the search: %v", r)
					}
				}()
				_, err = s.lexical(t.Context(), s.state(tr), "rotate", 10)
			}()
			if err == nil {
				t.Fatal("a hostile index answered without an error")
			}
			if strings.HasPrefix(err.Error(), "panic") {
				return
			}
			if ix := s.Stats().Index; ix.Source != "host" {
				t.Fatalf("the index came from %q: the test did not serve the hostile entry", ix.Source)
			}
		})
	}
}
