package tree

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
)

// A stored tree is gzip of JSON. Inflating it was a quarter of its
// decode, and on two cores it need not wait for the scanner nor the
// scanner for all of it: one goroutine inflates (and hashes, for the
// version) into a buffer whose written prefix it publishes every
// inflateStep bytes, while the scanner reads entries from that prefix on
// the caller's (scanTree, through a feed). Bytes once published never
// change, so what the scanner reads of a prefix it would read the same of
// the whole; where a prefix ends inside what it reads, it waits for more
// and reads that part again.

// feed is a document as the scanner gets it: bytes that are final so far,
// and more as they come.
type feed interface {
	// bytes is what is final so far.
	bytes() []byte
	// grow waits until at least want bytes are final, or no more will
	// come; more is false when there are no more than have.
	grow(have, want int) (b []byte, more bool)
	// all waits for the whole document: its bytes, its version (the hex
	// SHA-256 of them) and why it could not be read whole.
	all() (b []byte, version string, err error)
	// size is the document's expected length, to allocate for.
	size() int
}

// whole is a feed of a document that is all there already.
type whole struct {
	b       []byte
	version chan string // computed beside the scan, on the other core
	v       string
}

func wholeFeed(raw []byte) *whole {
	w := &whole{b: raw, version: make(chan string, 1)}
	go func() { w.version <- docVersion(raw) }()
	return w
}

func (w *whole) bytes() []byte                { return w.b }
func (w *whole) grow(int, int) ([]byte, bool) { return w.b, false }
func (w *whole) size() int                    { return len(w.b) }
func (w *whole) all() ([]byte, string, error) {
	if w.version != nil {
		w.v, w.version = <-w.version, nil
	}
	return w.b, w.v, nil
}

// docVersion is the version of the document raw: its hex SHA-256.
func docVersion(raw []byte) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// inflateStep is how many bytes the inflating goroutine writes between two
// publications: small enough that the scanner starts early, large enough
// that waking it is rare (a 38 MB tree: 1,200 wakes).
const inflateStep = 32 << 10

// inflating is a feed of gzip data being inflated by its own goroutine.
type inflating struct {
	expect int                    // what the gzip trailer says, bounded (gunzippedSize)
	cur    atomic.Pointer[[]byte] // the final bytes; a new slice of the same bytes when the buffer grows
	more   chan struct{}          // a token after each publication (never blocking the writer)
	done   chan struct{}          // closed once the last bytes, version and err are set
	// set before done is closed
	version string
	err     error
}

// inflate starts inflating gz, at most maxDecoded bytes of it.
func inflate(gz []byte, maxDecoded int64) *inflating {
	t := &inflating{more: make(chan struct{}, 1), done: make(chan struct{})}
	t.expect = int(max(min(gunzippedSize(gz), maxDecoded), 0))
	empty := []byte{}
	t.cur.Store(&empty)
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.err = fmt.Errorf("%w: not gzip: %v", ErrInvalid, err)
		close(t.done)
		return t
	}
	go t.run(zr, maxDecoded)
	return t
}

func (t *inflating) run(zr *gzip.Reader, maxDecoded int64) {
	defer close(t.done)
	defer func() { // gzip is a dependency: never let it take the process down
		if r := recover(); r != nil {
			t.err = fmt.Errorf("%w: gzip decoder failed: %v", ErrInvalid, r)
		}
	}()
	defer zr.Close()
	h := sha256.New()
	buf := make([]byte, 0, t.expect+1) // one more: reading past what the trailer says shows it lied
	published := 0
	for {
		if len(buf) == cap(buf) { // the trailer lied or was bounded: a larger buffer (same bytes), within the limit
			more := int64(max(len(buf), inflateStep))
			if room := maxDecoded - int64(len(buf)); room < more { // room >= 0: checked below
				more = room + 1
			}
			buf = slices.Grow(buf, int(more))
		}
		n, err := zr.Read(buf[len(buf):min(cap(buf), len(buf)+inflateStep)])
		h.Write(buf[len(buf) : len(buf)+n])
		buf = buf[:len(buf)+n]
		if int64(len(buf)) > maxDecoded {
			t.err = fmt.Errorf("%w: decompresses to more than the %d-byte limit", ErrInvalid, maxDecoded)
			return
		}
		switch {
		case errors.Is(err, io.EOF):
			t.version = hex.EncodeToString(h.Sum(nil))
			t.publish(buf)
			return
		case err != nil:
			t.err = fmt.Errorf("%w: corrupt or truncated gzip: %v", ErrInvalid, err)
			return
		case len(buf)-published >= inflateStep:
			t.publish(buf)
			published = len(buf)
		}
	}
}

func (t *inflating) publish(b []byte) {
	t.cur.Store(&b)
	select {
	case t.more <- struct{}{}:
	default:
	}
}

func (t *inflating) bytes() []byte { return *t.cur.Load() }

// size is what the trailer says, bounded as the buffer is
// (gunzippedSize): a lying trailer makes the entries' list as much too
// large as the buffer, 1.5 times it at most (an item is about 300 bytes,
// estimateEntries counts one every 200). A tighter bound would cost the
// honest trees that compress the most (a deep tree of 100,000 pages: 33
// times) a list grown again and again.
func (t *inflating) size() int { return t.expect }

func (t *inflating) grow(have, want int) ([]byte, bool) {
	for {
		b := t.bytes()
		if len(b) >= want {
			return b, true
		}
		select {
		case <-t.more:
		case <-t.done:
			b = t.bytes()
			return b, len(b) > have
		}
	}
}

func (t *inflating) all() ([]byte, string, error) {
	<-t.done
	return t.bytes(), t.version, t.err
}

// gunzip inflates gz whole, at most maxDecoded bytes of it.
func gunzip(gz []byte, maxDecoded int64) ([]byte, error) {
	b, _, err := inflate(gz, maxDecoded).all()
	return b, err
}
