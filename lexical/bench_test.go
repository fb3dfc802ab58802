package lexical

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

// syntheticCorpus makes nPages pages of about pageBytes bytes each, cut into
// passages of about passageBytes, of words drawn from a Zipf distribution
// over a vocabulary of vocab words whose most frequent are English stop
// words. It is deterministic.
func syntheticCorpus(nPages, pageBytes, passageBytes, vocab int) []page {
	r := rand.New(rand.NewPCG(42, 7))
	zipf := rand.NewZipf(r, 1.07, 2, uint64(vocab-1))
	pages := make([]page, nPages)
	var sb strings.Builder
	for i := range pages {
		pages[i].name = fmt.Sprintf("section%02d/topic%03d/page%05d.md", i%37, i%101, i)
		for written := 0; written < pageBytes; {
			sb.Reset()
			for sb.Len() < passageBytes {
				sb.WriteString(syntheticWord(int(zipf.Uint64())))
				if r.IntN(12) == 0 {
					sb.WriteString(". ")
				} else {
					sb.WriteByte(' ')
				}
			}
			pages[i].passages = append(pages[i].passages, sb.String())
			written += sb.Len()
		}
	}
	return pages
}

var commonWords = strings.Fields("the of and to a in is it you that he was for on are with as I his they be at one have this")

var syllables = func() []string {
	var s []string
	for _, c := range "bcdfghjklmnprstvwz" {
		for _, v := range "aeiou" {
			s = append(s, string(c)+string(v))
		}
	}
	return s
}()

// syntheticWord is the word of a rank: a stop word for the first ranks,
// else two or more syllables that spell the rank, so distinct ranks are
// distinct words.
func syntheticWord(rank int) string {
	if rank < len(commonWords) {
		return commonWords[rank]
	}
	var sb strings.Builder
	for n := rank; ; n /= len(syllables) {
		sb.WriteString(syllables[n%len(syllables)])
		if n < len(syllables) && sb.Len() >= 4 {
			break
		}
	}
	return sb.String()
}

func buildSynthetic(pages []page) *Index { return build(pages...) }

// The benchmark corpus: 10,000 pages of 5 kB (50 MB) in passages of 1 kB,
// over 200,000 words.
var benchCorpus = sync.OnceValue(func() []page { return syntheticCorpus(10000, 5000, 1000, 200000) })

var benchIndex = sync.OnceValue(func() *Index { return buildSynthetic(benchCorpus()) })

func corpusBytes(pages []page) int64 {
	var n int64
	for _, p := range pages {
		for _, s := range p.passages {
			n += int64(len(s))
		}
	}
	return n
}

func BenchmarkBuild(b *testing.B) {
	pages := benchCorpus()
	b.SetBytes(corpusBytes(pages))
	var ix *Index
	for b.Loop() {
		ix = buildSynthetic(pages)
	}
	data, err := ix.MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(ix.MemoryBytes())/1e6, "MB-heap")
	b.ReportMetric(float64(len(data))/1e6, "MB-encoded")
	b.ReportMetric(float64(ix.Passages()), "passages")
	b.ReportMetric(float64(ix.Terms()), "terms")
}

// benchQueries: terms by rank in the Zipf vocabulary (a stop word is
// dropped from a query, a common term has long postings).
var benchQueries = []struct {
	name  string
	ranks []int
}{
	{"common", []int{30}},
	{"mid", []int{1000}},
	{"rare", []int{50000}},
	{"common+mid+rare", []int{40, 2000, 60000}},
	{"3common", []int{30, 31, 35}},
	{"5mixed", []int{3, 60, 500, 5000, 100000}},
}

func BenchmarkSearch(b *testing.B) {
	ix := benchIndex()
	for _, q := range benchQueries {
		var words []string
		for _, r := range q.ranks {
			words = append(words, syntheticWord(r))
		}
		query := strings.Join(words, " ")
		b.Run(q.name, func(b *testing.B) {
			hits := ix.Search(query, 10)
			if len(hits) == 0 {
				b.Fatalf("no hits for %q", query)
			}
			for b.Loop() {
				ix.Search(query, 10)
			}
		})
	}
}

func BenchmarkSearchParallel(b *testing.B) {
	ix := benchIndex()
	query := syntheticWord(40) + " " + syntheticWord(2000) + " " + syntheticWord(60000)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ix.Search(query, 10)
		}
	})
}

func BenchmarkMarshal(b *testing.B) {
	ix := benchIndex()
	for b.Loop() {
		if _, err := ix.MarshalBinary(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkUnmarshal(b *testing.B) {
	data, err := benchIndex().MarshalBinary()
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Unmarshal(data); err != nil {
			b.Fatal(err)
		}
	}
}
