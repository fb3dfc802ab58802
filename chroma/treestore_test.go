package chroma

import (
	"testing"

	v2 "github.com/amikos-tech/chroma-go/pkg/api/v2"
)

// TestHeaderInfo: what a tree's header tells: an index's record count and
// the groups key it was written with — "" (none) is a key recorded, an
// older index's missing key is not known — and nothing of either for a
// tree that is not an index.
func TestHeaderInfo(t *testing.T) {
	const sha = "0123"
	for _, tc := range []struct {
		name  string
		attrs []*v2.MetaAttribute
		want  TreeInfo
	}{
		{"ingest's tree", nil, TreeInfo{Stamp: sha, IndexRecords: -1}},
		{"an index with a key", []*v2.MetaAttribute{v2.NewIntAttribute(KeyIndexRecords, 7), v2.NewStringAttribute(KeyIndexGroupsKey, "acl")},
			TreeInfo{Stamp: sha, IndexRecords: 7, IndexGroupsKey: "acl", IndexGroupsKeyKnown: true}},
		{"an index without a key", []*v2.MetaAttribute{v2.NewIntAttribute(KeyIndexRecords, 7), v2.NewStringAttribute(KeyIndexGroupsKey, "")},
			TreeInfo{Stamp: sha, IndexRecords: 7, IndexGroupsKeyKnown: true}},
		{"an older index", []*v2.MetaAttribute{v2.NewIntAttribute(KeyIndexRecords, 7)}, TreeInfo{Stamp: sha, IndexRecords: 7}},
		{"a key on no index", []*v2.MetaAttribute{v2.NewStringAttribute(KeyIndexGroupsKey, "acl")}, TreeInfo{Stamp: sha, IndexRecords: -1}},
		{"a key that is not a string", []*v2.MetaAttribute{v2.NewIntAttribute(KeyIndexRecords, 7), v2.NewIntAttribute(KeyIndexGroupsKey, 1)},
			TreeInfo{Stamp: sha, IndexRecords: 7}},
	} {
		md := v2.NewDocumentMetadata(append([]*v2.MetaAttribute{v2.NewStringAttribute(KeyTreeSHA, sha)}, tc.attrs...)...)
		if got := headerInfo(sha, md); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
