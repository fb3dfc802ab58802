package tree

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestInflateAsItComes: a stored tree several times inflateStep long,
// read as it is inflated, gives what its JSON read whole gives (entries,
// warnings, version), also where it outgrows the buffer first sized for
// it; a stream that fails its checksum or its trailer's size, ends early
// or grows past the limit is refused, though its JSON was read.
func TestInflateAsItComes(t *testing.T) {
	doc := benchDoc(t, 2000)
	gz, err := base64.StdEncoding.DecodeString(string(doc))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := gunzip(gz, DefaultLimits.MaxDecoded)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) < 4*inflateStep {
		t.Fatalf("the document is %d bytes of JSON: too short to be read as it comes", len(raw))
	}
	raw = append(raw[:len(raw)-1], `,"bad":{"isPublic":true,"size":-1}}`...) // and a warning
	want, err := Decode(raw, DefaultLimits)
	if err != nil || want.Len() != 2000 || want.Warnings.Count() != 1 {
		t.Fatalf("the JSON read whole: %v, %+v", err, want)
	}
	wrap := func(raw []byte) []byte {
		s, err := Wrap(raw)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := base64.StdEncoding.DecodeString(s)
		return b
	}
	stored := func(gz []byte) []byte { return []byte(base64.StdEncoding.EncodeToString(gz)) }
	trailer := func(gz []byte, size uint32) []byte {
		gz = bytes.Clone(gz)
		binary.LittleEndian.PutUint32(gz[len(gz)-4:], size)
		return gz
	}
	good := wrap(raw)
	if got, err := Decode(stored(good), DefaultLimits); err != nil || !reflect.DeepEqual(got.list, want.list) ||
		!reflect.DeepEqual(got.Warnings, want.Warnings) || got.Version != want.Version {
		t.Errorf("read as it comes: %v; want the document read whole", err)
	}

	// a big file's chunk lengths compress 100s of times: past the 32 times
	// the buffer is first sized for (gunzippedSize), it grows as it is read
	chunks := strings.Repeat("6144,", 100_000)
	dense := []byte(`{"big":{"isPublic":true,"path":"big.bin","size":614400001,"chunks":[` + chunks + `1]},"z":{"isPublic":true}}`)
	if gunzippedSize(wrap(dense)) >= int64(len(dense)) {
		t.Fatalf("the dense document compresses %d to %d bytes: the buffer would not grow", len(dense), len(wrap(dense)))
	}
	wantDense, err := Decode(dense, DefaultLimits)
	if err != nil || wantDense.Len() != 2 {
		t.Fatalf("the dense JSON read whole: %v", err)
	}
	if got, err := Decode(stored(wrap(dense)), DefaultLimits); err != nil || !reflect.DeepEqual(got.list, wantDense.list) || got.Version != wantDense.Version {
		t.Errorf("the dense document read as it comes: %v; want it read whole", err)
	}

	crc := bytes.Clone(good)
	crc[len(crc)-8] ^= 1
	lim := DefaultLimits
	lim.MaxDecoded = int64(len(raw)) - 1
	for _, c := range []struct {
		name string
		gz   []byte
		lim  Limits
		want string
	}{
		{"a wrong checksum", crc, DefaultLimits, "corrupt or truncated gzip"},
		{"a trailer saying 10 bytes", trailer(good, 10), DefaultLimits, "corrupt or truncated gzip"},
		{"cut short", good[:len(good)/2], DefaultLimits, "corrupt or truncated gzip"},
		{"one byte past the limit", good, lim, "more than the"},
		{"not gzip", []byte("not gzip at all"), DefaultLimits, "not gzip"},
		{"a negative limit", good, Limits{MaxDecoded: -2}, "more than the"},
	} {
		if d, err := Decode(stored(c.gz), c.lim); err == nil || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, %v; want an error saying %q", c.name, d, err, c.want)
		}
	}
}
