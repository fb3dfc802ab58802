package lexical

import (
	"hash/crc32"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/amikos-tech/chroma-go/pkg/embeddings/bm25"
	"github.com/kljensen/snowball/english"
)

// maxTokenRunes is the longest token kept, in runes (chroma-go's default).
const maxTokenRunes = 40

// stopwords is chroma-go's bm25.DefaultStopwords as a set. It is never
// written after initialisation.
var stopwords = func() map[string]struct{} {
	m := make(map[string]struct{}, len(bm25.DefaultStopwords))
	for _, w := range bm25.DefaultStopwords {
		m[strings.ToLower(w)] = struct{}{}
	}
	return m
}()

// tokenizerPrint fingerprints the tokenizer: its stop words, its length
// limit and the stems of a few words. An encoded index records it, so that
// an index built by another tokenizer (a newer chroma-go or stemmer) is
// refused instead of being searched with tokens it does not hold.
var tokenizerPrint = func() uint32 {
	h := crc32.New(crcTable)
	for _, w := range bm25.DefaultStopwords {
		h.Write([]byte(w + "\n"))
	}
	h.Write([]byte(strconv.Itoa(maxTokenRunes) + "\n"))
	for _, w := range Tokenize("Rotating generously configured filesystems' mountpoints, " +
		"running quickly; the happiness of ponies, Ärger, naïveté, 2024 x86_64 ﬁle") {
		h.Write([]byte(w + "\n"))
	}
	return h.Sum32()
}()

// Tokenize lowercases text, splits it on anything but letters and digits,
// drops stop words and tokens longer than 40 runes, and stems the rest with
// the English Snowball stemmer: the tokens chroma-go's bm25 Tokenizer makes
// with its DefaultStopwords. It is safe for concurrent use.
func Tokenize(text string) []string {
	var tokens []string
	eachWord(strings.ToLower(text), func(w string) {
		if keep(w) {
			tokens = append(tokens, stem(w))
		}
	})
	return tokens
}

// eachWord calls f with every maximal run of letters and digits of s. An
// invalid byte decodes as utf8.RuneError, which is neither, so it separates
// words as it does for chroma-go's regular expression.
func eachWord(s string, f func(word string)) {
	start := -1
	for i := 0; i < len(s); {
		r, n := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRuneInString(s[i:])
		}
		if isWordRune(r) {
			if start < 0 {
				start = i
			}
		} else if start >= 0 {
			f(s[start:i])
			start = -1
		}
		i += n
	}
	if start >= 0 {
		f(s[start:])
	}
}

func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsNumber(r)
}

// keep reports whether a lowercased word is a token: not a stop word and at
// most maxTokenRunes long.
func keep(w string) bool {
	if _, ok := stopwords[w]; ok {
		return false
	}
	return len(w) <= maxTokenRunes || utf8.RuneCountInString(w) <= maxTokenRunes
}

// stem is what chroma-go's tokenizer calls: snowball.Stem(w, "english", true),
// whose only error is an unknown language.
func stem(w string) string {
	return english.Stem(w, true)
}
