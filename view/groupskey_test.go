package view

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/refresh"
	"github.com/chromafs/chromafs/tree"
	"github.com/chromafs/chromafs/treeload"
)

// acl are LangChain records of one file each, labelled under acl and team
// (an empty value: the key is absent).
func acl(file, aclGroups, teamGroups string) []chroma.RawRecord {
	recs := langchain(file)
	for i := range recs {
		recs[i].ID = file + recs[i].ID
		if aclGroups != "" {
			recs[i].Meta["acl"] = aclGroups
		}
		if teamGroups != "" {
			recs[i].Meta["team"] = teamGroups
		}
	}
	return recs
}

// aclIndexed is a collection of an admin, a billing and a public file
// labelled under acl, and the index of it chromafs-ingest index
// --groups-key acl writes (its entries carry the acl groups); known says
// whether the index records its key (an older index does not).
func aclIndexed(known bool) *server {
	srv := newServer(`{"admin": {"isPublic": false, "groups": ["admin"], "path": "admin.md"},
		"billing": {"isPublic": false, "groups": ["billing"], "path": "billing.md"},
		"public": {"isPublic": true, "groups": [], "path": "public.md"}}`)
	srv.records = append(append(acl("admin.md", "admin", ""), acl("billing.md", "billing", "")...), acl("public.md", "", "")...)
	srv.indexed, srv.indexKey, srv.indexKeyKnown = len(srv.records), "acl", known
	return srv
}

// TestStaleIndexKeepsItsGroupsKey (issue 28, finding 3): an index written
// with --groups-key acl, served by a mount without a groups key, shows a
// public view only the public file; once a record is added the index is
// stale and its records are scanned under the key the index recorded, so
// the admin and billing files stay hidden (they became public when the
// scan read no key). An index that does not record its key is served as
// it is when stale, never scanned.
func TestStaleIndexKeepsItsGroupsKey(t *testing.T) {
	ctx := context.Background()
	srv := aclIndexed(true)
	s := newSetup(t, srv, "")
	col, v, res := mustMount(t, s)
	if visible(res, "admin.md") || visible(res, "billing.md") || !visible(res, "public.md") || srv.count("scan") != 0 {
		t.Fatalf("fresh index: admin %v, billing %v, public %v; %v", visible(res, "admin.md"), visible(res, "billing.md"), visible(res, "public.md"), srv.calls)
	}
	srv.set(func(s *server) { s.records = append(s.records, acl("new.md", "", "")...) })
	stamp, _ := col.Stamp(ctx)
	res, err := v.Latest(ctx)
	if err != nil || srv.count("scan") != 1 {
		t.Fatalf("stale index: %v, %v", err, srv.calls)
	}
	if visible(res, "admin.md") || visible(res, "billing.md") || !visible(res, "new.md") || !visible(res, "public.md") {
		t.Fatalf("stale index scanned: admin %v, billing %v, new %v: the scan must read groups under the index's key", visible(res, "admin.md"), visible(res, "billing.md"), visible(res, "new.md"))
	}
	if res.Stamp != stamp {
		t.Fatalf("stamp %q, poll %q", res.Stamp, stamp)
	}
	billing := col.View([]string{"billing"})
	if res, err := billing.Latest(ctx); err != nil || !visible(res, "billing.md") || visible(res, "admin.md") {
		t.Fatalf("billing view of the stale index: %v", err)
	}

	// an older index: no key recorded: served as it is, not scanned
	srv = aclIndexed(false)
	s = newSetup(t, srv, "")
	col, v, _ = mustMount(t, s)
	srv.set(func(s *server) { s.records = append(s.records, acl("new.md", "", "")...) })
	stamp, _ = col.Stamp(ctx)
	res, err = v.Latest(ctx)
	if err != nil || srv.count("scan") != 0 || visible(res, "admin.md") || visible(res, "new.md") || !visible(res, "public.md") || res.Stamp != stamp {
		t.Fatalf("stale older index: %v, %v, stamp %q poll %q", err, srv.calls, res.Stamp, stamp)
	}
	if !strings.Contains(s.logs.String(), "its --groups-key is not recorded") {
		t.Fatalf("no warning for the older index; log:\n%s", s.logs)
	}
}

// TestIndexGroupsKeyMismatch: a view whose layout names a groups key never
// serves an index written with another (or without recording one) as it
// is: within the scan limit its records are scanned under both keys (a
// mismatch hides, never reveals), and polls then find nothing new; else
// the load fails with an error naming both keys and the fix.
func TestIndexGroupsKeyMismatch(t *testing.T) {
	ctx := context.Background()
	// written without a key: every entry public
	noKey := func() *server {
		srv := newServer(`{"admin": {"isPublic": true, "groups": [], "path": "admin.md"}, "public": {"isPublic": true, "groups": [], "path": "public.md"}}`)
		srv.records = append(acl("admin.md", "admin", ""), acl("public.md", "", "")...)
		srv.indexed, srv.indexKeyKnown = len(srv.records), true
		return srv
	}
	srv := noKey()
	s := newSetup(t, srv, t.TempDir())
	s.cfg.Layout.GroupsKey = "acl"
	col, v, res := mustMount(t, s)
	if visible(res, "admin.md") || !visible(res, "public.md") || srv.count("scan") != 1 {
		t.Fatalf("an index without a key under the view's acl: admin %v; %v", visible(res, "admin.md"), srv.calls)
	}
	if !strings.Contains(s.logs.String(), "written with another groups key") {
		t.Fatalf("no warning; log:\n%s", s.logs)
	}
	if stamp, _ := col.Stamp(ctx); stamp != res.Stamp {
		t.Fatalf("stamp %q, poll %q", res.Stamp, stamp)
	}
	r := v.Refresher(refresh.Config{Apply: func(*tree.Tree) int { return 0 }}, res)
	if r.Poll() {
		t.Fatal("a poll that found nothing new refreshed")
	}
	r.Close()
	// and again (a snapshot or the host tier's text is never the way round)
	if _, _, res := mustMount(t, s); visible(res, "admin.md") || res.Snapshot {
		t.Fatalf("the second mount: admin %v, snapshot %v", visible(res, "admin.md"), res.Snapshot)
	}

	// written with team, viewed under acl: a record is restricted by both
	srv = newServer(`{"ops": {"isPublic": false, "groups": ["sre"], "path": "ops.md"}, "admin": {"isPublic": true, "groups": [], "path": "admin.md"}}`)
	srv.records = append(acl("ops.md", "", "sre"), acl("admin.md", "admin", "")...)
	srv.indexed, srv.indexKey, srv.indexKeyKnown = len(srv.records), "team", true
	s = newSetup(t, srv, "")
	s.cfg.Layout.GroupsKey = "acl"
	for _, tc := range []struct {
		groups     []string
		ops, admin bool
	}{{nil, false, false}, {[]string{"sre"}, true, false}, {[]string{"admin"}, false, true}} {
		_, _, res := mustMount(t, s, tc.groups...)
		if visible(res, "ops.md") != tc.ops || visible(res, "admin.md") != tc.admin {
			t.Errorf("view %v of an index written with team, under acl: ops %v, admin %v", tc.groups, visible(res, "ops.md"), visible(res, "admin.md"))
		}
	}

	// the same key: served as it is
	srv = aclIndexed(true)
	s = newSetup(t, srv, "")
	s.cfg.Layout.GroupsKey = "acl"
	if _, _, res := mustMount(t, s); srv.count("scan") != 0 || visible(res, "admin.md") || !visible(res, "public.md") {
		t.Fatalf("the index's own key: %v", srv.calls)
	}

	// refused: an older index (no key recorded), past the scan limit, a
	// layout that does not scan
	for _, tc := range []struct {
		name string
		srv  *server
		cfg  func(*Config[*store])
		why  string
	}{
		{"no key recorded", aclIndexed(false), func(*Config[*store]) {}, "without recording its --groups-key"},
		{"past the scan limit", noKey(), func(c *Config[*store]) { c.ScanLimit = 2 }, "past the scan limit"},
		{"a layout that does not scan", noKey(), func(c *Config[*store]) { c.Layout.Name = "chromafs" }, "does not scan"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newSetup(t, tc.srv, "")
			s.cfg.Layout.GroupsKey = "team"
			tc.cfg(&s.cfg)
			_, _, _, err := s.mount(t)
			if !errors.Is(err, ErrIndexGroupsKey) || !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), `under "team"`) ||
				!strings.Contains(err.Error(), "chromafs-ingest index --collection docs --groups-key team") {
				t.Fatalf("error %v: want ErrIndexGroupsKey saying %q, naming both keys and the fix", err, tc.why)
			}
		})
	}

	// stale, with a key of the view's: scanned under both
	srv = aclIndexed(true)
	srv.indexKey = "team"
	srv.records = append(srv.records, acl("ops.md", "", "sre")...)
	s = newSetup(t, srv, "")
	s.cfg.Layout.GroupsKey = "acl"
	_, v, _ = mustMount(t, s, "sre")
	srv.set(func(s *server) { s.records = append(s.records, acl("new.md", "", "")...) })
	res, err := v.Latest(ctx)
	if err != nil || !visible(res, "ops.md") || visible(res, "admin.md") || !visible(res, "new.md") {
		t.Fatalf("stale index written with team, under acl, view [sre]: %v", err)
	}
	if want := treeload.GroupsKeys("acl", "team"); !strings.Contains(s.logs.String(), "groups_keys="+strings.Join(want, ",")) {
		t.Fatalf("the stale scan does not say it read both keys; log:\n%s", s.logs)
	}
}

// TestGroupsKeySnapshotOneHeader: under a groups key, a view whose
// snapshot the host tier keeps asks the tree's header once (whether the
// tree is an index it may serve, and which snapshot), not a second time
// for the snapshot's stamp.
func TestGroupsKeySnapshotOneHeader(t *testing.T) {
	dir := t.TempDir()
	srv := newServer(mintlify)
	mount := func() treeload.Result {
		s := newSetup(t, srv, dir)
		s.cfg.Layout.GroupsKey = "acl"
		_, _, res := mustMount(t, s, "admin")
		return res
	}
	if res := mount(); res.Snapshot {
		t.Fatal("the first mount came from a snapshot")
	}
	infos := srv.count("info")
	if res := mount(); !res.Snapshot || srv.count("info") != infos+1 {
		t.Fatalf("the same view again: snapshot %v, %d header requests (want 1); %v", res.Snapshot, srv.count("info")-infos, srv.calls)
	}
}
