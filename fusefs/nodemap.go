package fusefs

import "sync"

// nodeMap is a map of the nodes the kernel knows, for many goroutines.
// A sync.Map boxed every key and value into interfaces: at a million
// nodes (a cold find of a big tree) its stores cost a third of LOOKUP.
type nodeMap[K comparable, V comparable] struct {
	mu sync.Mutex // protects m
	m  map[K]V
}

func (m *nodeMap[K, V]) Store(k K, v V) {
	m.mu.Lock()
	if m.m == nil {
		m.m = map[K]V{}
	}
	m.m[k] = v
	m.mu.Unlock()
}

func (m *nodeMap[K, V]) Load(k K) (V, bool) {
	m.mu.Lock()
	v, ok := m.m[k]
	m.mu.Unlock()
	return v, ok
}

// CompareAndDelete deletes k if it still maps to v.
func (m *nodeMap[K, V]) CompareAndDelete(k K, v V) {
	m.mu.Lock()
	if cur, ok := m.m[k]; ok && cur == v {
		delete(m.m, k)
	}
	m.mu.Unlock()
}

// Values returns the values, copied: the caller may store or delete
// while it goes through them.
func (m *nodeMap[K, V]) Values() []V {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]V, 0, len(m.m))
	for _, v := range m.m {
		out = append(out, v)
	}
	return out
}
