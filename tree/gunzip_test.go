package tree

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// TestGunzippedSize: the buffer's size comes from the gzip trailer when
// it is honest, and a lying one cannot make it large.
func TestGunzippedSize(t *testing.T) {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	text := []byte(hex.EncodeToString(bytes.Repeat([]byte("chromafs"), 10)))
	for i := 0; len(text) < 30000; i++ { // compresses as a tree does, a few times, not 200 times
		sum := sha256.Sum256([]byte{byte(i), byte(i >> 8)})
		text = append(text, hex.EncodeToString(sum[:])...)
	}
	_, _ = zw.Write(text)
	_ = zw.Close()
	gz := b.Bytes()
	if got := gunzippedSize(gz); got != int64(len(text)) {
		t.Fatalf("honest trailer: %d, want %d", got, len(text))
	}
	lying := bytes.Clone(gz)
	binary.LittleEndian.PutUint32(lying[len(lying)-4:], 0xffffffff)
	if got := gunzippedSize(lying); got > 32*int64(len(lying)) {
		t.Fatalf("a trailer claiming 4 GiB sized the buffer at %d bytes for %d of input", got, len(lying))
	}
	if _, err := gunzip(lying, 1<<20); err == nil {
		t.Fatal("gunzip took a stream whose trailer lies about its size")
	}
	if out, err := gunzip(gz, 1<<20); err != nil || !bytes.Equal(out, text) {
		t.Fatalf("gunzip: %d bytes, %v", len(out), err)
	}
	if gunzippedSize(gz[:10]) != 0 {
		t.Fatal("a truncated stream gave a size")
	}
}
