package search

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestUnreadablePagesLeftOut: a page that cannot be read is left out of
// the lexical index (counted; such an index is not kept for other
// processes) while they are at most a tenth of the view; more fail the
// build.
func TestUnreadablePagesLeftOut(t *testing.T) {
	var pages []pg
	for i := range 20 {
		pages = append(pages, pg{slug: fmt.Sprintf("p/%02d", i), path: fmt.Sprintf("p/%02d.md", i), text: fmt.Sprintf("page %d about zebra%d", i, i)})
	}
	tr := treeOf(t, pages)
	rd := newReader(pages)
	rd.setFail("p/03", errors.New("boom"))
	rd.setFail("p/07", errors.New("boom"))
	host := newHost()
	s := newSearcher(t, Config{Reader: rd, Host: host})
	r := mustSearch(t, s, tr, "zebra5?mode=lexical")
	if len(r.Hits) != 1 || r.Hits[0].Path != "p/05.md" {
		t.Errorf("hits %v, want p/05.md", r.Hits)
	}
	if r := mustSearch(t, s, tr, "zebra3?mode=lexical"); len(r.Hits) != 0 {
		t.Errorf("an unreadable page is a hit: %v", r.Hits)
	}
	if ix := s.Stats().Index; ix.Skipped != 2 || !ix.Ready {
		t.Errorf("index stats %+v, want 2 pages left out", ix)
	}
	host.mu.Lock()
	kept := len(host.entries)
	host.mu.Unlock()
	if kept != 0 {
		t.Errorf("an index that lacks pages was kept in the host tier (%d entries)", kept)
	}

	rd3 := newReader(pages)
	for _, slug := range []string{"p/01", "p/02", "p/03"} {
		rd3.setFail(slug, errors.New("boom"))
	}
	s3 := newSearcher(t, Config{Reader: rd3, Host: newHost()})
	if _, err := s3.Search(t.Context(), treeOf(t, pages), "zebra5?mode=lexical"); err == nil || !strings.Contains(err.Error(), "could not be read") {
		t.Errorf("3 of 20 pages unreadable: %v, want the build to fail", err)
	}
}
