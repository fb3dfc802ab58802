package tree

import (
	"slices"
	"testing"
)

// TestHiddenSlugs: a built tree knows the slugs of the pages its groups
// may not see (files only, sorted), and so does one loaded from its
// snapshot; the admin view hides nothing.
func TestHiddenSlugs(t *testing.T) {
	doc := `{"a/pub":{"isPublic":true},"b/secret":{"isPublic":false,"groups":["admin"]},"a/also":{"isPublic":false,"groups":["admin"]},
		"d":{"isPublic":false,"groups":["admin"],"type":"dir","path":"d"}}`
	pub, _ := mustBuild(t, doc)
	if want := []string{"a/also", "b/secret"}; !pub.HiddenKnown || !slices.Equal(pub.Hidden, want) {
		t.Errorf("public view: hidden %v (known %v), want %v", pub.Hidden, pub.HiddenKnown, want)
	}
	snap, err := FromSnapshot(pub.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if !snap.HiddenKnown || !slices.Equal(snap.Hidden, pub.Hidden) {
		t.Errorf("from the snapshot: hidden %v (known %v), want %v", snap.Hidden, snap.HiddenKnown, pub.Hidden)
	}
	admin, _ := mustBuild(t, doc, "admin")
	if !admin.HiddenKnown || len(admin.Hidden) != 0 {
		t.Errorf("admin view: hidden %v", admin.Hidden)
	}
	if s, err := FromSnapshot(admin.Snapshot()); err != nil || !s.HiddenKnown || len(s.Hidden) != 0 {
		t.Errorf("admin view from its snapshot: %v, %v", s, err)
	}
}
