package daemon

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/internal/peercred"
	"github.com/chromafs/chromafs/internal/testenv"
	"github.com/chromafs/chromafs/policy"
)

// newTestDaemon is a daemon that never reaches a server: what these
// tests exercise is decided before any collection is opened.
func newTestDaemon(t testing.TB, pol string) *Daemon {
	t.Helper()
	p, err := policy.Parse([]byte(pol))
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{Conn: chroma.Config{URL: "http://127.0.0.1:1", Timeout: time.Second}, StateDir: t.TempDir(), Policy: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// serve runs d's API on a socket of its own and returns a client of it.
func serve(t *testing.T, d *Daemon) *api.Client {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "d.sock")
	l, err := Listen(sock, -1)
	if err != nil {
		t.Fatal(err)
	}
	srv := d.Server()
	go func() { _ = srv.Serve(d.Listener(l)) }()
	t.Cleanup(func() { _ = srv.Close() })
	st, err := os.Stat(sock)
	if err != nil || st.Mode().Perm() != 0o660 {
		t.Errorf("socket mode %v (%v), want 0660", st.Mode().Perm(), err)
	}
	if _, err := Listen(sock, -1); err == nil || !strings.Contains(err.Error(), "another chromafsd answers") {
		t.Errorf("a second daemon on the same socket: %v", err)
	}
	return api.NewClient(sock)
}

func TestAPIRefusesBeforeMounting(t *testing.T) {
	d := newTestDaemon(t, "- users: [4242]\n  collections: [docs]\n  groups: [billing]\n")
	c := serve(t, d)
	ctx := context.Background()
	var ce *api.CallError
	for _, tc := range []struct {
		req    api.AttachRequest
		status int
		code   string
		says   string
	}{
		{api.AttachRequest{Path: "/x"}, 400, api.CodeBadRequest, "no collection"},
		{api.AttachRequest{Collection: "docs", Path: "relative"}, 400, api.CodeBadRequest, "absolute"},
		{api.AttachRequest{Collection: "docs", Path: "/x", Groups: []string{"a b"}}, 400, api.CodeBadRequest, "groups"},
		{api.AttachRequest{Collection: "docs", Path: "/x", Layout: api.Layout{Name: "nonsense"}}, 400, api.CodeBadRequest, "--layout"},
		{api.AttachRequest{Collection: "docs", Path: "/x", AccessLog: "log"}, 400, api.CodeBadRequest, "access log"},
	} {
		_, err := c.Attach(ctx, tc.req)
		if !errors.As(err, &ce) || ce.Status != tc.status || ce.Body.Code != tc.code || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("attach %+v: %v, want %d %s saying %q", tc.req, err, tc.status, tc.code, tc.says)
		}
	}
	if _, err := c.Detach(ctx, api.DetachRequest{ID: "nope"}); !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
		t.Errorf("detach of an unknown attachment: %v", err)
	}
	if _, err := c.Detach(ctx, api.DetachRequest{}); !errors.As(err, &ce) || ce.Status != http.StatusBadRequest {
		t.Errorf("detach naming nothing: %v", err)
	}
	if _, err := c.Refresh(ctx, api.RefreshRequest{Collection: "docs"}); !errors.As(err, &ce) || ce.Status != http.StatusNotFound {
		t.Errorf("refresh of a collection nobody attached: %v", err)
	}
	st, err := c.List(ctx)
	if err != nil || len(st.Attachments) != 0 || st.Threads == 0 || st.FDs == 0 {
		t.Errorf("list: %+v, %v", st, err)
	}
	if _, err := api.NewClient(filepath.Join(t.TempDir(), "none.sock")).List(ctx); !errors.Is(err, api.ErrUnreachable) {
		t.Errorf("a socket nobody listens on: %v", err)
	}
}

// TestPolicyDecidesFromPeerCredentials: the subject is the peer's uid and
// groups; groups not granted are refused, never narrowed. A root daemon's
// decisions are computed without privileges, so they are checked whoever
// runs the test; a daemon of one user serves that user, anything, and
// refuses every other uid; that New makes a daemon run by root a root
// daemon needs root.
func TestPolicyDecidesFromPeerCredentials(t *testing.T) {
	const pol = "- users: [4242]\n  collections: [docs]\n  groups: [billing]\n- unix_groups: [77]\n  collections: [handbook]\n  groups: []\n"
	cases := []struct {
		who   peercred.Cred
		req   api.AttachRequest
		allow bool
	}{
		{peercred.Cred{UID: 4242}, api.AttachRequest{Collection: "docs", Groups: []string{"billing"}, Path: "/p"}, true},
		{peercred.Cred{UID: 4242}, api.AttachRequest{Collection: "docs", Groups: []string{"billing", "admin"}, Path: "/p"}, false},
		{peercred.Cred{UID: 4242}, api.AttachRequest{Collection: "handbook", Path: "/p"}, false},
		{peercred.Cred{UID: 4243, Groups: []uint32{77}}, api.AttachRequest{Collection: "handbook", Path: "/p"}, true},
		{peercred.Cred{UID: 4243, GID: 77}, api.AttachRequest{Collection: "handbook", Path: "/p"}, true},
		{peercred.Cred{UID: 4243, GID: 77}, api.AttachRequest{Collection: "handbook", Groups: []string{"billing"}, Path: "/p"}, false},
		{peercred.Cred{UID: 4243}, api.AttachRequest{Collection: "handbook", Path: "/p"}, false},
		{peercred.Cred{UID: 0}, api.AttachRequest{Collection: "secret", Groups: []string{"admin"}, Path: "/p"}, true},
	}
	decide := func(t *testing.T, d *Daemon) {
		t.Helper()
		allowed := 0
		for _, c := range cases {
			rec, err := d.checkRequest(c.who, c.req)
			if (err == nil) != c.allow || (err != nil && codeOf(err) != api.CodeRefused) {
				t.Errorf("%v asks %+v: %v, want allowed %v (or refused)", c.who, c.req, err, c.allow)
			}
			if err == nil {
				allowed++
				if rec.UID != c.who.UID || rec.ID == "" || rec.Path != "/p" || rec.Private {
					t.Errorf("record %+v", rec)
				}
			}
		}
		if allowed != 4 {
			t.Errorf("%d requests allowed, want 4", allowed)
		}
	}
	t.Run("root daemon", func(t *testing.T) {
		d := newTestDaemon(t, pol)
		d.privileged = true // New's choice when run by root; nothing below needs it
		decide(t, d)
	})
	t.Run("a daemon of one user", func(t *testing.T) {
		d := newTestDaemon(t, pol)
		d.privileged = false // New's choice when run by anyone but root
		me := uint32(currentUID())
		rec, err := d.checkRequest(peercred.Cred{UID: me}, api.AttachRequest{Collection: "secret", Groups: []string{"admin"}, Path: "/p"})
		if err != nil || rec.UID != me || !rec.Private {
			t.Errorf("its own user asks anything: %+v %v; want it allowed, private", rec, err)
		}
		for _, uid := range []uint32{me + 1, 0, 4242} {
			if uid == me {
				continue
			}
			_, err := d.checkRequest(peercred.Cred{UID: uid}, api.AttachRequest{Collection: "docs", Groups: []string{"billing"}, Path: "/p"})
			if codeOf(err) != api.CodeRefused || !strings.Contains(fmtErr(err), "serves its own user only") {
				t.Errorf("uid %d asks a daemon of uid %d: %v, want refused", uid, me, err)
			}
		}
	})
	t.Run("as root", func(t *testing.T) {
		testenv.Require(t, os.Geteuid() == 0, "needs root: New makes a daemon run by root a root daemon")
		d := newTestDaemon(t, pol)
		if !d.privileged {
			t.Fatal("a daemon run by root is not privileged")
		}
		decide(t, d)
	})
}

// fmtErr is err's message ("" for none).
func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestGroupsKeyIsTheDaemons: the key of records' access groups comes from
// the daemon, never from a client (naming one no record has would make
// every file public): a layout named by a client keeps the daemon's, and
// another key is refused but to root.
func TestGroupsKeyIsTheDaemons(t *testing.T) {
	d := newTestDaemon(t, "")
	d.cfg.Layout.GroupsKey = "acl"
	for _, name := range []string{"", "auto", "langchain", "custom"} {
		l, err := d.layoutOf(api.Layout{Name: name, PathKey: "source"}, false)
		if err != nil || l.GroupsKey != "acl" {
			t.Errorf("layout %q: groups key %q, %v; want the daemon's", name, l.GroupsKey, err)
		}
	}
	if _, err := d.layoutOf(api.Layout{GroupsKey: "no_such_key"}, false); codeOf(err) != api.CodeRefused {
		t.Errorf("a client's groups key: %v, want refused", err)
	}
	if l, err := d.layoutOf(api.Layout{GroupsKey: "other"}, true); err != nil || l.GroupsKey != "other" {
		t.Errorf("root's groups key: %q %v", l.GroupsKey, err)
	}
	if _, err := d.checkFields(api.AttachRequest{Collection: "docs", Path: "/p", Layout: api.Layout{GroupsKey: "x"}}, false); codeOf(err) != api.CodeRefused {
		t.Errorf("a front end's groups key: %v, want refused", err)
	}
}
