package fusefs

import (
	"bytes"
	"strings"
	"syscall"
	"testing"

	"github.com/chromafs/chromafs/tree"
)

// TestPieces: a page's chunks reach the kernel as its exact bytes, in
// pieces of at most the buffer's size at offsets that are multiples of it
// (page-aligned, so that every page but the last is whole), and the first
// refusal stops the push.
func TestPieces(t *testing.T) {
	var chunks [][]byte
	var want []byte
	for i, n := range []int{0, 7, 4096, 3, 10000, 1, 8191, 20000} {
		c := bytes.Repeat([]byte{byte('a' + i)}, n)
		chunks, want = append(chunks, c), append(want, c...)
	}
	for _, size := range []int{4096, 8192, 1 << 16} {
		var got []byte
		var offs []int64
		errno := pieces(chunks, make([]byte, size), func(off int64, b []byte) syscall.Errno {
			if off != int64(len(got)) || off%int64(size) != 0 || len(b) > size {
				t.Errorf("size %d: a piece of %d bytes at %d after %d bytes", size, len(b), off, len(got))
			}
			got, offs = append(got, b...), append(offs, off)
			return 0
		})
		if errno != 0 || !bytes.Equal(got, want) {
			t.Errorf("size %d: errno %v, %d bytes (want %d), equal %v", size, errno, len(got), len(want), bytes.Equal(got, want))
		}
		if n := (len(want) + size - 1) / size; len(offs) != n {
			t.Errorf("size %d: %d pieces, want %d", size, len(offs), n)
		}
	}
	calls := 0
	errno := pieces(chunks, make([]byte, 4096), func(int64, []byte) syscall.Errno { calls++; return syscall.ENOENT })
	if errno != syscall.ENOENT || calls != 1 {
		t.Errorf("a refused piece: errno %v after %d calls, want ENOENT after 1", errno, calls)
	}
	if errno := pieces(nil, make([]byte, 4096), func(int64, []byte) syscall.Errno { t.Error("an empty page emitted a piece"); return 0 }); errno != 0 {
		t.Errorf("an empty page: %v", errno)
	}
}

// prefetchLog is a Reader that records the directories it is told to
// prefetch; it holds no page.
type prefetchLog struct {
	Reader
	dirs []string
}

func (p *prefetchLog) Prefetch(dir *tree.Node, _ *tree.File) { p.dirs = append(p.dirs, dir.Path()) }

func (p *prefetchLog) Resident(*tree.File) ([][]byte, bool) { return nil, false }

// TestScanListingMovesPrefetchOn: a walk that reads what it lists (grep
// -r) reads pushed pages in the kernel, so its reads stop reaching the
// mount; a listing under the scan tells the engine instead, so that the
// prefetch keeps running ahead of it. A listing with no scan (a find)
// tells it nothing.
func TestScanListingMovesPrefetchOn(t *testing.T) {
	tr := build(t, `{"a/p":{"isPublic":true,"sha256":"11","size":3,"chunks":[3]},"a/b/q":{"isPublic":true,"sha256":"22","size":3,"chunks":[3]}}`)
	rd := &prefetchLog{}
	f := New(tr, rd, Config{})
	defer f.Close()
	a := f.newNode(tr.Lookup("a")).(*dirNode)
	b := f.newNode(tr.Lookup("a/b")).(*dirNode)
	f.known(a.node().Ino, a)
	f.known(b.node().Ino, b)

	b.pushListed(b.v.Load(), 3)
	if len(rd.dirs) != 0 {
		t.Fatalf("a listing with no scan prefetched %v", rd.dirs)
	}
	a.listed.Store(true)
	f.markRead(tr.Lookup("a")) // a page of a read after a's listing: a walk
	b.pushListed(b.v.Load(), 3)
	if strings.Join(rd.dirs, ",") != "a/b" {
		t.Errorf("a listing under a scan prefetched %v, want a/b", rd.dirs)
	}
}
