package fusefs

import (
	"bytes"
	"syscall"
	"testing"
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
