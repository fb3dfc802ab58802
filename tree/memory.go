package tree

import "unsafe"

// The estimates here are what a host's memory budget counts for a tree
// and a decoded document (chromafsd, cache.Budget): the structs and the
// bytes of their strings and slices, not the allocator's rounding or the
// maps' buckets beyond a fixed cost per entry. Measured against the heap
// of a loaded tree they fall short by a stated margin (tree's tests).

const (
	nodeBytes     = int64(unsafe.Sizeof(Node{}))
	fileBytes     = int64(unsafe.Sizeof(File{}))
	itemBytes     = int64(unsafe.Sizeof(item{}))
	mapEntryBytes = 48 // a map entry's share of its buckets, about
)

// MemoryBytes estimates the heap t holds. It is computed once: a tree
// does not change but for file sizes that were unknown. Names, slugs
// and digests are not counted: a tree built from a document shares them
// with it (Doc.MemoryBytes counts them), and one read from a snapshot
// holds them in fewer, larger allocations than its nodes (measured, the
// estimate is still at or above its heap).
func (t *Tree) MemoryBytes() int64 {
	if n := t.memBytes.Load(); n > 0 {
		return n
	}
	n := int64(unsafe.Sizeof(*t)) + int64(len(t.Version))
	for _, s := range t.Hidden {
		n += 16 + int64(len(s))
	}
	n += int64(len(t.recorded)) * mapEntryBytes
	count := func(nd *Node) bool {
		n += nodeBytes + 8*int64(cap(nd.Children))
		if nd.Link != nil {
			n += 16 + int64(len(nd.Link.Target))
		}
		if f := nd.File; f != nil {
			n += fileBytes + 8*int64(cap(f.Chunks))
			if f.Version != f.SHA256 && f.Version != t.Version {
				n += int64(len(f.Version))
			}
			if e := f.elsewhere; e != nil {
				n += int64(unsafe.Sizeof(*e)) + int64(len(e.URI)) + partsBytes(e.ChunkSHA256, e.Records)
			}
		}
		return true
	}
	Walk(t.Root, count)
	if t.Report != nil {
		count(t.Report)
	}
	t.memBytes.Store(n)
	return n
}

// MemoryBytes estimates the heap d holds (its entries by slug once
// built included).
func (d *Doc) MemoryBytes() int64 {
	n := int64(unsafe.Sizeof(*d)) + int64(len(d.Version)) + itemBytes*int64(cap(d.list))
	for i := range d.list {
		it := &d.list[i]
		e := &it.e
		n += int64(len(it.slug)+len(it.warn)+len(e.Path)+len(e.SHA256)+len(e.URI)+len(e.Target)+len(e.Reassembly)) + 8*int64(cap(e.Chunks))
		for _, g := range e.Groups {
			n += 16 + int64(len(g))
		}
		if e.Size != nil {
			n += 8
		}
		n += partsBytes(e.ChunkSHA256, e.Records)
	}
	if d.entries != nil {
		n += int64(len(d.entries)) * (mapEntryBytes + int64(unsafe.Sizeof(Entry{})))
	}
	return n
}

func partsBytes(sums []string, parts []Part) int64 {
	n := 16 * int64(cap(sums))
	for _, s := range sums {
		n += int64(len(s))
	}
	n += int64(unsafe.Sizeof(Part{})) * int64(cap(parts))
	for _, p := range parts {
		n += int64(len(p.ID) + len(p.Text))
	}
	return n
}
