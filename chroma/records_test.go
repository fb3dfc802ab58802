package chroma

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
)

// theirs decodes body as chroma-go's Collection.Get does.
func theirs(body []byte) (v2.GetResult, error) {
	var r v2.GetResultImpl
	err := json.Unmarshal(body, &r)
	return &r, err
}

// ours decodes body as getRecords does.
func ours(body []byte) (*records, error) {
	r := &records{}
	return r, decodeRecords(body, r)
}

var recordKeys = []string{KeyPage, KeyPageSHA, KeyChunkIndex, KeyChunkEncoding, KeyOwner, KeyTreeSHA, KeyTreeParts, "Page", "missing"}

// agree fails unless ours answers every lookup this package makes as
// chroma-go's decoding of the same body does.
func agree(t *testing.T, body []byte, a v2.GetResult, b *records) {
	t.Helper()
	if a.Count() != b.Count() {
		t.Fatalf("%s: %d records, chroma-go %d", body, b.Count(), a.Count())
	}
	for i, id := range a.GetIDs() {
		if b.IDs[i] != string(id) {
			t.Fatalf("%s: id %d %q, chroma-go %q", body, i, b.IDs[i], id)
		}
		var want string
		if docs := a.GetDocuments(); i < len(docs) && docs[i] != nil {
			want = docs[i].ContentString()
		}
		if got := documentAt(b, i); got != want {
			t.Fatalf("%s: document %d %q, chroma-go %q", body, i, got, want)
		}
		var md v2.DocumentMetadata
		if mds := a.GetMetadatas(); i < len(mds) {
			md = mds[i]
		}
		got := metadataAt(b, i)
		if (md == nil) != (got == nil) {
			t.Fatalf("%s: metadata %d nil=%v, chroma-go nil=%v", body, i, got == nil, md == nil)
		}
		if md == nil {
			continue
		}
		for _, k := range recordKeys {
			s1, ok1 := md.GetString(k)
			s2, ok2 := got.GetString(k)
			n1, nok1 := md.GetInt(k)
			n2, nok2 := got.GetInt(k)
			f1, fok1 := md.GetFloat(k)
			f2, fok2 := got.GetFloat(k)
			if s1 != s2 || ok1 != ok2 || n1 != n2 || nok1 != nok2 || (f1 != f2 && f1 == f1) || fok1 != fok2 {
				t.Fatalf("%s: record %d key %q: ours (%q %v) (%d %v) (%v %v), chroma-go (%q %v) (%d %v) (%v %v)",
					body, i, k, s2, ok2, n2, nok2, f2, fok2, s1, ok1, n1, nok1, f1, fok1)
			}
		}
		i1, e1 := chunkIndex(md)
		i2, e2 := chunkIndex(got)
		if i1 != i2 || (e1 == nil) != (e2 == nil) {
			t.Fatalf("%s: record %d chunk index %d %v, chroma-go %d %v", body, i, i2, e2, i1, e1)
		}
	}
	if len(a.GetEmbeddings()) > 0 {
		for i, e := range a.GetEmbeddings() {
			var want []float32
			if e != nil {
				want = e.ContentAsFloat32()
			}
			if len(want) == 0 && len(b.Embeddings[i]) == 0 {
				continue
			}
			if !closeTo(want, b.Embeddings[i]) {
				t.Fatalf("%s: embedding %d %v, chroma-go %v", body, i, b.Embeddings[i], want)
			}
		}
	}
}

// closeTo: a and b are the same vector, up to the rounding of a number
// read into float32 directly or through float64.
func closeTo(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if d := math.Abs(float64(a[i] - b[i])); d > 1e-6*math.Abs(float64(a[i])) {
			return false
		}
	}
	return true
}

var recordBodies = []string{
	`{"ids":["a","b"],"documents":["hello\nworld","x\"y\\z\u00e9"],"metadatas":[{"page":"docs/a.md","page_sha256":"ab","chunk_index":0},{"page":"p\u00e9/b.md","chunk_index":2.0,"chunk_encoding":"base64"}],"include":["documents","metadatas"]}`,
	`{"ids":["a"],"documents":[null],"metadatas":[null]}`,
	`{"ids":["a"],"documents":["d"],"metadatas":[{}]}`,
	`{"ids":["a","b","c"],"metadatas":[{"chunk_index":"7"},{"chunk_index":-1},{"chunk_index":1.5,"page":3}]}`,
	`{"ids":["a"],"metadatas":[{"chromafs_owner":"chromafs-ingest","chromafs_tree_parts":12,"chromafs_tree_sha256":"00"}]}`,
	`{"ids":["a"],"metadatas":[{"page":"one","Page":"two","chunk_index":1e2}]}`,
	`{"ids":["a"],"metadatas":[{"page":"x","page":"y","flag":true,"list":["a","b"]}]}`,
	`{"ids":["a","b"],"embeddings":[[0.5,-1,2e-3],[0.1]]}`,
	`{"ids":[],"documents":[],"metadatas":[]}`,
	`{"ids":["a"],"documents":["tab\there\u2028line"],"metadatas":[{"page":"a\u0000b"}]}`,
}

// TestRecordsAgreeWithChromaGo: what this package reads of a get's answer
// is what chroma-go's decoding of it gives. Null documents, which Chroma
// sends for a record written without one, chroma-go refuses; they read
// as "".
func TestRecordsAgreeWithChromaGo(t *testing.T) {
	compared := 0
	for _, body := range recordBodies {
		b, err := ours([]byte(body))
		if err != nil {
			t.Fatalf("ours refuses %s: %v", body, err)
		}
		a, err := theirs([]byte(body))
		if err != nil {
			t.Logf("chroma-go refuses %s: %v", body, err)
			continue
		}
		agree(t, []byte(body), a, b)
		compared++
	}
	if compared != len(recordBodies)-1 {
		t.Fatalf("only %d of %d answers compared", compared, len(recordBodies))
	}
}

// TestRecordsOutliveTheirBuffer: getRecords reads answers into buffers it
// reuses (bodyBufs) once decoded, so nothing decoded may refer to the
// answer's bytes: each answer, decoded and then its buffer overwritten,
// still agrees with chroma-go's decoding of it.
func TestRecordsOutliveTheirBuffer(t *testing.T) {
	for _, body := range recordBodies {
		a, err := theirs([]byte(body))
		if err != nil {
			continue
		}
		buf := []byte(body)
		b, err := ours(buf)
		if err != nil {
			t.Fatalf("ours refuses %s: %v", body, err)
		}
		for i := range buf {
			buf[i] = 'X'
		}
		agree(t, []byte(body), a, b)
	}
}

// TestReadBodyReusesItsRoom: an answer read into a buffer with room is
// read into it, whatever its length says, and a body read into one
// that is too small is read whole.
func TestReadBodyReusesItsRoom(t *testing.T) {
	const answer = `{"ids":["a"],"documents":["hello"]}`
	for _, length := range []int64{int64(len(answer)), -1} {
		room := make([]byte, 0, 4096)
		resp := &http.Response{Body: io.NopCloser(strings.NewReader(answer)), ContentLength: length}
		got, err := readBody(resp, room)
		if err != nil || string(got) != answer {
			t.Fatalf("length %d: %q, %v", length, got, err)
		}
		if &got[0] != &room[:1][0] {
			t.Errorf("length %d: read into a new buffer, not the room given", length)
		}
		small := make([]byte, 0, 3)
		resp = &http.Response{Body: io.NopCloser(strings.NewReader(answer)), ContentLength: length}
		if got, err := readBody(resp, small); err != nil || string(got) != answer {
			t.Errorf("length %d, small room: %q, %v", length, got, err)
		}
	}
	resp := &http.Response{Body: io.NopCloser(strings.NewReader("short")), ContentLength: 10}
	if _, err := readBody(resp, nil); err == nil {
		t.Error("a body shorter than its length: no error")
	}
}

// TestRecordsRefuseMalformed: an answer that is not a get result, or whose
// lists are longer than its ids, is an error, not a misread.
func TestRecordsRefuseMalformed(t *testing.T) {
	for _, body := range []string{
		``, `[]`, `{"ids":[1]}`, `{"ids":["a"],"documents":[1]}`, `{"ids":["a"],"metadatas":["x"]}`,
		`{"ids":["a"],"documents":["x","y"]}`, `{"ids":["a"],"metadatas":[{},{}]}`, `{"ids":["a"]`,
		"{\"ids\":[\"\xfc\"]}",
	} {
		if _, err := ours([]byte(body)); err == nil {
			t.Errorf("%q: no error", body)
		}
	}
}

// chromaSpelling reports whether body's keys that name a field of records
// are spelled as Chroma spells them (decodeRecords takes any case).
func chromaSpelling(body []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return false
	}
	for k := range top {
		for _, name := range []string{"ids", "documents", "metadatas", "embeddings"} {
			if strings.EqualFold(k, name) && k != name {
				return false
			}
		}
	}
	return true
}

func FuzzRecords(f *testing.F) {
	for _, b := range recordBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		b, err := ours(body)
		a, aerr := theirs(body)
		if err != nil || aerr != nil || !chromaSpelling(body) {
			return // refusing what chroma-go takes is safe; only a misread is not
		}
		agree(t, body, a, b)
	})
}

// TestGetSendsChromaGosRequest: getRecords sends what Collection.Get sends
// (the operation marshalled by chroma-go) to the collection's id, with the
// client's headers, and its answer is read.
func TestGetSendsChromaGosRequest(t *testing.T) {
	var gotPath, gotToken string
	var gotBody map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotToken = r.URL.Path, r.Header.Get("X-Chroma-Token")
		_ = json.NewDecoder(r.Body).Decode(&gotBody)
		fmt.Fprint(w, recordBodies[0])
	}))
	defer srv.Close()
	cfg := Config{URL: srv.URL, Tenant: "t", Database: "d", Collection: "c", Timeout: 5 * time.Second, MaxBody: 1 << 20, token: "tok"}
	s, err := OpenByID(cfg, "0000-id")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.getRecords(t.Context(), v2.WithIDs("a", "b"), v2.WithInclude(v2.IncludeDocuments), v2.WithLimit(5))
	if err != nil {
		t.Fatal(err)
	}
	if gotPath != "/api/v2/tenants/t/databases/d/collections/0000-id/get" || gotToken != "tok" {
		t.Errorf("sent to %s with token %q", gotPath, gotToken)
	}
	want := map[string]any{"ids": []any{"a", "b"}, "include": []any{"documents"}, "limit": float64(5)}
	for k, v := range want {
		if !reflect.DeepEqual(gotBody[k], v) {
			t.Errorf("request %s = %v, want %v (body %v)", k, gotBody[k], v, gotBody)
		}
	}
	if res.Count() != 2 || documentAt(res, 0) != "hello\nworld" {
		t.Errorf("read %d records, first %q", res.Count(), documentAt(res, 0))
	}
}

// getBody is a get's answer of n chunks of about size bytes of Markdown.
func getBody(n, size int) []byte {
	var ids, docs []string
	var mds []map[string]any
	for i := range n {
		var b strings.Builder
		for b.Len() < size {
			fmt.Fprintf(&b, "## Section %d\n\nSome \"quoted\" text with `code`, a\ttab and déjà vu, at byte %d.\n", i, b.Len())
		}
		ids = append(ids, ChunkID(fmt.Sprintf("docs/guide/page-%d.md", i), strings.Repeat("ab", 32), 0))
		docs = append(docs, b.String())
		mds = append(mds, map[string]any{KeyPage: fmt.Sprintf("docs/guide/page-%d.md", i), KeyPageSHA: strings.Repeat("ab", 32),
			KeyChunkIndex: 0, KeyChunkLine: 1, KeyOwner: OwnerIngest})
	}
	out, _ := json.Marshal(map[string]any{"ids": ids, "documents": docs, "metadatas": mds, "embeddings": nil,
		"include": []string{"documents", "metadatas"}})
	return out
}

// BenchmarkDecodeGet: a get of 100 chunks of 3 KiB, decoded as chroma-go's
// Collection.Get decodes it (its copies of the body included) and as
// getRecords does. Compare the two lines' ns/op and B/op.
func BenchmarkDecodeGet(b *testing.B) {
	body := getBody(100, 3000)
	b.Run("chroma-go", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			text := string(body) // ReadRespBody
			if _, err := theirs([]byte(text)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("records", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ours(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestNullDocumentIsAnError: a chunk whose document is null (Chroma sends
// null for a record written without one) makes its page an error, never
// a page that silently reads shorter.
func TestNullDocumentIsAnError(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	body := fmt.Sprintf(`{"ids":["a","b"],"documents":["one ",null],"metadatas":[{"page":"p.md","page_sha256":%q,"chunk_index":0},{"page":"p.md","page_sha256":%q,"chunk_index":1}]}`, sha, sha)
	res, err := ours([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]chunkMeta{}
	collect(res, got)
	if _, err := assemble(PageRef{Slug: "p.md", SHA256: sha}, got["p.md"], nil); err == nil {
		t.Error("a page with a null chunk assembled")
	}
	body = strings.Replace(body, "null", `"two"`, 1)
	if res, err = ours([]byte(body)); err != nil {
		t.Fatal(err)
	}
	got = map[string][]chunkMeta{}
	collect(res, got)
	if chunks, err := assemble(PageRef{Slug: "p.md", SHA256: sha}, got["p.md"], nil); err != nil || strings.Join(chunks, "") != "one two" {
		t.Errorf("the same page with its document: %q, %v", chunks, err)
	}
}
