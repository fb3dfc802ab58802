package tree

import (
	"fmt"
	"runtime"
	"testing"
)

// benchDoc is a stored tree of n pages as chromafs-ingest writes it.
func benchDoc(b testing.TB, n int) []byte {
	b.Helper()
	entries := make(map[string]Entry, n)
	for i := 0; i < n; i++ {
		size := int64(200 + i%100)
		slug := fmt.Sprintf("section-%d/part-%d/sub-%d/page-%06d", i%10, i/1000%7, i/100%10, i)
		entries[slug] = Entry{IsPublic: i%50 != 0, Groups: []string{"team"}, Path: slug + ".mdx", Size: &size,
			Mtime: 1795000000, Chunks: []int64{size}, SHA256: fmt.Sprintf("%064x", i)}
	}
	raw, err := Encode(entries)
	if err != nil {
		b.Fatal(err)
	}
	doc, err := Wrap(raw)
	if err != nil {
		b.Fatal(err)
	}
	return []byte(doc)
}

// BenchmarkLoad100k measures what mount-ready spends on the tree after
// fetching it: decode, prune, build; and what a page of the built tree
// keeps on the heap (heap-B/page).
func BenchmarkLoad100k(b *testing.B) {
	doc := benchDoc(b, 100_000)
	b.SetBytes(int64(len(doc)))
	var t *Tree
	b.ResetTimer()
	for b.Loop() {
		d, err := Decode(doc, DefaultLimits)
		if err != nil {
			b.Fatal(err)
		}
		t = BuildVisible(d, nil, DefaultLimits)
		if t.Files == 0 {
			b.Fatal("empty tree")
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(liveHeap(func() { t = nil }))/100_000, "heap-B/page")
}

// liveHeap is how much less the heap holds once drop has let go of what
// it holds.
func liveHeap(drop func()) uint64 {
	var with, without runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&with)
	drop()
	runtime.GC()
	runtime.ReadMemStats(&without)
	if with.HeapAlloc < without.HeapAlloc {
		return 0
	}
	return with.HeapAlloc - without.HeapAlloc
}

// BenchmarkLoad10k is BenchmarkLoad100k for the 10,000-page tree whose
// mount-ready target is 100 ms.
func BenchmarkLoad10k(b *testing.B) {
	doc := benchDoc(b, 10_000)
	b.ResetTimer()
	for b.Loop() {
		d, err := Decode(doc, DefaultLimits)
		if err != nil {
			b.Fatal(err)
		}
		BuildVisible(d, nil, DefaultLimits)
	}
}

// BenchmarkLoadDeep100k is BenchmarkLoad100k for a deep tree: 16 chains of
// 24 nested levels, pages at every level (paths of ~200 bytes).
func BenchmarkLoadDeep100k(b *testing.B) {
	entries := make(map[string]Entry, 100_000)
	for i := 0; i < 100_000; i++ {
		p := fmt.Sprintf("b%02d", i%16)
		for d := 1; d <= (i/16)%24; d++ {
			p += fmt.Sprintf("/level-%02d", d)
		}
		p += fmt.Sprintf("/page-%06d.md", i)
		size := int64(100)
		entries[p[:len(p)-3]] = Entry{IsPublic: true, Path: p, Size: &size, Chunks: []int64{size}, SHA256: fmt.Sprintf("%064x", i)}
	}
	benchEntries(b, entries, 1e6, "MB")
}

// BenchmarkLoadDocsShape is a docs site's tree: 1,771 entries, as the
// public mintlify/docs repository's (467 KB of JSON, 98 KB stored), whose
// images make most of it chunk lengths (14,500): every eighth page is a 360 KB
// image in chunks of 6,144 bytes (the stored form of 8 KiB of base64),
// the others a 5 KB page in one chunk.
func BenchmarkLoadDocsShape(b *testing.B) {
	entries := make(map[string]Entry, 1771)
	for i := range 1771 {
		size := int64(5000 + i%1000)
		chunks := []int64{size}
		path := fmt.Sprintf("section-%d/page-%04d.mdx", i%12, i)
		if i%8 == 0 {
			size = int64(360_000 + i)
			chunks = chunks[:0]
			for s := size; s > 0; s -= 6144 {
				chunks = append(chunks, min(s, 6144))
			}
			path = fmt.Sprintf("images/image-%04d.png", i)
		}
		entries[path] = Entry{IsPublic: true, Groups: []string{}, Path: path, Size: &size, Mtime: 1796536458, MtimeNsec: int64(i) * 1000,
			Chunks: chunks, SHA256: fmt.Sprintf("%064x", i)}
	}
	benchEntries(b, entries, 1e3, "kB")
}

// benchEntries times decoding and building the stored tree of entries,
// and reports its JSON's and its stored form's sizes in units of unit.
func benchEntries(b *testing.B, entries map[string]Entry, unit float64, name string) {
	raw, _ := Encode(entries)
	doc, _ := Wrap(raw)
	b.SetBytes(int64(len(doc)))
	b.ResetTimer()
	for b.Loop() {
		d, err := Decode([]byte(doc), DefaultLimits)
		if err != nil {
			b.Fatal(err)
		}
		BuildVisible(d, nil, DefaultLimits)
	}
	b.ReportMetric(float64(len(raw))/unit, name+"-json")
	b.ReportMetric(float64(len(doc))/unit, name+"-stored")
}
