package daemon

import (
	"testing"
	"time"
)

// The heap meter counts what the live heap holds beyond the base and the
// budget's figures, the least of its last measurements (a transient
// burst evicts nothing), and only when a collection ran since the last.
// Measurements 5 s apart: the window is the last four.
func TestHeapMeter(t *testing.T) {
	var live int64 = 10 << 20
	var cycles uint64 = 1
	m := newHeapMeter(func() (int64, uint64) { return live, cycles })
	if m.base != 10<<20+heapAllowance {
		t.Fatalf("base %d, want the live heap when it started and the allowance", m.base)
	}
	m.base = 10 << 20 // the figures below without it
	at := time.Now()
	if _, ok := m.measure(at, 20<<20); ok {
		t.Error("measured with no collection since the base")
	}
	steps := []struct {
		live    int64
		counted int64
		want    int64
	}{
		{40 << 20, 20 << 20, 0}, // 10 MiB beyond base and counted, once: none yet
		{90 << 20, 20 << 20, 0}, // a burst
		{45 << 20, 20 << 20, 0},
		{46 << 20, 20 << 20, 10 << 20}, // the fourth: the least of the four
		{47 << 20, 20 << 20, 15 << 20}, // the 10 left the window: what stays counts
		{47 << 20, 20 << 20, 15 << 20},
		{47 << 20, 20 << 20, 16 << 20},
		{20 << 20, 20 << 20, 0}, // below the base and counted: none
	}
	for i, s := range steps {
		live, cycles, at = s.live, cycles+1, at.Add(5*time.Second)
		got, ok := m.measure(at, s.counted)
		if !ok || got != s.want {
			t.Errorf("step %d: overhead %d MiB (%v), want %d MiB", i, got>>20, ok, s.want>>20)
		}
	}
	if _, ok := m.measure(at, 0); ok {
		t.Error("measured twice at one collection")
	}
	// what the budget let go since the last check may have been alive
	// at the collection: the more of then and now is subtracted
	live, cycles = 50<<20, cycles+1
	if got, _ := m.measure(at.Add(5*time.Second), 10<<20); got != 0 {
		t.Errorf("overhead %d MiB after the budget let 10 MiB go, want none of it", got>>20)
	}
	// a burst of collections within the span: all of them count (the
	// least), not only the last four
	m = newHeapMeter(func() (int64, uint64) { return live, cycles })
	m.base, at = 10<<20, at.Add(time.Minute)
	for i, over := range []int64{8, 30, 30, 30, 30, 30} {
		live, cycles, at = (10+over)<<20, cycles+1, at.Add(time.Second)
		got, _ := m.measure(at, 0)
		if want := int64(0); i == 5 && got != 8<<20 {
			t.Errorf("after a burst: overhead %d MiB, want 8 (the least within %v)", got>>20, overheadSpan)
		} else if i < 3 && got != want {
			t.Errorf("measurement %d: %d MiB, want none yet", i, got>>20)
		}
	}
	if live, cycles := readHeap(); live <= 0 || cycles == 0 {
		t.Errorf("the runtime's heap: live %d, %d collections", live, cycles)
	}
}
