package fusefs

import (
	"context"
	"testing"
	"time"
)

// TestQuiet: Quiet returns once no request began for its duration,
// counted from the call at the earliest, and gives up when its context
// ends. (A request is its start time in lastOp: the test sets one in the
// future to stand for a request made while Quiet waits.)
func TestQuiet(t *testing.T) {
	const d = 20 * time.Millisecond
	f := &FS{}
	for _, c := range []struct {
		name  string
		last  time.Duration // when the last request began, from now
		after time.Duration // Quiet returns no earlier
	}{
		{"idle since long", -time.Hour, d},
		{"a request just now", 0, d},
		{"a request while it waits", 30 * time.Millisecond, 30*time.Millisecond + d},
	} {
		start := time.Now()
		f.lastOp.Store(start.Add(c.last).UnixNano())
		if !f.Quiet(t.Context(), d) {
			t.Fatalf("%s: Quiet gave up", c.name)
		}
		if took := time.Since(start); took < c.after {
			t.Errorf("%s: quiet after %v, want %v at least", c.name, took, c.after)
		}
	}
	f.busy()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if f.Quiet(ctx, time.Hour) {
		t.Fatal("Quiet reported quiet when its context had ended")
	}
}
