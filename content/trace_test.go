package content

import (
	"context"
	"testing"

	"github.com/chromafs/chromafs/tree"
)

func TestReadAtFromNamesTheTier(t *testing.T) {
	d, err := tree.Decode([]byte(`{"a":{"isPublic":true,"path":"a.md","size":6,"chunks":[3,3],"sha256":"x"}}`), tree.DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	tr := tree.BuildVisible(d, nil, tree.DefaultLimits)
	e := New(tr, &fakeSource{pages: map[string][]string{"a": {"abc", "def"}}}, Config{Prefetch: PrefetchNone})
	defer e.Close()
	fl := tr.Lookup("a.md").File
	buf := make([]byte, 6)
	for _, want := range []Tier{TierSource, TierMemory} {
		if n, tier, err := e.ReadAtFrom(context.Background(), fl, buf, 0); err != nil || n != 6 || tier != want.String() {
			t.Errorf("read: %d %v %v, want 6 bytes from %v", n, tier, err, want)
		}
	}
	if _, tier, _ := e.ReadAtFrom(context.Background(), fl, buf, 6); tier != "none" {
		t.Errorf("a read at end of file: tier %v", tier)
	}
	if TierSource.String() != "chroma" || Tier(99).String() != "unknown" {
		t.Error("tier names")
	}
}
