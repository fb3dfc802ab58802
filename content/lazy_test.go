package content

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/chromafs/chromafs/tree"
)

// fakeURIs serves lazy pointers from memory and records each range asked.
type fakeURIs struct {
	mu     sync.Mutex // protects the following
	data   map[string][]byte
	ranges []string
}

func (f *fakeURIs) FetchRange(_ context.Context, uri string, off, n int64) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ranges = append(f.ranges, fmt.Sprintf("%s@%d+%d", uri, off, n))
	d := f.data[uri]
	if off+n > int64(len(d)) {
		return nil, errors.New("short")
	}
	return append([]byte(nil), d[off:off+n]...), nil
}

func hexSum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func lazyTree(t *testing.T, data []byte, piece int) *tree.Tree {
	t.Helper()
	var lens, sums []string
	for off := 0; off < len(data); off += piece {
		p := data[off:min(off+piece, len(data))]
		lens = append(lens, fmt.Sprint(len(p)))
		sums = append(sums, `"`+hexSum(p)+`"`)
	}
	doc := fmt.Sprintf(`{"big":{"isPublic":true,"path":"big.bin","uri":"http://h/big","sha256":"%s","chunks":[%s],"chunk_sha256":[%s]},
	 "whole":{"isPublic":true,"path":"whole.bin","uri":"http://h/whole","sha256":"%s","size":%d}}`,
		hexSum(data), strings.Join(lens, ","), strings.Join(sums, ","), hexSum(data), len(data))
	d, err := tree.Decode([]byte(doc), tree.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	return tree.BuildVisible(d, nil, tree.DefaultLimits)
}

// TestLazyPointerReads: a ranged read of a lazy page fetches only the
// pieces it covers, verified; a page without pieces is fetched whole and
// checked against its digest; a resource that changed is ErrBadPage.
func TestLazyPointerReads(t *testing.T) {
	data := bytes.Repeat([]byte("lazy pointer bytes "), 2000) // 38,000 bytes
	tr := lazyTree(t, data, 4096)
	uris := &fakeURIs{data: map[string][]byte{"http://h/big": data, "http://h/whole": data}}
	e := New(tr, &fakeSource{}, Config{URIs: uris, WindowBytes: 8192, Prefetch: PrefetchAll})
	defer e.Close()
	e.Start()
	big := tr.Lookup("big.bin").File
	buf := make([]byte, 100)
	n, err := e.ReadAt(context.Background(), big, buf, 20000)
	if err != nil || !bytes.Equal(buf[:n], data[20000:20100]) {
		t.Fatalf("ranged read: %d, %v", n, err)
	}
	e.Close() // prefetch all finished: it must not have taken pointers
	uris.mu.Lock()
	got := strings.Join(uris.ranges, " ")
	uris.mu.Unlock()
	if got != "http://h/big@16384+8192" {
		t.Errorf("ranges fetched: %q, want one window of two pieces", got)
	}
	e = New(tr, &fakeSource{}, Config{URIs: uris})
	defer e.Close()
	whole := tr.Lookup("whole.bin").File
	if n, err := e.ReadAt(context.Background(), whole, buf, 37950); err != nil || !bytes.Equal(buf[:n], data[37950:]) {
		t.Errorf("whole read: %d, %v", n, err)
	}
	changed := append([]byte(nil), data...)
	changed[30000] ^= 1
	uris.data["http://h/big"], uris.data["http://h/whole"] = changed, changed
	e = New(tr, &fakeSource{}, Config{URIs: uris, WindowBytes: 8192})
	defer e.Close()
	if _, err := e.ReadAt(context.Background(), big, buf, 28700); !errors.Is(err, ErrBadPage) {
		t.Errorf("changed piece: %v, want ErrBadPage", err)
	}
	if n, err := e.ReadAt(context.Background(), big, buf, 0); err != nil || !bytes.Equal(buf[:n], data[:100]) {
		t.Errorf("an unchanged piece of a changed resource: %d, %v", n, err)
	}
	if _, err := e.ReadAt(context.Background(), whole, buf, 0); !errors.Is(err, ErrBadPage) {
		t.Errorf("changed whole page: %v, want ErrBadPage", err)
	}
	none := New(tr, &fakeSource{}, Config{})
	defer none.Close()
	if _, err := none.ReadAt(context.Background(), big, buf, 0); !errors.Is(err, ErrBadPage) {
		t.Errorf("no URI source: %v", err)
	}
}

// TestMappedPageVerified: the parts of a page mapped onto another tool's
// records are checked against their digests; a record changed since the
// index is ErrBadPage, never its new bytes.
func TestMappedPageVerified(t *testing.T) {
	doc := fmt.Sprintf(`{"m":{"isPublic":true,"path":"m.md","records":[{"id":"r1","from":0,"to":5},{"text":"\n"}],"chunk_sha256":["%s","%s"]}}`,
		hexSum([]byte("hello")), hexSum([]byte("\n")))
	d, err := tree.Decode([]byte(doc), tree.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	tr := tree.BuildVisible(d, nil, tree.DefaultLimits)
	fl := tr.Lookup("m.md").File
	buf := make([]byte, 10)
	for source, want := range map[string]error{"hello": nil, "HELLO": ErrBadPage} {
		e := New(tr, &fakeSource{pages: map[string][]string{"m": {source, "\n"}}}, Config{Prefetch: PrefetchNone})
		n, err := e.ReadAt(context.Background(), fl, buf, 0)
		if !errors.Is(err, want) || (want == nil && string(buf[:n]) != "hello\n") {
			t.Errorf("record %q: %q, %v; want %v", source, buf[:n], err, want)
		}
		e.Close()
	}
}
