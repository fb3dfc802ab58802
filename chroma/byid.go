package chroma

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
)

// ErrRecreated: the collection under this name is not the one whose id
// the store was opened with (deleted and created again).
var ErrRecreated = errors.New("collection was re-created")

// OpenByID is Open for a collection whose id the caller remembers from an
// earlier mount (the host tier keeps it): nothing is requested until the
// store is used, and LoadTreeCached then costs one request, the tree
// header, addressed by id. The collection itself is opened on the first
// content read that needs it. If the id no longer names a collection, the
// header request fails with ErrNotFound and the caller opens it by name
// (Reopen, in place); until then, if the name names another collection,
// reads fail with ErrRecreated instead of mixing two collections.
func OpenByID(cfg Config, id string) (*Store, error) {
	s, err := newStore(cfg, nil)
	if err != nil {
		return nil, err
	}
	s.id = id
	return s, nil
}

// Reopen opens the collection by its name again, in place, for a store
// opened by an id the server no longer knows (the collection was deleted,
// or deleted and created again under its name): from then on the store,
// and whatever reads through it, reads the collection the name names now
// (its ID and Identity are that one's). One request.
func (s *Store) Reopen(ctx context.Context) error {
	return s.connect(ctx, s.ef, false, true)
}

// collection returns the opened collection, opening it by name first when
// the store was opened by id.
func (s *Store) collection(ctx context.Context) (v2.Collection, error) {
	s.mu.Lock()
	coll := s.coll
	s.mu.Unlock()
	if coll != nil {
		return coll, nil
	}
	if err := s.connect(ctx, s.ef, false, false); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.coll, nil
}

// callColl is call with the opened collection.
func (s *Store) callColl(ctx context.Context, fn func(ctx context.Context, coll v2.Collection) error) error {
	coll, err := s.collection(ctx)
	if err != nil {
		return err
	}
	return s.call(ctx, func(ctx context.Context) error { return fn(ctx, coll) })
}

// sender is what chroma-go's HTTP client offers for a request it does not
// model: authentication and default headers added, errors as its own.
type sender interface {
	SendRequest(*http.Request) (*http.Response, error)
	BaseURL() string
}

// getByID is a record get addressed by the collection's id, for a store
// whose collection is not opened: the same request chroma-go sends for
// Collection.Get, through the same client.
func (s *Store) getByID(ctx context.Context, ids []string, include ...v2.Include) (v2.GetResult, error) {
	snd, ok := s.client.(sender)
	if !ok {
		return nil, errors.New("chroma client cannot send a request by collection id")
	}
	body, err := json.Marshal(map[string]any{"ids": ids, "include": include})
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
	req.Header.Set("Content-Type", "application/json")
	resp, err := snd.SendRequest(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var res v2.GetResultImpl
	if err := json.Unmarshal(data, &res); err != nil {
		return nil, fmt.Errorf("decode get result: %w", err)
	}
	return &res, nil
}

// opened reports whether the collection has been opened.
func (s *Store) opened() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.coll != nil
}
