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
	deadline := time.Now().Add(10 * time.Second)
	for !s.Stats().Index.Ready {
		if time.Now().After(deadline) {
			t.Fatal("the first view on the host never built its index")
		}
		time.Sleep(time.Millisecond)
	}
	host.only(t) // kept

	rd2 := newReader(corpus)
	s2 := newSearcher(t, Config{Reader: rd2, Host: host, FirstBuild: time.Millisecond})
	s2.Prepare(treeOf(t, corpus))
	time.Sleep(50 * time.Millisecond) // what it would do, it does within this
	if e, r, _ := rd2.counts(); sum(e)+sum(r) != 0 || s2.Stats().Index.Ready {
		t.Errorf("a view whose index the host keeps read pages or loaded it before a search: ensures %v reads %v", e, r)
	}
	mustSearch(t, s2, treeOf(t, corpus), "rotate?mode=lexical")
	if ix := s2.Stats().Index; ix.Source != "host" {
		t.Errorf("source %q, want host", ix.Source)
	}
}
