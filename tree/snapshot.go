package tree

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// A snapshot is a built tree — one version, already pruned to one set of
// groups — in a compact binary form that loads without decoding the JSON
// document or building anything: a warm restart reads it from the host
// tier instead. It holds only what the tree holds (the visible entries),
// so it is as private as the tree; the host tier keys it by the tree's
// stamp and the groups, and verifies its digest before it is used.
//
// Layout: the magic, the version, the counts, then the nodes depth first,
// children in name order: kind, name, inode, mtime, and what the kind
// needs; then the slugs of the hidden pages (Tree.Hidden: a search asks
// Chroma to leave them out); then the unlisted Report, if any (a byte,
// then the node). Integers are varints.

// v5: the report of inexact files is the tree's unlisted Report, no
// longer a listed child of the root. v4 carried it listed; v3 may hold
// the one an older chromafs-ingest index stored for every view. Neither
// is read.
const snapshotMagic = "chromafs-tree-snapshot-v5\n"

// ErrSnapshot is wrapped by every error of a snapshot that cannot be used.
var ErrSnapshot = errors.New("bad tree snapshot")

const (
	kindDir byte = iota
	kindFile
	kindLink
)

// Snapshot encodes t.
func (t *Tree) Snapshot() []byte {
	w := &snapWriter{buf: make([]byte, 0, 64*(t.Files+t.Dirs+t.Links+1))}
	w.buf = append(w.buf, snapshotMagic...)
	w.str(t.Version)
	w.uint(uint64(t.Files))
	w.uint(uint64(t.Dirs))
	w.uint(uint64(t.Links))
	w.node(t, t.Root)
	w.uint(uint64(len(t.Hidden)))
	for _, slug := range t.Hidden {
		w.str(slug)
	}
	w.bool(t.Report != nil)
	if t.Report != nil {
		w.node(t, t.Report)
	}
	return w.buf
}

type snapWriter struct{ buf []byte }

func (w *snapWriter) uint(v uint64) { w.buf = binary.AppendUvarint(w.buf, v) }
func (w *snapWriter) int(v int64)   { w.buf = binary.AppendVarint(w.buf, v) }
func (w *snapWriter) str(s string)  { w.uint(uint64(len(s))); w.buf = append(w.buf, s...) }

func (w *snapWriter) bool(b bool) {
	if b {
		w.buf = append(w.buf, 1)
	} else {
		w.buf = append(w.buf, 0)
	}
}

func (w *snapWriter) node(t *Tree, n *Node) {
	switch {
	case n.Link != nil:
		w.buf = append(w.buf, kindLink)
	case n.File != nil:
		w.buf = append(w.buf, kindFile)
	default:
		w.buf = append(w.buf, kindDir)
	}
	w.str(n.Name)
	w.uint(n.Ino)
	w.int(n.Mtime)
	w.uint(uint64(n.Nsec))
	switch {
	case n.Link != nil:
		w.str(n.Link.Target)
	case n.File != nil:
		w.file(n.File)
	default:
		w.bool(t.recorded[n])
		w.uint(uint64(len(n.Children)))
		for _, c := range n.Children {
			w.node(t, c)
		}
	}
}

func (w *snapWriter) file(f *File) {
	w.str(f.Slug)
	w.str(f.SHA256)
	w.bool(f.Version == f.SHA256) // the usual case: written once
	if f.Version != f.SHA256 {
		w.str(f.Version)
	}
	w.str(f.URI())
	w.bool(f.Exec)
	size, _ := f.Size()
	w.int(size)
	w.ints(f.Chunks)
	w.uint(uint64(len(f.ChunkSHA256())))
	for _, s := range f.ChunkSHA256() {
		w.str(s)
	}
	if f.Records() == nil {
		w.uint(0)
		return
	}
	w.uint(uint64(len(f.Records())) + 1)
	for _, p := range f.Records() {
		w.str(p.ID)
		w.int(p.From)
		w.int(p.To)
		w.str(p.Text)
	}
}

// ints writes a list that may be nil (count+1; 0 for nil).
func (w *snapWriter) ints(v []int64) {
	if v == nil {
		w.uint(0)
		return
	}
	w.uint(uint64(len(v)) + 1)
	for _, n := range v {
		w.int(n)
	}
}

// FromSnapshot decodes a snapshot. Any inconsistency is an error wrapping
// ErrSnapshot (the caller loads the tree the long way), never a panic.
func FromSnapshot(b []byte) (t *Tree, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("%w: %v", ErrSnapshot, r)
		}
	}()
	if len(b) < len(snapshotMagic) || string(b[:len(snapshotMagic)]) != snapshotMagic {
		return nil, fmt.Errorf("%w: no magic", ErrSnapshot)
	}
	r := &snapReader{b: b[len(snapshotMagic):]}
	t = &Tree{Version: r.str()}
	t.Files, t.Dirs, t.Links = r.count(), r.count(), r.count()
	t.Root = r.node(t, nil, 0)
	if n := r.count(); r.err == nil {
		t.Hidden, t.HiddenKnown = make([]string, 0, n), true
		for i := 0; i < n && r.err == nil; i++ {
			t.Hidden = append(t.Hidden, r.str())
		}
	}
	if r.byte() == 1 {
		t.Report = r.node(t, t.Root, 1)
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 || t.Root.File != nil || t.Root.Link != nil || t.Root.Ino != RootIno {
		return nil, fmt.Errorf("%w: trailing bytes or a root that is not the root", ErrSnapshot)
	}
	if rp := t.Report; rp != nil && (rp.File == nil || rp.Name != ReportPath) {
		return nil, fmt.Errorf("%w: a report that is not the report", ErrSnapshot)
	}
	return t, nil
}

type snapReader struct {
	b   []byte
	err error
}

func (r *snapReader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrSnapshot, what)
	}
	r.b = nil
}

func (r *snapReader) uint() uint64 { return varint(r, binary.Uvarint) }
func (r *snapReader) int() int64   { return varint(r, binary.Varint) }

// varint reads one varint with read (binary.Uvarint or binary.Varint).
func varint[T uint64 | int64](r *snapReader, read func([]byte) (T, int)) T {
	v, n := read(r.b)
	if n <= 0 {
		r.fail("truncated")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a length, bounded by what is left (each item takes a byte).
func (r *snapReader) count() int {
	n := r.uint()
	if n > uint64(len(r.b))+1 {
		r.fail("a count larger than the snapshot")
		return 0
	}
	return int(n)
}

func (r *snapReader) str() string {
	n := r.uint()
	if n > uint64(len(r.b)) {
		r.fail("truncated string")
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *snapReader) byte() byte {
	if len(r.b) == 0 {
		r.fail("truncated")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// maxSnapshotDepth bounds the nesting a snapshot may claim (a path has at
// most DefaultLimits.MaxDepth components): a damaged one cannot recurse
// without end.
const maxSnapshotDepth = 256

func (r *snapReader) node(t *Tree, parent *Node, depth int) *Node {
	if depth > maxSnapshotDepth {
		r.fail("nested too deep")
		return &Node{}
	}
	kind := r.byte()
	n := &Node{Name: r.str(), Ino: r.uint(), Parent: parent, Mtime: r.int(), Nsec: uint32(r.uint())}
	switch kind {
	case kindLink:
		n.Link = &Link{Target: r.str()}
	case kindFile:
		n.File = r.file()
	case kindDir:
		if r.byte() == 1 {
			if t.recorded == nil {
				t.recorded = map[*Node]bool{}
			}
			t.recorded[n] = true
		}
		count := r.count()
		n.Children = make([]*Node, 0, count)
		for i := 0; i < count && r.err == nil; i++ {
			c := r.node(t, n, depth+1)
			if c.IsDir() {
				n.subdirs++
			}
			n.Children = append(n.Children, c)
		}
	default:
		r.fail("unknown node kind")
	}
	return n
}

func (r *snapReader) file() *File {
	f := &File{Slug: r.str(), SHA256: r.str()}
	if r.byte() == 1 {
		f.Version = f.SHA256
	} else {
		f.Version = r.str()
	}
	var el Elsewhere
	el.URI, f.Exec = r.str(), r.byte() == 1
	f.size.Store(r.int())
	f.Chunks = r.ints()
	if n := r.count(); n > 0 {
		el.ChunkSHA256 = make([]string, n)
		for i := range el.ChunkSHA256 {
			el.ChunkSHA256[i] = r.str()
		}
	}
	if n := r.count(); n > 0 {
		el.Records = make([]Part, n-1)
		for i := range el.Records {
			el.Records[i] = Part{ID: r.str(), From: r.int(), To: r.int(), Text: r.str()}
		}
	}
	f.setElsewhere(el)
	return f
}

func (r *snapReader) ints() []int64 {
	n := r.count()
	if n == 0 {
		return nil
	}
	out := make([]int64, n-1)
	for i := range out {
		out[i] = r.int()
	}
	return out
}
