// Package backend adapts the backends to the read engine: a Chroma
// collection (chroma.Store) and the lazy-pointer client (lazy.Client)
// become content's neutral Source and URISource, and their errors are put
// in the engine's terms by one classifier. It is the only package that
// knows both sides, so content knows nothing of chroma-go and chroma
// nothing of the engine. chromafs-mount and chromafsd wire it alike.
package backend

import (
	"context"
	"errors"
	"fmt"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/content"
	"github.com/chromafs/chromafs/lazy"
)

// Chroma adapts st to the read engine's neutral Source: the same
// references and pages, and chroma's errors classified in the engine's
// terms (Classify).
func Chroma(st *chroma.Store) content.Source { return chromaSource{st} }

type chromaSource struct{ st *chroma.Store }

func (s chromaSource) FetchPage(ctx context.Context, ref content.Ref, idx []int) ([]string, error) {
	texts, err := s.st.FetchPage(ctx, toPageRef(ref), idx)
	return texts, Classify(err)
}

func (s chromaSource) FetchPages(ctx context.Context, refs []content.Ref) (map[string]content.Page, error) {
	crefs := make([]chroma.PageRef, len(refs))
	for i, r := range refs {
		crefs[i] = toPageRef(r)
	}
	pages, err := s.st.FetchPages(ctx, crefs)
	if err != nil {
		return nil, Classify(err)
	}
	out := make(map[string]content.Page, len(pages))
	for slug, p := range pages {
		out[slug] = content.Page{Chunks: p.Chunks, Err: Classify(p.Err)}
	}
	return out, nil
}

// toPageRef is ref in chroma's terms.
func toPageRef(ref content.Ref) chroma.PageRef {
	out := chroma.PageRef{Slug: ref.Slug, SHA256: ref.SHA256, Chunks: ref.Chunks}
	if ref.Parts != nil {
		out.Parts = make([]chroma.Part, len(ref.Parts))
		for i, p := range ref.Parts {
			out.Parts[i] = chroma.Part{ID: p.ID, From: p.From, To: p.To, Text: p.Text}
		}
	}
	return out
}

// Classify is the one classifier between the backends and the read
// engine: it wraps a chroma or lazy-pointer error with the engine's
// sentinel for its kind — back-pressure (ask again while the read's budget
// lasts), temporary (retried), an inconsistent page (EIO at once) — and
// leaves any other error as it is (not retried).
func Classify(err error) error {
	switch {
	case err == nil:
		return nil
	case chroma.Busy(err), errors.Is(err, lazy.ErrBusy):
		return fmt.Errorf("%w: %w", content.ErrBusy, err)
	case chroma.Retryable(err), errors.Is(err, lazy.ErrTemporary):
		return fmt.Errorf("%w: %w", content.ErrTemporary, err)
	case errors.Is(err, chroma.ErrBadPage):
		return fmt.Errorf("%w: %w", content.ErrBadPage, err)
	default:
		return err
	}
}

// URIs adapts the lazy-pointer client to the engine's URISource.
func URIs(c *lazy.Client) content.URISource { return uriSource{c} }

type uriSource struct{ c *lazy.Client }

func (s uriSource) FetchRange(ctx context.Context, uri string, off, n int64) ([]byte, error) {
	data, err := s.c.FetchRange(ctx, uri, off, n)
	return data, Classify(err)
}
