package lexical

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func mustMarshal(t testing.TB, ix *Index) []byte {
	t.Helper()
	data, err := ix.MarshalBinary()
	if err != nil {
		t.Fatalf("MarshalBinary: %v", err)
	}
	return data
}

// sameAnswers fails unless a and b answer every reference query alike.
func sameAnswers(t *testing.T, a, b *Index) {
	t.Helper()
	if a.Pages() != b.Pages() || a.Passages() != b.Passages() || a.Terms() != b.Terms() {
		t.Fatalf("counts %d/%d/%d vs %d/%d/%d", a.Pages(), a.Passages(), a.Terms(), b.Pages(), b.Passages(), b.Terms())
	}
	for _, q := range append(referenceQueries, "cat", "dog fish", "fish") {
		for _, k := range []int{1, 5, 1000} {
			if x, y := a.Search(q, k), b.Search(q, k); !reflect.DeepEqual(x, y) {
				t.Fatalf("Search(%q, %d): %+v, after the round trip %+v", q, k, x, y)
			}
		}
	}
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	indexes := []*Index{tiny(), NewBuilder().Build()}
	for range 20 {
		indexes = append(indexes, build(randomCorpus(r, 1+r.IntN(60))...))
	}
	for i, ix := range indexes {
		data := mustMarshal(t, ix)
		back, err := Unmarshal(data)
		if err != nil {
			t.Fatalf("index %d: Unmarshal: %v", i, err)
		}
		sameAnswers(t, ix, back)
		if again := mustMarshal(t, back); !bytes.Equal(again, data) {
			t.Errorf("index %d: encoding of the decoded index differs", i)
		}
		if !slices.Equal(ix.norm, back.norm) || ix.names != back.names || !slices.Equal(ix.nameOff, back.nameOff) {
			t.Errorf("index %d: norms or names differ after the round trip", i)
		}
		if m, n := ix.MemoryBytes(), back.MemoryBytes(); math.Abs(float64(m-n)) > 0.1*float64(m) {
			t.Errorf("index %d: MemoryBytes %d, after the round trip %d", i, m, n)
		}
	}
	// Unmarshal keeps nothing of its input.
	data := mustMarshal(t, tiny())
	back, err := Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 0
	}
	sameAnswers(t, tiny(), back)
}

func TestMarshalInvalidName(t *testing.T) {
	ix := build(page{"ok", []string{"x"}}, page{"bad\xff", []string{"y"}})
	if _, err := ix.MarshalBinary(); err == nil || !strings.Contains(err.Error(), "page 1") {
		t.Errorf("MarshalBinary with an invalid name: %v, want an error naming page 1", err)
	}
}

func wantInvalid(t *testing.T, what string, data []byte) {
	t.Helper()
	ix, err := Unmarshal(data)
	if !errors.Is(err, ErrInvalid) || ix != nil {
		t.Errorf("%s: Unmarshal = %v, %v; want ErrInvalid", what, ix, err)
	}
}

func TestUnmarshalTruncated(t *testing.T) {
	data := mustMarshal(t, build(randomCorpus(rand.New(rand.NewPCG(7, 8)), 10)...))
	for n := range len(data) {
		wantInvalid(t, "truncated", data[:n])
	}
}

func TestUnmarshalMutated(t *testing.T) {
	ix := build(randomCorpus(rand.New(rand.NewPCG(9, 10)), 8)...)
	data := mustMarshal(t, ix)
	for i := range data {
		for _, x := range []byte{0x01, 0x80, 0xff} {
			m := bytes.Clone(data)
			m[i] ^= x
			wantInvalid(t, "mutated", m) // the checksum, at least, catches it
			// Past the checksum, the structure's checks: an error or an
			// index that works, never a panic.
			if back, err := Unmarshal(reseal(m)); err == nil {
				back.Search("rotate keys the mount", 10)
				if _, err := Unmarshal(mustMarshal(t, back)); err != nil {
					t.Errorf("byte %d^%#x: accepted, then its encoding refused: %v", i, x, err)
				}
			} else if !errors.Is(err, ErrInvalid) {
				t.Errorf("byte %d^%#x: %v does not wrap ErrInvalid", i, x, err)
			}
		}
	}
}

// reseal gives data a correct checksum, so that what follows it is tested.
func reseal(data []byte) []byte {
	if len(data) < trailer {
		return data
	}
	body := data[:len(data)-trailer]
	return binary.LittleEndian.AppendUint32(bytes.Clone(body), crc32.Checksum(body, crcTable))
}

// seal frames a body as an encoded index.
func seal(body ...[]byte) []byte {
	out := append([]byte(magic), version)
	out = binary.LittleEndian.AppendUint32(out, tokenizerPrint)
	out = append(out, bytes.Join(body, nil)...)
	return binary.LittleEndian.AppendUint32(out, crc32.Checksum(out, crcTable))
}

func uv(xs ...uint64) []byte {
	var out []byte
	for _, x := range xs {
		out = binary.AppendUvarint(out, x)
	}
	return out
}

func str(s string) []byte { return append(uv(uint64(len(s))), s...) }

func TestUnmarshalHostile(t *testing.T) {
	// A valid body: page "a"; passage 0 of it, bytes [0, 3), 1 token; term "cat" in it once.
	pages := append(uv(1), str("a")...)
	pass := uv(1, 0, 0, 3, 1)
	terms := append(append(uv(1), str("cat")...), uv(1, 2, 0, 1)...)
	if ix, err := Unmarshal(seal(pages, pass, terms)); err != nil || len(ix.Search("cats", 1)) != 1 {
		t.Fatalf("the valid body: %v", err)
	}
	term := func(name string, df uint64, post ...uint64) []byte {
		p := uv(post...)
		return append(append(append(str(name), uv(df)...), uv(uint64(len(p)))...), p...)
	}
	huge := uint64(1) << 62
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"garbage", []byte(strings.Repeat("garbage!", 10))},
		{"another magic", append([]byte("CFSLEY"), seal(pages, pass, terms)[len(magic):]...)},
		{"version 2", func() []byte { d := seal(pages, pass, terms); d[len(magic)] = 2; return reseal(d) }()},
		{"another tokenizer", func() []byte { d := seal(pages, pass, terms); d[len(magic)+1]++; return reseal(d) }()},
		{"bad checksum", func() []byte { d := seal(pages, pass, terms); d[len(d)-1]++; return d }()},
		{"nothing after the header", seal()},
		{"huge page count", seal(uv(huge), str("a"), pass, terms)},
		{"page count over 2^32", seal(uv(math.MaxUint32 + 1))},
		{"huge name length", seal(uv(1, huge), []byte("a"), pass, terms)},
		{"name not UTF-8", seal(uv(1), str("\xff"), pass, terms)},
		{"bad varint", seal(bytes.Repeat([]byte{0xff}, 11))},
		{"huge passage count", seal(pages, uv(huge, 0, 0, 3, 1), terms)},
		{"passage of a missing page", seal(pages, uv(1, 1, 0, 3, 1), terms)},
		{"passage beyond int64", seal(pages, uv(1, 0, math.MaxInt64, 1, 1), terms)},
		{"passage offset beyond int64", seal(pages, uv(1, 0, math.MaxInt64+1, 0, 1), terms)},
		{"passage tokens over 2^32", seal(pages, uv(1, 0, 0, 3, math.MaxUint32+1), terms)},
		{"passage length not its postings'", seal(pages, uv(1, 0, 0, 3, 2), terms)},
		{"huge term count", seal(pages, pass, uv(huge), term("cat", 1, 0, 1))},
		{"term not UTF-8", seal(pages, pass, uv(1), term("\xffcat", 1, 0, 1))},
		{"terms out of order", seal(pages, uv(1, 0, 0, 3, 2), uv(2), term("dog", 1, 0, 1), term("cat", 1, 0, 1))},
		{"term twice", seal(pages, uv(1, 0, 0, 3, 2), uv(2), term("cat", 1, 0, 1), term("cat", 1, 0, 1))},
		{"no postings", seal(pages, uv(1, 0, 0, 3, 0), uv(1), term("cat", 0))},
		{"df beyond the passages", seal(pages, pass, uv(1), term("cat", 2, 0, 1))},
		{"df above its postings", seal(pages, uv(2, 0, 0, 3, 1, 0, 4, 3, 0), uv(1), term("cat", 2, 0, 1))},
		{"postings after df", seal(pages, uv(2, 0, 0, 3, 1, 0, 4, 3, 1), uv(1), term("cat", 1, 0, 1, 1, 1))},
		{"postings beyond the end", seal(pages, pass, uv(1), str("cat"), uv(1, 100, 0, 1))},
		{"posting of a missing passage", seal(pages, pass, uv(1), term("cat", 1, 1, 1))},
		{"posting of a huge passage", seal(pages, pass, uv(1), term("cat", 1, huge, 1))},
		{"delta wrapping around", seal(pages, uv(2, 0, 0, 3, 1, 0, 4, 3, 1), uv(1), term("cat", 2, 1, 1, math.MaxUint64, 1))},
		{"passage repeated", seal(pages, uv(1, 0, 0, 3, 2), uv(1), term("cat", 2, 0, 1, 0, 1))},
		{"frequency 0", seal(pages, uv(1, 0, 0, 3, 0), uv(1), term("cat", 1, 0, 0))},
		{"frequency over 2^32", seal(pages, uv(1, 0, 0, 3, math.MaxUint32), uv(1), term("cat", 1, 0, math.MaxUint32+1))},
		{"bytes after the terms", seal(pages, pass, terms, []byte{0})},
	}
	for _, tt := range tests {
		wantInvalid(t, tt.name, tt.data)
	}
}

func FuzzUnmarshal(f *testing.F) {
	r := rand.New(rand.NewPCG(11, 12))
	f.Add(mustMarshal(f, tiny()))
	f.Add(mustMarshal(f, NewBuilder().Build()))
	f.Add(mustMarshal(f, build(randomCorpus(r, 5)...)))
	valid := mustMarshal(f, build(randomCorpus(r, 3)...))
	f.Add(valid[:len(valid)/2])
	f.Add([]byte{})
	f.Add([]byte(magic))
	f.Add(seal(uv(1 << 62)))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, d := range [][]byte{data, reseal(data)} {
			ix, err := Unmarshal(d)
			if err != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("error %v does not wrap ErrInvalid", err)
				}
				continue
			}
			for _, q := range []string{"cat", "rotate keys mount", "dog fish"} {
				for _, h := range ix.Search(q, 3) {
					if int(h.Page) >= ix.Pages() || h.Score <= 0 {
						t.Fatalf("hit %+v of an index of %d pages", h, ix.Pages())
					}
				}
			}
			again := mustMarshal(t, ix)
			back, err := Unmarshal(again)
			if err != nil {
				t.Fatalf("accepted, then its encoding refused: %v", err)
			}
			if !bytes.Equal(mustMarshal(t, back), again) {
				t.Fatalf("encoding not stable")
			}
		}
	})
}
