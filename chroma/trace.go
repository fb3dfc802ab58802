package chroma

import (
	"context"
	"slices"
	"sync"
	"time"
)

// Trace records the requests sent to Chroma under one context (a mount
// until it answers, an attach): how many, and how many of them ran one
// after another — the round trips the caller waited for, what a
// server 25-80 ms away multiplies. Requests sent at once count as one
// round trip.
type Trace struct {
	mu    sync.Mutex
	spans []span
}

type span struct{ start, end time.Time }

type traceKey struct{}

// WithTrace returns a context whose requests t records.
func WithTrace(ctx context.Context) (context.Context, *Trace) {
	t := &Trace{}
	return context.WithValue(ctx, traceKey{}, t), t
}

// traceOf is the trace of ctx, or nil.
func traceOf(ctx context.Context) *Trace {
	t, _ := ctx.Value(traceKey{}).(*Trace)
	return t
}

// begin records a request starting now; the func returned records its
// answer.
func (t *Trace) begin() func() {
	start := time.Now()
	return func() {
		end := time.Now()
		t.mu.Lock()
		t.spans = append(t.spans, span{start, end})
		t.mu.Unlock()
	}
}

// Requests is how many requests were answered (or failed).
func (t *Trace) Requests() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.spans)
}

// RoundTrips is the longest chain of requests each sent after the one
// before was answered (its body read), and the time at least one request
// was in flight: what the caller waited for Chroma. Every request counts
// (a page of a paged get, a retry after a 429, a failure); the waits
// between retries do not.
func (t *Trace) RoundTrips() (int, time.Duration) {
	t.mu.Lock()
	spans := slices.Clone(t.spans)
	t.mu.Unlock()
	// the longest chain of non-overlapping spans: earliest end first
	slices.SortFunc(spans, func(a, b span) int { return a.end.Compare(b.end) })
	var n int
	var last time.Time
	for _, s := range spans {
		if n == 0 || !s.start.Before(last) {
			n++
			last = s.end
		}
	}
	// the union of the spans: earliest start first
	slices.SortFunc(spans, func(a, b span) int { return a.start.Compare(b.start) })
	var busy time.Duration
	var from, to time.Time
	for i, s := range spans {
		switch {
		case i == 0:
			from, to = s.start, s.end
		case s.start.After(to):
			busy += to.Sub(from)
			from, to = s.start, s.end
		case s.end.After(to):
			to = s.end
		}
	}
	if len(spans) > 0 {
		busy += to.Sub(from)
	}
	return n, busy
}
