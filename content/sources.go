package content

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// collectionOrigin reads pages from the Source: the collection's own
// chunks, or, for a page mapped onto other writers' records (Ref.Parts),
// those records.
type collectionOrigin struct{ e *Engine }

func (collectionOrigin) name() Tier { return TierSource }

// fetch asks the source for the chunks of q's span (the whole page in one
// request when the span is the whole page).
func (o collectionOrigin) fetch(ctx context.Context, q *query) ([][]byte, error) {
	e := o.e
	var idx []int // nil: the whole page
	if q.s != wholeSpan(q.fl) {
		idx = make([]int, 0, q.s.hi-q.s.lo)
		for k := q.s.lo; k < q.s.hi; k++ {
			idx = append(idx, k)
		}
	}
	var texts []string
	err := e.fetch(ctx, &e.down, func(ctx context.Context) (err error) {
		texts, err = e.src.FetchPage(ctx, pageRef(q.fl), idx)
		return err
	})
	if err != nil {
		return nil, err
	}
	return e.fetched(texts), nil
}

// fetched converts what the source returned, counting its bytes.
func (e *Engine) fetched(texts []string) [][]byte {
	out := make([][]byte, len(texts))
	for i, t := range texts {
		out[i] = []byte(t)
		e.fetchedBytes.Add(int64(len(t)))
	}
	return out
}

// fetch runs one source call under the concurrency bound and a deadline
// per attempt, retrying retryable errors with capped, jittered backoff:
// Retries more times for failures (none while down says the source keeps
// failing), and for back-pressure (HTTP 429/503) as long as the whole
// read's budget, Timeout × (Retries+1), lasts, waiting at least what the
// source asked for (see RetryAfterer). Each attempt's outcome is noted in
// down (nil: the source has no outage memory).
func (e *Engine) fetch(ctx context.Context, down *outage, call func(context.Context) error) error {
	budget := time.Now().Add(e.cfg.Timeout * time.Duration(e.cfg.Retries+1))
	retries := e.cfg.Retries
	if down.on() {
		retries = 0
	}
	failures := 0
	for attempt := 0; ; attempt++ {
		err := e.withSlot(ctx, call)
		if ctx.Err() == nil {
			down.note(err)
		}
		if err == nil {
			return nil
		}
		e.fetchErrors.Add(1)
		backoff := min(100*time.Millisecond<<min(attempt, 5), 2*time.Second)
		if errors.Is(err, ErrBusy) { // back-pressure: ask again soon, not later and later
			backoff = min(50*time.Millisecond<<min(attempt, 5), 500*time.Millisecond)
		} else {
			failures++
		}
		backoff += rand.N(backoff / 2)
		backoff = max(backoff, retryAfter(err))
		if left := time.Until(budget); errors.Is(err, ErrBusy) && backoff > left && left > 0 {
			backoff = left // the server asks for more than is left: one last try at the end
		}
		retryable := errors.Is(err, ErrTemporary) || errors.Is(err, ErrBusy)
		if failures > retries || !retryable || ctx.Err() != nil || time.Now().Add(backoff).After(budget) {
			e.cfg.Log.Warn("fetch failed", "err", err, "attempts", attempt+1)
			return err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// RetryAfterer is implemented by source errors that carry the wait the
// server asked for (HTTP Retry-After); the engine never asks sooner.
type RetryAfterer interface{ RetryAfter() time.Duration }

func retryAfter(err error) time.Duration {
	var r RetryAfterer
	if errors.As(err, &r) {
		return r.RetryAfter()
	}
	return 0
}

// withSlot waits for a slot (or for ctx) and runs call in it. Once sent, a
// request runs to its end or its deadline even when ctx ends (every reader
// left): the server counts it until then, so freeing its slot earlier would
// let more requests run at the server than the bound allows. Its result is
// still cached. Only Close cancels it.
func (e *Engine) withSlot(ctx context.Context, call func(context.Context) error) error {
	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-e.sem }()
	e.fetches.Add(1)
	rctx, cancel := context.WithTimeout(e.ctx, e.cfg.Timeout)
	defer cancel()
	start := time.Now()
	defer func() { e.cfg.Observe("source", time.Since(start)) }()
	return call(rctx)
}
