package chroma

import (
	"errors"
	"testing"
)

// FuzzAssemble feeds arbitrary chunk sets to the reassembly. It must never
// panic; when it succeeds, the result must be the chunks in index order,
// each of the length the tree gives, and nothing of another version.
func FuzzAssemble(f *testing.F) {
	f.Add([]byte{0, 1, 2}, "abc", true, false)
	f.Add([]byte{2, 0, 1}, "xyz", false, false)
	f.Add([]byte{0, 0}, "ab", true, true)
	f.Add([]byte{1}, "q", false, true)
	f.Fuzz(func(t *testing.T, order []byte, text string, withLengths, otherVersion bool) {
		if len(order) > 64 {
			order = order[:64]
		}
		ref := PageRef{Slug: "p", SHA256: "v1"}
		var got []chunkMeta
		for i, o := range order {
			idx := int(o % 8)
			part := ""
			if i < len(text) {
				part = text[i : i+1]
			}
			sha := "v1"
			if otherVersion && i%3 == 2 {
				sha = "v0"
			}
			got = append(got, chunk(idx, part, sha))
		}
		if withLengths {
			ref.Chunks = make([]int64, 8)
			for _, c := range got {
				if c.sha == "v1" {
					ref.Chunks[c.index] = int64(len(c.text))
				}
			}
		}
		out, err := assemble(ref, got, nil)
		if err != nil {
			if !errors.Is(err, ErrBadPage) {
				t.Fatalf("error %v does not wrap ErrBadPage", err)
			}
			return
		}
		byIndex := map[int]string{}
		for _, c := range got {
			if c.sha == "v1" {
				byIndex[c.index] = c.text
			}
		}
		for i, s := range out {
			if byIndex[i] != s || (ref.Chunks != nil && int64(len(s)) != ref.Chunks[i]) {
				t.Fatalf("chunk %d = %q, want %q", i, s, byIndex[i])
			}
		}
	})
}
