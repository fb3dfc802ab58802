package chroma

import (
	"bytes"
	"context"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
	json "github.com/goccy/go-json"
)

// A get's answer is decoded here, not by chroma-go. Collection.Get reads
// the body into a string, copies it back to bytes, decodes it into
// generic maps and copies every value again into its own types: for 100
// chunks of 3 KiB that is about 5x the CPU and 6x the garbage of decoding
// the same body into records with goccy/go-json (BenchmarkDecodeGet), and
// a cold `grep -r` over a mount spent most of its CPU there. The request
// is still chroma-go's: its get operation, validated and marshalled as
// Collection.Get does, sent through its client (authentication, default
// headers, its errors for an answer of 4xx or 5xx). Only the decoding is
// ours.

// records is a get's answer: ids, and per record (in the same order)
// its document, metadata and embedding, each nil when not included or
// null.
type records struct {
	IDs        []string    `json:"ids"`
	Documents  []*string   `json:"documents"`
	Metadatas  []fields    `json:"metadatas"`
	Embeddings [][]float32 `json:"embeddings"`
}

// Count is how many records the answer holds.
func (r *records) Count() int { return len(r.IDs) }

// documentAt is record i's document; "" when absent.
func documentAt(r *records, i int) string {
	if i >= len(r.Documents) || r.Documents[i] == nil {
		return ""
	}
	return *r.Documents[i]
}

// metadataAt is record i's metadata; nil when absent or null.
func metadataAt(r *records, i int) metadata {
	if i >= len(r.Metadatas) || r.Metadatas[i] == nil {
		return nil
	}
	return r.Metadatas[i]
}

// metadata is what this package reads of a record's metadata. Both
// fields and chroma-go's DocumentMetadata have it.
type metadata interface {
	GetString(key string) (string, bool)
	GetInt(key string) (int64, bool)
	GetFloat(key string) (float64, bool)
}

// fields is one record's metadata as the server sent it: each key's value
// as JSON text, decoded when it is asked for. Keys match exactly (a
// struct would match them case-insensitively).
type fields map[string]json.RawMessage

// GetString is key's value when it is a string.
func (f fields) GetString(key string) (string, bool) {
	v := f[key]
	if len(v) == 0 || v[0] != '"' {
		return "", false
	}
	if bytes.IndexByte(v, '\\') < 0 { // a valid JSON string: its bytes, unescaped
		return string(v[1 : len(v)-1]), true
	}
	var s string
	if json.Unmarshal(v, &s) != nil {
		return "", false
	}
	return s, true
}

// GetInt is key's value when it is a number written without a fraction or
// an exponent (chroma-go's rule for an integer).
func (f fields) GetInt(key string) (int64, bool) {
	v, ok := f.number(key)
	if !ok || bytes.ContainsAny(v, ".eE") {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	return n, err == nil
}

// GetFloat is key's value when it is a number written with a fraction or
// an exponent.
func (f fields) GetFloat(key string) (float64, bool) {
	v, ok := f.number(key)
	if !ok || !bytes.ContainsAny(v, ".eE") {
		return 0, false
	}
	x, err := strconv.ParseFloat(string(v), 64)
	return x, err == nil
}

func (f fields) number(key string) ([]byte, bool) {
	v := f[key]
	if len(v) == 0 || (v[0] != '-' && (v[0] < '0' || v[0] > '9')) {
		return nil, false
	}
	return v, true
}

// plain is the metadata as a plain map, numbers as json.Number.
func (f fields) plain() map[string]any {
	out := make(map[string]any, len(f))
	for k, v := range f {
		dec := stdjson.NewDecoder(bytes.NewReader(v))
		dec.UseNumber()
		var x any
		if dec.Decode(&x) == nil {
			out[k] = x
		}
	}
	return out
}

// get is Collection.Get on the collection, opening it first when the store
// was opened by id, decoded into records; the error is the client's, for
// the caller to explain.
func (s *Store) get(ctx context.Context, opts ...v2.GetOption) (*records, error) {
	if _, err := s.collection(ctx); err != nil {
		return nil, err
	}
	var res *records
	err := s.call(ctx, func(ctx context.Context) (err error) {
		res, err = s.getRecords(ctx, opts...)
		return err
	})
	return res, err
}

// sender is what chroma-go's HTTP client offers for a request it does not
// model: authentication and default headers added, errors as its own.
type sender interface {
	SendRequest(*http.Request) (*http.Response, error)
	BaseURL() string
}

// getRecords sends Collection.Get's request to the collection of id s.ID(),
// opened or not, and decodes the answer. It does not take a slot of the
// limiter (the caller's s.call does).
func (s *Store) getRecords(ctx context.Context, opts ...v2.GetOption) (*records, error) {
	snd, ok := s.client.(sender)
	if !ok {
		return nil, errors.New("chroma client cannot send a get by collection id")
	}
	op, err := v2.NewCollectionGetOp(opts...)
	if err != nil {
		return nil, err
	}
	if err := op.PrepareAndValidate(); err != nil {
		return nil, err
	}
	body, err := stdjson.Marshal(op)
	if err != nil {
		return nil, err
	}
	u, err := url.JoinPath(snd.BaseURL(), "tenants", s.cfg.Tenant, "databases", s.cfg.Database, "collections", s.ID(), "get")
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := snd.SendRequest(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	buf := bodyBufs.Get().(*[]byte)
	defer putBody(buf)
	data, err := readBody(resp, (*buf)[:0])
	*buf = data
	if err != nil {
		return nil, fmt.Errorf("read get result: %w", err)
	}
	res := &records{}
	if err := decodeRecords(data, res); err != nil {
		return nil, err
	}
	return res, nil
}

// decodeRecords decodes a get's answer into res. An answer that is not
// UTF-8 is refused (JSON is UTF-8; chroma-go would have read its bad
// bytes as U+FFFD, goccy/go-json keeps them). Lists longer than the ids
// are refused: they would pair a document or metadata with no record.
// (The answer's own keys are matched as encoding/json matches a
// struct's, in any case, where chroma-go takes only Chroma's spelling:
// a server could as well have spelled them Chroma's way.)
func decodeRecords(data []byte, res *records) error {
	if !utf8.Valid(data) {
		return errors.New("decode get result: the answer is not UTF-8")
	}
	if err := json.Unmarshal(data, res); err != nil {
		return fmt.Errorf("decode get result: %w", err)
	}
	if len(res.Documents) > len(res.IDs) || len(res.Metadatas) > len(res.IDs) || len(res.Embeddings) > len(res.IDs) {
		return fmt.Errorf("decode get result: %d ids, %d documents, %d metadatas, %d embeddings",
			len(res.IDs), len(res.Documents), len(res.Metadatas), len(res.Embeddings))
	}
	return nil
}

// readBody reads an answer's body whole into buf's room, grown once when
// its length is announced (the transport has already refused one over the
// limit), and returns it.
func readBody(resp *http.Response, buf []byte) ([]byte, error) {
	if n := resp.ContentLength; n > 0 {
		buf = slices.Grow(buf[:0], int(n))[:n]
		if _, err := io.ReadFull(resp.Body, buf); err != nil {
			return buf[:0], err
		}
		return buf, nil
	}
	b := bytes.NewBuffer(buf[:0])
	_, err := b.ReadFrom(resp.Body)
	return b.Bytes(), err
}

// bodyBufs are the buffers answers are read into. decodeRecords's decoder
// copies the answer before it decodes it (goccy/go-json's Unmarshal), so
// nothing decoded refers to the buffer and it goes back once the answer is
// decoded: of the two copies of each answer, only the decoder's is new
// garbage (a 1,000-site run read 349 MB of answers, of the 3.9 GB its
// daemon allocated). A buffer over maxPooledBody is not kept.
var bodyBufs = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBody = 4 << 20

func putBody(buf *[]byte) {
	if cap(*buf) <= maxPooledBody {
		*buf = (*buf)[:0]
		bodyBufs.Put(buf)
	}
}
