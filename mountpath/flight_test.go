package mountpath

import (
	"errors"
	"strings"
	"testing"
)

// TestInFlightBounded: a user with maxInFlightPerUser resolutions in
// flight (threads blocked on a file system that does not answer) is
// refused at once, others only once maxInFlight are, root never by the
// total; an ended resolution gives its place back.
func TestInFlightBounded(t *testing.T) {
	f := &flightCount{byUID: map[uint32]int{}}
	for range maxInFlightPerUser {
		if err := f.enter(7); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.enter(7); !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "uid 7") {
		t.Errorf("past the user's bound: %v", err)
	}
	for uid := uint32(100); f.total < maxInFlight; uid++ {
		if err := f.enter(uid); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.enter(8); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("past the total: %v", err)
	}
	if err := f.enter(0); err != nil {
		t.Errorf("root past the total: %v", err)
	}
	f.done(7)
	f.done(0)
	if err := f.enter(7); err != nil {
		t.Errorf("after one ended: %v", err)
	}
}
