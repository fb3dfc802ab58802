package fusefs

import (
	"context"
	"testing"
	"time"
)

// TestQuiet: Quiet returns once no request was served for its duration,
// counted from the call at the earliest, and gives up when its context
// ends.
func TestQuiet(t *testing.T) {
	const d = 30 * time.Millisecond
	f := &FS{}
	start := time.Now()
	if !f.Quiet(t.Context(), d) {
		t.Fatal("Quiet gave up on an idle mount")
	}
	if took := time.Since(start); took < d {
		t.Fatalf("an idle mount was quiet after %v, want %v from the call", took, d)
	}

	stop := make(chan struct{})
	busyUntil := time.Now().Add(100 * time.Millisecond)
	go func() { // requests every 5 ms for 100 ms
		for time.Now().Before(busyUntil) {
			f.busy()
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	defer close(stop)
	if !f.Quiet(t.Context(), d) {
		t.Fatal("Quiet gave up")
	}
	if last := time.Unix(0, f.lastOp.Load()); time.Since(last) < d || time.Now().Before(busyUntil) {
		t.Fatalf("quiet %v after the last request, %v before the requests ended", time.Since(last), time.Until(busyUntil))
	}

	f.busy()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if f.Quiet(ctx, time.Hour) {
		t.Fatal("Quiet reported quiet when its context had ended")
	}
}
