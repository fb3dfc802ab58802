package tree

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/klauspost/compress/gzip"
)

// Encode returns the tree JSON for entries: an object keyed by slug, keys in
// sorted order, so equal trees encode to equal bytes.
func Encode(entries map[string]Entry) ([]byte, error) {
	norm := make(map[string]Entry, len(entries))
	for slug, e := range entries {
		if e.Groups == nil {
			e.Groups = []string{}
		}
		norm[slug] = e
	}
	raw, err := json.Marshal(norm)
	if err != nil {
		return nil, fmt.Errorf("encode path tree: %w", err)
	}
	return raw, nil
}

// Wrap compresses tree JSON into the stored form: base64(gzip(JSON)).
func Wrap(raw []byte) (string, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return "", fmt.Errorf("wrap path tree: %w", err)
	}
	if _, err := zw.Write(raw); err != nil {
		return "", fmt.Errorf("wrap path tree: %w", err)
	}
	if err := zw.Close(); err != nil {
		return "", fmt.Errorf("wrap path tree: %w", err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes()), nil
}
