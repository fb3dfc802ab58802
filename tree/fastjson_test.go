package tree

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzFastScan: wherever the scanner reads a document, the tree document
// it gives is the one the general JSON decoder gives — same entries, same
// warnings — and the general decoder accepts the document too.
func FuzzFastScan(f *testing.F) {
	for _, seed := range []string{
		`{"guides/auth/oauth":{"isPublic":true,"groups":[]},"internal/billing":{"isPublic":false,"groups":["admin"]}}`,
		`{"b":{"isPublic":true,"path":"b.md","size":3,"chunks":[1,2],"sha256":"` + strings.Repeat("a", 64) + `"},"a":{"isPublic":true}}`,
		`{"a":{"isPublic":1},"a":{"isPublic":true,"path":"x\u00e9\n"},"c":null,"d":[1,{"x":[]}],"e":"s","f":-0.5e+3}`,
		`{"a":{"PATH":"x"}}`, `{"a\u0062":{}}`, `{"é":{}}`, `{"a":{"unknown":{"deep":[[[]]]},"mtime":1,"mtime_ns":2,"exec":true}}`,
		`{"a":{"isPublic":true,"type":"symlink","target":"../b","records":[{"id":"r","from":0,"to":3}],"chunk_sha256":["x"]}}`,
		` { } `, `{}x`, `{"a":{"isPublic":tru}}`, `{"a":{"path":"\x01"}}`, `{"a":{"size":01}}`, `[]`, `null`,
	} {
		f.Add([]byte(seed))
	}
	if raw, err := os.ReadFile(filepath.Join("testdata", "mintlify-tree.json")); err == nil {
		f.Add(raw)
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		list, ok := scanTree(wholeFeed(raw))
		for _, step := range []int{1, 7} { // as it comes: the same, wherever its prefixes end
			if dl, dok := scanTree(&drip{b: raw, step: step}); dok != ok || !reflect.DeepEqual(dl, list) {
				t.Fatalf("read %d bytes at a time: ok %v, %d entries; read whole: ok %v, %d entries", step, dok, len(dl), ok, len(list))
			}
		}
		if !ok {
			return
		}
		fast, err := newDoc(docVersion(raw), sortUnique(list), DefaultLimits)
		if err != nil {
			t.Fatalf("scanned document rejected: %v", err)
		}
		general, err := decodeGeneral(raw)
		if err != nil {
			t.Fatalf("the scanner read a document the general decoder rejects: %v", err)
		}
		want, err := newDoc(docVersion(raw), general, DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(fast.list, want.list) ||
			!reflect.DeepEqual(fast.Warnings, want.Warnings) || fast.kinds != want.kinds {
			t.Fatalf("scanner and general decoder differ:\nfast    %+v %v\ngeneral %+v %v", fast.list, fast.Warnings, want.list, want.Warnings)
		}
	})
}

// TestFastScanTakesIngestTrees: the trees chromafs-ingest writes are read
// by the scanner (else big trees would take the slow path unnoticed).
func TestFastScanTakesIngestTrees(t *testing.T) {
	size := int64(3)
	raw, err := Encode(map[string]Entry{
		"a/b": {IsPublic: true, Groups: []string{"g"}, Path: "a/b.md", Size: &size, Mtime: 1, MtimeNsec: 2, Exec: true,
			Chunks: []int64{1, 2}, SHA256: strings.Repeat("a", 64)},
		"l":       {IsPublic: true, Type: TypeSymlink, Target: "a/b.md", Path: "l"},
		"ü/\"q\"": {IsPublic: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := scanTree(wholeFeed(raw)); !ok {
		t.Fatalf("the scanner gave up on an ingest tree:\n%s", raw)
	}
}

// drip is a feed that gives its document step bytes more at each grow
// (or as many as asked, if more), as an inflate whose prefixes end
// anywhere.
type drip struct {
	b    []byte
	n    int
	step int
}

func (d *drip) bytes() []byte { return d.b[:d.n] }
func (d *drip) size() int     { return len(d.b) }
func (d *drip) grow(have, want int) ([]byte, bool) {
	d.n = min(len(d.b), max(want, d.n+d.step))
	return d.b[:d.n], d.n > have
}
func (d *drip) all() ([]byte, string, error) { d.n = len(d.b); return d.b, docVersion(d.b), nil }
