package chroma

import (
	"context"
	"testing"
	"time"
)

// TestTraceRoundTrips: requests sent at once are one round trip, one
// sent after another's answer a second; a context without a trace has
// none.
func TestTraceRoundTrips(t *testing.T) {
	_, tr := WithTrace(context.Background())
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	tr.spans = []span{
		{at(0), at(30)},   // the collection
		{at(30), at(60)},  // the tree's header
		{at(60), at(90)},  // its parts, at once
		{at(61), at(92)},  //
		{at(62), at(89)},  //
		{at(95), at(120)}, // after them
	}
	n, took := tr.RoundTrips()
	if n != 4 || tr.Requests() != 6 {
		t.Errorf("round trips %d of %d requests, want 4 of 6", n, tr.Requests())
	}
	if took != 117*time.Millisecond { // 0-92 and 95-120: in flight
		t.Errorf("requests were in flight for %v, want 117ms", took)
	}
	if traceOf(context.Background()) != nil {
		t.Error("a context without a trace has one")
	}
}
