// Package testenv holds the one rule for a test whose prerequisite (root,
// /dev/fuse, a server, dockerd, a tool) is missing: it skips loudly, with
// "SKIPPED:" in the message so a run's summary shows it, except under
// CI=true, where a missing prerequisite is a failure. Every test of the
// repository that can lack something goes through Missing, so no skip can
// pass a CI run silently. Returns is the one guard against a call that
// never returns.
package testenv

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// CI reports whether the run is a CI run (CI=true), where nothing may be
// skipped for want of a prerequisite.
func CI() bool { return os.Getenv("CI") == "true" }

// Missing ends the test for want of a prerequisite: t.Fatal under CI=true,
// t.Skip otherwise. The message says what is missing.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatalf("CI=true makes a missing prerequisite a failure: %s", why)
		return
	}
	t.Skipf("SKIPPED: %s", why)
}

// Require calls Missing when ok is false.
func Require(t testing.TB, ok bool, format string, args ...any) {
	t.Helper()
	if !ok {
		Missing(t, format, args...)
	}
}

// Returns runs fn and fails the test if it has not returned within a
// minute: a guard against waiting on what never answers, not a measure
// (what a test proves about time it proves with counts or clocks).
func Returns(t testing.TB, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s never returned", what)
	}
}
