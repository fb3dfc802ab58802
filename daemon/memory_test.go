package daemon

import "testing"

// The heap meter counts what the live heap holds beyond the base and the
// budget's figures, the least of its last measurements (a transient
// burst evicts nothing), and only when a collection ran since the last.
func TestHeapMeter(t *testing.T) {
	var live int64 = 10 << 20
	var cycles uint64 = 1
	m := newHeapMeter(func() (int64, uint64) { return live, cycles })
	if m.base != 10<<20+heapAllowance {
		t.Fatalf("base %d, want the live heap when it started and the allowance", m.base)
	}
	m.base = 10 << 20 // the figures below without it
	if _, ok := m.measure(0); ok {
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
		live, cycles = s.live, cycles+1
		got, ok := m.measure(s.counted)
		if !ok || got != s.want {
			t.Errorf("step %d: overhead %d MiB (%v), want %d MiB", i, got>>20, ok, s.want>>20)
		}
	}
	if _, ok := m.measure(0); ok {
		t.Error("measured twice at one collection")
	}
	if live, cycles := readHeap(); live <= 0 || cycles == 0 {
		t.Errorf("the runtime's heap: live %d, %d collections", live, cycles)
	}
}
