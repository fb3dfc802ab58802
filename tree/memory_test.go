package tree

import (
	"runtime"
	"testing"
)

// The estimates a memory budget counts stay near what the heap holds for
// a decoded document and its tree: at least 60% of it and at most 130%
// (the allocator's size classes and the maps' buckets are not counted
// one by one).
func TestMemoryEstimates(t *testing.T) {
	raw := benchDoc(t, 20_000)
	var d *Doc
	var tr *Tree
	var err error
	docHeap := liveHeapT(func() {
		if d, err = Decode(raw, DefaultLimits); err != nil {
			t.Fatal(err)
		}
	})
	treeHeap := liveHeapT(func() { tr = BuildVisible(d, nil, DefaultLimits) })
	snap := tr.Snapshot()
	var loaded *Tree
	loadedHeap := liveHeapT(func() {
		if loaded, err = FromSnapshot(snap); err != nil {
			t.Fatal(err)
		}
	})
	for _, c := range []struct {
		name          string
		est, measured int64
	}{
		{"document", d.MemoryBytes(), docHeap},
		{"tree built from it", tr.MemoryBytes(), treeHeap},
		{"tree read from a snapshot", loaded.MemoryBytes(), loadedHeap},
	} {
		ratio := float64(c.est) / float64(c.measured)
		t.Logf("%s: estimate %d bytes, heap %d bytes (%.2fx)", c.name, c.est, c.measured, ratio)
		if ratio < 0.6 || ratio > 1.3 {
			t.Errorf("%s: estimate %d is %.2fx the heap it holds (%d), want 0.6-1.3x", c.name, c.est, ratio, c.measured)
		}
	}
	if tr.MemoryBytes() != tr.memBytes.Load() {
		t.Error("the tree's estimate is not kept")
	}
	runtime.KeepAlive(d)
	runtime.KeepAlive(tr)
	runtime.KeepAlive(raw)
	runtime.KeepAlive(loaded)
}

// liveHeapT is how much more the heap holds after alloc.
func liveHeapT(alloc func()) int64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC() // a second cycle: the first may leave what the last allocations let go of
	runtime.ReadMemStats(&before)
	alloc()
	runtime.GC()
	runtime.ReadMemStats(&after)
	return int64(after.HeapAlloc) - int64(before.HeapAlloc)
}
