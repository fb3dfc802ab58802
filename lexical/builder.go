package lexical

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
)

// maxWordCache bounds the builder's cache of word → term id, so that a
// corpus of endless distinct words costs no more than its dictionary.
const maxWordCache = 1 << 20

// Builder collects the pages and passages of one view. It is not safe for
// concurrent use.
type Builder struct {
	names   []byte   // all names, end to end
	nameOff []uint32 // page i's is names[nameOff[i]:nameOff[i+1]]

	passPage []uint32
	passOff  []int64
	passLen  []int64
	passDL   []uint32

	dict  map[string]uint32 // stem → term id, in order of first use
	terms []string          // by term id
	words map[string]uint32 // lowercased word → term id, at most maxWordCache

	// One posting per (term, passage), in passage order, in blocks of
	// postBlock: appending never copies what is already there.
	posts  [][]posting
	nPosts int

	ids   []uint32 // scratch: the term ids of one passage
	built bool
}

const postBlock = 1 << 15

type posting struct{ term, pass, tf uint32 }

// NewBuilder returns an empty builder.
func NewBuilder() *Builder {
	return &Builder{
		nameOff: []uint32{0},
		dict:    make(map[string]uint32),
		words:   make(map[string]uint32),
	}
}

// AddPage registers a page by name (its path in the mount) and returns its
// number: 0, 1, 2, ... in call order. Names should be distinct and valid
// UTF-8 ([Index.MarshalBinary] refuses an index with an invalid name).
func (b *Builder) AddPage(name string) uint32 {
	b.usable()
	n := b.pages()
	if uint64(n) >= math.MaxUint32 {
		panic("lexical: too many pages")
	}
	b.names = append(b.names, name...)
	b.nameOff = append(b.nameOff, checked32(len(b.names), "names"))
	return uint32(n)
}

// Add indexes one passage of a page: bytes [off, off+len(text)) of it. A
// page may have many passages, in any order. Every call adds a passage,
// even one without a token: it counts in N and in the average length.
// Add panics if page was not returned by AddPage or off is negative.
func (b *Builder) Add(page uint32, off int64, text string) {
	b.usable()
	if int(page) >= b.pages() {
		panic(fmt.Sprintf("lexical: Add to page %d of %d", page, b.pages()))
	}
	if off < 0 || off > math.MaxInt64-int64(len(text)) {
		panic(fmt.Sprintf("lexical: Add at offset %d", off))
	}
	if uint64(len(b.passPage)) >= math.MaxUint32 {
		panic("lexical: too many passages")
	}
	pass := uint32(len(b.passPage))

	ids := b.ids[:0]
	eachWord(strings.ToLower(text), func(w string) {
		if id, ok := b.words[w]; ok {
			ids = append(ids, id)
			return
		}
		if !keep(w) {
			return
		}
		id := b.term(stem(w))
		if len(b.words) < maxWordCache {
			b.words[strings.Clone(w)] = id
		}
		ids = append(ids, id)
	})
	b.ids = ids
	if uint64(len(ids)) > math.MaxUint32 {
		panic("lexical: passage too long")
	}

	b.passPage = append(b.passPage, page)
	b.passOff = append(b.passOff, off)
	b.passLen = append(b.passLen, int64(len(text)))
	b.passDL = append(b.passDL, uint32(len(ids)))

	slices.Sort(ids)
	for i := 0; i < len(ids); {
		j := i + 1
		for j < len(ids) && ids[j] == ids[i] {
			j++
		}
		if len(b.posts) == 0 || len(b.posts[len(b.posts)-1]) == postBlock {
			b.posts = append(b.posts, make([]posting, 0, postBlock))
		}
		last := &b.posts[len(b.posts)-1]
		*last = append(*last, posting{term: ids[i], pass: pass, tf: uint32(j - i)})
		b.nPosts++
		i = j
	}
}

// term returns the id of a stem, adding it to the dictionary if new.
func (b *Builder) term(s string) uint32 {
	if id, ok := b.dict[s]; ok {
		return id
	}
	s = strings.Clone(s)
	id := uint32(len(b.terms))
	b.dict[s] = id
	b.terms = append(b.terms, s)
	return id
}

func (b *Builder) pages() int { return len(b.nameOff) - 1 }

func (b *Builder) usable() {
	if b.built {
		panic("lexical: Builder used after Build")
	}
}

// Build returns the immutable index, safe for concurrent [Index.Search].
// The builder must not be used after (it panics).
func (b *Builder) Build() *Index {
	b.usable()
	b.built = true

	// The dictionary in sorted order: rank[old id] is the new id.
	order := make([]uint32, len(b.terms))
	for i := range order {
		order[i] = uint32(i)
	}
	slices.SortFunc(order, func(x, y uint32) int { return strings.Compare(b.terms[x], b.terms[y]) })
	rank := make([]uint32, len(b.terms))
	var termBytes int
	for newID, old := range order {
		rank[old] = uint32(newID)
		termBytes += len(b.terms[old])
	}

	ix := &Index{
		names:    string(b.names),
		nameOff:  slices.Clone(b.nameOff), // the clones drop append's spare capacity
		passPage: slices.Clone(b.passPage),
		passOff:  slices.Clone(b.passOff),
		passLen:  slices.Clone(b.passLen),
		passDL:   slices.Clone(b.passDL),
		termOff:  make([]uint32, len(order)+1),
		df:       make([]uint32, len(order)),
		postOff:  make([]uint32, len(order)+1),
	}
	var terms strings.Builder
	terms.Grow(termBytes)
	for i, old := range order {
		terms.WriteString(b.terms[old])
		ix.termOff[i+1] = checked32(terms.Len(), "dictionary")
	}
	ix.terms = terms.String()
	b.names, b.nameOff, b.passPage, b.passOff, b.passLen, b.passDL = nil, nil, nil, nil, nil, nil
	b.dict, b.words, b.terms, b.ids = nil, nil, nil, nil

	// Postings grouped by new term id, stable so that each term's stay in
	// passage order: a counting sort.
	for _, block := range b.posts {
		for _, p := range block {
			ix.df[rank[p.term]]++
		}
	}
	start := make([]int, len(order)+1)
	for i, n := range ix.df {
		start[i+1] = start[i] + int(n)
	}
	sorted := make([]uint64, b.nPosts) // passage<<32 | tf
	next := slices.Clone(start[:len(order)])
	for i, block := range b.posts {
		for _, p := range block {
			r := rank[p.term]
			sorted[next[r]] = uint64(p.pass)<<32 | uint64(p.tf)
			next[r]++
		}
		b.posts[i] = nil
	}
	b.posts = nil

	post := make([]byte, 0, 2*len(sorted)+len(sorted)/4)
	for t := range order {
		prev := uint32(0)
		for _, p := range sorted[start[t]:start[t+1]] {
			pass, tf := uint32(p>>32), uint32(p)
			post = binary.AppendUvarint(post, uint64(pass-prev))
			post = binary.AppendUvarint(post, uint64(tf))
			prev = pass
		}
		ix.postOff[t+1] = checked32(len(post), "postings")
	}
	ix.post = slices.Clone(post) // without the spare capacity
	ix.finish()
	return ix
}

// checked32 is n as the uint32 the index's offsets are, or a panic for an
// index beyond 4 GiB of dictionary or postings (some 40 GB of text).
func checked32(n int, what string) uint32 {
	if uint64(n) > math.MaxUint32 {
		panic("lexical: " + what + " beyond 4 GiB")
	}
	return uint32(n)
}
