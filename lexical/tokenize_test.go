package lexical

import (
	"slices"
	"testing"

	"github.com/amikos-tech/chroma-go/pkg/embeddings/bm25"
)

// chromaTokens is chroma-go's own tokenizer, the reference for Tokenize.
func chromaTokens(text string) []string {
	return bm25.NewTokenizer(bm25.DefaultStopwords, maxTokenRunes).Tokenize(text)
}

var tokenizeSamples = []string{
	"",
	"   \t\n",
	"The quick brown fox jumps over the lazy dog",
	"Rotating, rotated; ROTATES: rotation!",
	"don't won't it's can't shouldn't've",
	"x86_64 arm64 v1.2.3 2024-12-01 0xFF",
	"naïveté Ärger straße ﬁle İstanbul ΣΊΣΥΦΟΣ 東京タワー",
	"a\xffb\xfe\xfdc \xe2\x82 d", // invalid UTF-8 separates words
	"supercalifragilisticexpialidociousandthensomemorelettersbeyondforty short",
	"ééééééééééééééééééééééééééééééééééééééé é40 " + // 39 runes, kept
		"éééééééééééééééééééééééééééééééééééééééé", // 40 runes, kept
	"ééééééééééééééééééééééééééééééééééééééééé", // 41 runes (82 bytes), dropped
	"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", // 41 ASCII, dropped
	"generously happiness ponies cats running sky skies dying lying news",
	"'quoted' “curly” — dash… ellipsis ¹²³ ½ Ⅻ ٣",
}

func TestTokenizeMatchesChroma(t *testing.T) {
	for _, s := range tokenizeSamples {
		got, want := Tokenize(s), chromaTokens(s)
		if !slices.Equal(got, want) {
			t.Errorf("Tokenize(%q) = %q, chroma-go's tokenizer says %q", s, got, want)
		}
	}
}

func TestTokenize(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"the and of a", nil}, // stop words only
		{"Rotating ROTATE rotates", []string{"rotat", "rotat", "rotat"}},
		{"The mount's cache", []string{"mount", "cach"}}, // "s" is a stop word
		{"foo_bar-baz", []string{"foo", "bar", "baz"}},
	}
	for _, tt := range tests {
		if got := Tokenize(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Tokenize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// The builder's word cache must give the tokens Tokenize does.
func TestBuilderTokensMatchTokenize(t *testing.T) {
	bd := NewBuilder()
	pg := bd.AddPage("p")
	for i, s := range tokenizeSamples {
		bd.Add(pg, int64(i), s)
		bd.Add(pg, int64(i), s) // again, from the cache
	}
	for i, s := range tokenizeSamples {
		want := Tokenize(s)
		for _, pass := range []int{2 * i, 2*i + 1} {
			var got []string
			for tid, term := range bd.terms {
				for _, block := range bd.posts {
					for _, p := range block {
						if p.term == uint32(tid) && p.pass == uint32(pass) {
							for range p.tf {
								got = append(got, term)
							}
						}
					}
				}
			}
			slices.Sort(got)
			w := slices.Sorted(slices.Values(want))
			if !slices.Equal(got, w) {
				t.Errorf("passage %d (%q): builder holds %q, Tokenize says %q", pass, s, got, w)
			}
			if int(bd.passDL[pass]) != len(want) {
				t.Errorf("passage %d: length %d, want %d", pass, bd.passDL[pass], len(want))
			}
		}
	}
}

func FuzzTokenize(f *testing.F) {
	for _, s := range tokenizeSamples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, want := Tokenize(s), chromaTokens(s)
		if !slices.Equal(got, want) {
			t.Fatalf("Tokenize(%q) = %q, chroma-go's tokenizer says %q", s, got, want)
		}
	})
}
