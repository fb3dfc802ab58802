// Package idle waits for the quiet between requests: background work
// that can wait (pushes into the kernel's cache, host-tier writes, a
// tree's snapshot) runs in the time between an agent's commands instead
// of taking one of a small host's cores from a command.
package idle

import "time"

// Until waits until left, asked again each time the wait it gave has
// passed, says nothing is left, or done closes; it reports whether it got
// there. left is given the time (unix nanoseconds) and returns how long
// is left, so that the caller says what quiet means (since the last
// request, since a deadline).
func Until(done <-chan struct{}, left func(now int64) time.Duration) bool {
	for {
		d := left(time.Now().UnixNano())
		if d <= 0 {
			return true
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-done:
			t.Stop()
			return false
		}
	}
}
