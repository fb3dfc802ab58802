package search

import (
	"testing"
	"time"
)

// TestFirstOnHost: a Prepared view whose index no process of the host has
// kept builds it without a search; one whose index the host tier holds
// reads no page until a search needs it.
func TestFirstOnHost(t *testing.T) {
	host := newHost()
	rd := newReader(corpus)
	s := newSearcher(t, Config{Reader: rd, Host: host, FirstBuild: time.Millisecond})
	s.Prepare(treeOf(t, corpus))
	waitFor(t, "the first view on the host to build its index", func() bool { return s.Stats().Index.Ready })
	host.only(t) // kept

	rd2 := newReader(corpus)
	s2 := newSearcher(t, Config{Reader: rd2, Host: host, FirstBuild: time.Millisecond})
	s2.Prepare(treeOf(t, corpus))
	// once it has looked at the host tier, whatever it does is begun
	waitFor(t, "the second view's look at the host tier", func() bool { return s2.st.firstChecks.Load() == 1 })
	s2.mu.Lock()
	begun := s2.cur != nil && s2.cur.started
	s2.mu.Unlock()
	if e, r, _ := rd2.counts(); begun || sum(e)+sum(r) != 0 || s2.Stats().Index.Ready {
		t.Errorf("a view whose index the host keeps began loading it (%v) or read pages before a search: ensures %v reads %v", begun, e, r)
	}
	mustSearch(t, s2, treeOf(t, corpus), "rotate?mode=lexical")
	if ix := s2.Stats().Index; ix.Source != "host" {
		t.Errorf("source %q, want host", ix.Source)
	}
}
