package daemon

import (
	"bytes"
	"errors"
	"fmt"
	"net/http/httptest"
	"os/user"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/internal/peercred"
	"github.com/chromafs/chromafs/policy"
	"github.com/chromafs/chromafs/treeload"
)

// TestBoundsPerSubject: a subject is refused past its policy limits
// (attachments, private ones, layouts of its own), each refusal naming
// the limit; another subject and root are not; the host-wide bound keeps
// a reserve that only root may take.
func TestBoundsPerSubject(t *testing.T) {
	d := newTestDaemon(t, `
- users: [4242]
  collections: ["*"]
  groups: []
  limits: {attachments: 6, private_mounts: 2, layouts: 1}
- users: [4243]
  collections: ["*"]
  groups: []
- users: [4244]
  collections: ["*"]
  groups: []
  limits: {mounts: 2}
`)
	d.cfg.MaxAttachments = 32
	d.mu.Lock()
	defer d.unlock()
	n := 0
	addTo := func(collection string, uid uint32, private bool, layout treeload.Layout) error {
		rec := record{ID: fmt.Sprintf("r%d", n), Path: fmt.Sprintf("/p/%d", n), UID: uid, OwnerUID: uid, Collection: collection, Private: private, Layout: layout}
		n++
		if err := d.checkBoundsLocked(rec); err != nil {
			return err
		}
		d.attachments[rec.ID] = &attachment{rec: rec}
		return nil
	}
	add := func(uid uint32, private bool, layout treeload.Layout) error {
		return addTo("docs", uid, private, layout)
	}
	refused := func(err error, says string) bool {
		return err != nil && codeOf(err) == api.CodeRefused && strings.Contains(err.Error(), says)
	}
	custom := func(key string) treeload.Layout { return treeload.Layout{Name: "custom", PathKey: key} }
	for range 2 {
		if err := add(4242, true, d.cfg.Layout); err != nil {
			t.Fatal(err)
		}
	}
	if err := add(4242, true, d.cfg.Layout); !refused(err, "limits.private_mounts") {
		t.Errorf("a third private attachment: %v", err)
	}
	if err := add(4242, false, custom("kind")); err != nil {
		t.Fatal(err)
	}
	if err := add(4242, false, custom("kind")); err != nil {
		t.Errorf("the same layout again: %v", err)
	}
	if err := add(4242, false, custom("source")); !refused(err, "limits.layouts") {
		t.Errorf("a second layout of its own: %v", err)
	}
	for range 2 {
		if err := add(4242, false, d.cfg.Layout); err != nil {
			t.Fatal(err)
		}
	}
	if err := add(4242, false, d.cfg.Layout); !refused(err, "limits.attachments") {
		t.Errorf("a seventh attachment: %v", err)
	}
	// FUSE mounts: one per view, shared by the view's attachments
	for _, c := range []string{"docs", "docs", "handbook"} {
		if err := addTo(c, 4244, false, d.cfg.Layout); err != nil {
			t.Fatalf("%s: %v", c, err)
		}
	}
	if err := addTo("manual", 4244, false, d.cfg.Layout); !refused(err, "limits.mounts") {
		t.Errorf("a third view: %v", err)
	}
	if err := addTo("handbook", 4244, false, d.cfg.Layout); err != nil {
		t.Errorf("a view it has a mount of already: %v", err)
	}
	// another user, under the defaults, and root: not refused for 4242's
	if err := add(4243, true, d.cfg.Layout); err != nil {
		t.Errorf("another user: %v", err)
	}
	if err := add(0, true, custom("x")); err != nil {
		t.Errorf("root: %v", err)
	}
	// the host-wide bound: 32, of which 2 (a sixteenth) are root's
	for len(d.attachments) < hostBound(32, false) {
		uid := uint32(5000 + len(d.attachments)) // no rule, no limits met: only the host's
		d.attachments[fmt.Sprintf("h%d", len(d.attachments))] = &attachment{rec: record{UID: uid}}
	}
	if err := add(4243, false, d.cfg.Layout); err == nil || codeOf(err) != api.CodeUnavailable || !strings.Contains(err.Error(), "kept for root") {
		t.Errorf("past the host's bound: %v", err)
	}
	if err := add(0, false, d.cfg.Layout); err != nil {
		t.Errorf("root in the reserve: %v", err)
	}
	for id := range d.attachments {
		delete(d.attachments, id)
	}
}

func TestHostBound(t *testing.T) {
	for _, c := range []struct {
		n          int
		root, user int
	}{{1, 1, 1}, {2, 2, 1}, {5, 5, 4}, {16, 16, 15}, {1000, 1000, 938}, {10000, 10000, 9375}} {
		if r, u := hostBound(c.n, true), hostBound(c.n, false); r != c.root || u != c.user {
			t.Errorf("bound %d: root %d, others %d; want %d, %d", c.n, r, u, c.root, c.user)
		}
	}
}

// TestConnLimiter: a user holds at most its share of connections, all
// users together the total; root is never refused; a closed connection
// gives its share back.
func TestConnLimiter(t *testing.T) {
	c := newConnLimiter(3, 5)
	for i := range 3 {
		if why := c.admit(7); why != "" {
			t.Fatalf("connection %d: %s", i, why)
		}
	}
	if why := c.admit(7); !strings.Contains(why, "uid 7 holds 3 connections") {
		t.Errorf("a fourth connection of uid 7: %q", why)
	}
	for i := range 2 {
		if why := c.admit(8); why != "" {
			t.Fatalf("uid 8, connection %d: %s", i, why)
		}
	}
	if why := c.admit(9); !strings.Contains(why, "holds 5 connections of its users") {
		t.Errorf("past the total: %q", why)
	}
	for range 100 {
		if why := c.admit(0); why != "" {
			t.Fatalf("root refused: %s", why)
		}
	}
	c.release(7)
	if why := c.admit(9); why != "" {
		t.Errorf("after a release: %s", why)
	}
}

// TestGroupsNow: a restore judges the user with the groups they hold now
// and held then; a user the database does not know holds none.
func TestGroupsNow(t *testing.T) {
	d := newTestDaemon(t, "- unix_groups: [77]\n  collections: [docs]\n  groups: []\n")
	d.cfg.UserGroups = func(uid uint32) (uint32, []uint32, error) {
		switch uid {
		case 4242: // has left group 77, joined 88
			return 100, []uint32{100, 88}, nil
		case 4243:
			return 100, []uint32{100, 77}, nil
		case 4244:
			return 0, nil, errors.New("nss: try again")
		}
		return 0, nil, user.UnknownUserIdError(int(uid))
	}
	for _, c := range []struct {
		uid        uint32
		gid        uint32
		groups     []uint32
		wantGID    uint32
		wantGroups []uint32
	}{
		{4242, 100, []uint32{77}, 100, nil},
		{4243, 100, []uint32{77, 99}, 100, []uint32{77}},
		{4243, 77, nil, 77, nil},
		{5000, 77, []uint32{77}, overflowGID, nil},
	} {
		gid, groups, err := d.groupsNow(record{UID: c.uid, GID: c.gid, UserGroups: c.groups})
		if err != nil || gid != c.wantGID || fmt.Sprint(groups) != fmt.Sprint(c.wantGroups) {
			t.Errorf("uid %d (gid %d, groups %v): %d %v %v, want %d %v", c.uid, c.gid, c.groups, gid, groups, err, c.wantGID, c.wantGroups)
		}
	}
	// a database that cannot be asked now: not "no groups" (the record
	// would be dropped for good) but a reason to try again
	if _, _, err := d.groupsNow(record{UID: 4244, GID: 77, UserGroups: []uint32{77}}); !temporary(err) {
		t.Errorf("a failing user database: %v, want a temporary error", err)
	}
}

// FuzzAttachRequest: no request body makes the API's decoder and the
// checks of a request (fields, names, layout, policy) panic; what passes
// them names a collection Chroma would accept, a clean absolute path,
// and the daemon's groups key.
func FuzzAttachRequest(f *testing.F) {
	d := newTestDaemon(f, "- users: [4242]\n  collections: [\"*\"]\n  groups: [billing]\n")
	d.cfg.Layout.GroupsKey = "acl"
	// a root daemon's checks, whoever runs the fuzzer: a daemon of one
	// user would refuse uid 4242 whatever it asked, and check nothing else
	d.privileged = true
	if _, err := d.checkRequest(peercred.Cred{UID: 4242, GID: 4242}, api.AttachRequest{Collection: "docs", Path: "/p", Groups: []string{"billing"}}); err != nil {
		f.Fatalf("a request the policy grants: %v; the checks of what passes would never run", err)
	}
	for _, seed := range []string{
		`{"collection":"docs","path":"/p","groups":["billing"]}`,
		`{"collection":"../../vault/collections/payroll","path":"/p"}`,
		`{"collection":"docs","path":"/p/../q","layout":{"name":"custom","path_key":"kind","groups_key":"x"}}`,
		`{"collection":"docs","path":"/p","owner":{"uid":0,"gid":0},"access_log":"/tmp/l","private":true}`,
		`{"collection":"docs","path":"/p","groups":["a b","billing"]}`,
		`[]`, `{"unknown":1}`, `{"collection":1e999}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r := httptest.NewRequest("POST", "/v1/attach", bytes.NewReader(body))
		var req api.AttachRequest
		if err := decode(r, &req); err != nil {
			if codeOf(err) != api.CodeBadRequest {
				t.Fatalf("a body that does not decode: %v, want bad_request", err)
			}
			return
		}
		rec, err := d.checkRequest(peercred.Cred{UID: 4242, GID: 4242}, req)
		if err != nil {
			if c := codeOf(err); c != api.CodeBadRequest && c != api.CodeRefused {
				t.Fatalf("%+v: %v (code %s)", req, err, c)
			}
			return
		}
		if !filepath.IsAbs(rec.Path) || filepath.Clean(rec.Path) != rec.Path || rec.Layout.GroupsKey != "acl" || rec.UID != 4242 || rec.OwnerUID != 4242 {
			t.Fatalf("accepted %+v as %+v", req, rec)
		}
		if err := d.policy.Load().Allow(policy.Subject{UID: 4242, GIDs: []uint32{4242}}, rec.Collection, rec.Groups); err != nil {
			t.Fatalf("accepted what the policy refuses: %+v", rec)
		}
		if strings.ContainsAny(rec.Collection, "/%?# ") || strings.Contains(rec.Collection, "..") {
			t.Fatalf("accepted collection %q", rec.Collection)
		}
	})
}
