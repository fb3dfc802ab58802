package idle

import (
	"testing"
	"time"
)

func TestUntil(t *testing.T) {
	// left is asked again after each wait, until it says nothing is left
	var asked []time.Duration
	start := time.Now().UnixNano()
	ok := Until(nil, func(now int64) time.Duration {
		left := 30*time.Millisecond - time.Duration(now-start)
		asked = append(asked, left)
		return left
	})
	if !ok || len(asked) < 2 || asked[len(asked)-1] > 0 {
		t.Fatalf("Until returned %v after asking %v", ok, asked)
	}
	if took := time.Duration(time.Now().UnixNano() - start); took < 30*time.Millisecond {
		t.Fatalf("returned after %v, before left said 0", took)
	}
	// done ends the wait
	done := make(chan struct{})
	close(done)
	if Until(done, func(int64) time.Duration { return time.Hour }) {
		t.Fatal("Until reported quiet when done was closed")
	}
}
