package view

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/hostcache"
	"github.com/chromafs/chromafs/refresh"
	"github.com/chromafs/chromafs/tree"
	"github.com/chromafs/chromafs/treeload"
)

// server is a fake Chroma server holding one collection under a name: its
// id, its path tree (nil: none), the record count an index tree recorded
// (-1: not an index) and the groups key it recorded (if known), its
// records. It counts the requests it answers.
type server struct {
	mu            sync.Mutex
	id            string
	tree          []byte
	indexed       int
	indexKey      string
	indexKeyKnown bool
	records       []chroma.RawRecord
	down          error // every request fails with it
	calls         map[string]int
}

func newServer(doc string) *server {
	s := &server{id: "col-1", indexed: -1, calls: map[string]int{}}
	if doc != "" {
		s.tree = []byte(doc)
	}
	return s
}

func (s *server) set(fn func(*server)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s)
}

func (s *server) count(what string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[what]
}

// ask counts a request to the collection of id and says why it fails.
func (s *server) ask(what, id string) error {
	s.calls[what]++
	switch {
	case s.down != nil:
		return s.down
	case id != s.id:
		return fmt.Errorf("collection %s: %w", id, chroma.ErrNotFound)
	}
	return nil
}

func (s *server) stamp() string {
	sum := sha256.Sum256(s.tree)
	return hex.EncodeToString(sum[:])
}

// store is a fake chroma.Store of the collection of id on srv. A tree it
// loads behaves as a tree stored in parts: read from the tree cache when
// that holds its digest, else fetched ("parts") and put there.
type store struct {
	srv *server
	id  string
}

func (st *store) LoadTreeCached(_ context.Context, tc chroma.TreeCache) ([]byte, string, error) {
	s := st.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ask("header", st.id); err != nil {
		return nil, "", err
	}
	if s.tree == nil {
		return nil, "", chroma.ErrNoTree
	}
	stamp := s.stamp()
	if tc != nil {
		if text, ok := tc.Get(stamp, int64(len(s.tree))); ok {
			return text, stamp, nil
		}
	}
	s.calls["parts"]++
	if tc != nil {
		tc.Put(stamp, s.tree)
	}
	return s.tree, stamp, nil
}

func (st *store) TreeStamp(ctx context.Context) (string, error) {
	info, err := st.TreeInfo(ctx)
	return info.Stamp, err
}

func (st *store) TreeInfo(context.Context) (chroma.TreeInfo, error) {
	s := st.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	info := chroma.TreeInfo{IndexRecords: -1}
	if err := s.ask("info", st.id); err != nil {
		return info, err
	}
	if s.tree == nil {
		return info, chroma.ErrNoTree
	}
	info.Stamp, info.IndexRecords = s.stamp(), s.indexed
	if s.indexed >= 0 {
		info.IndexGroupsKey, info.IndexGroupsKeyKnown = s.indexKey, s.indexKeyKnown
	}
	return info, nil
}

func (st *store) Scan(_ context.Context, fn func([]chroma.RawRecord) error) (int, error) {
	s := st.srv
	s.mu.Lock()
	recs := append([]chroma.RawRecord(nil), s.records...)
	err := s.ask("scan", st.id)
	s.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return len(recs), fn(recs)
}

func (st *store) Count(context.Context) (int, error) {
	s := st.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ask("count", st.id); err != nil {
		return 0, err
	}
	return len(s.records), nil
}

// Reopen opens the collection by name in place: the one the name stands
// for now.
func (st *store) Reopen(context.Context) error {
	s := st.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["open"]++
	if s.down != nil {
		return s.down
	}
	st.id = s.id
	return nil
}

func (st *store) Identity() string { return "default_tenant/default_database/" + st.id }
func (st *store) ID() string       { return st.id }
func (st *store) Close() error {
	st.srv.set(func(s *server) { s.calls["close"]++ })
	return nil
}

// opener opens srv's collection: by name the one the name stands for now.
type opener struct{ srv *server }

func (o opener) Open(context.Context) (*store, error) {
	s := o.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls["open"]++
	if s.down != nil {
		return nil, s.down
	}
	return &store{srv: s, id: s.id}, nil
}

func (o opener) OpenByID(id string) (*store, error) {
	o.srv.set(func(s *server) { s.calls["open-by-id"]++ })
	return &store{srv: o.srv, id: id}, nil
}

// mintlify is a tree in Mintlify's layout: a public page and one for the
// admin group.
const mintlify = `{"guide/intro": {"isPublic": true, "groups": []}, "internal/billing": {"isPublic": false, "groups": ["admin"]}}`

// setup is one run of a mount on a host: a host tier (nil: none), its
// log, a config.
type setup struct {
	host *hostcache.Cache
	logs *bytes.Buffer
	cfg  Config[*store]
}

func newSetup(t *testing.T, srv *server, hostDir string) *setup {
	t.Helper()
	s := &setup{logs: &bytes.Buffer{}}
	log := slog.New(slog.NewTextHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s.cfg = Config[*store]{
		Address: Address{Server: "http://127.0.0.1:1", Tenant: "default_tenant", Database: "default_database", Collection: "docs"},
		Open:    opener{srv}, Layout: treeload.Layout{Name: "auto"}, ScanLimit: 1000, Log: log,
	}
	if hostDir != "" {
		h, err := hostcache.Open(hostDir, 1<<30, log)
		if err != nil {
			t.Fatal(err)
		}
		s.host, s.cfg.Host = h, h
	}
	return s
}

// mount opens the collection and loads the view of groups, flushing what
// the load kept (as a mount does once it answers).
func (s *setup) mount(t *testing.T, groups ...string) (*Collection[*store], *View[*store], treeload.Result, error) {
	t.Helper()
	col, err := Open(context.Background(), s.cfg)
	if err != nil {
		return nil, nil, treeload.Result{}, err
	}
	t.Cleanup(func() { _ = col.Close() })
	v := col.View(groups)
	res, err := v.Load(context.Background())
	if err == nil {
		v.Flush()
	}
	return col, v, res, err
}

func mustMount(t *testing.T, s *setup, groups ...string) (*Collection[*store], *View[*store], treeload.Result) {
	t.Helper()
	col, v, res, err := s.mount(t, groups...)
	if err != nil {
		t.Fatalf("mount: %v\nlog:\n%s", err, s.logs)
	}
	return col, v, res
}

func visible(res treeload.Result, p string) bool { return res.Tree.Lookup(p) != nil }

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	srv := newServer(mintlify)

	// a first mount on the host opens by name and remembers the id
	_, _, res := mustMount(t, newSetup(t, srv, dir))
	if srv.count("open") != 1 || srv.count("open-by-id") != 0 || !visible(res, "guide/intro.mdx") {
		t.Fatalf("first mount: %v, intro visible %v", srv.calls, visible(res, "guide/intro.mdx"))
	}

	// the next opens by the remembered id: no open by name
	col, _, _ := mustMount(t, newSetup(t, srv, dir))
	if srv.count("open") != 1 || srv.count("open-by-id") != 1 || col.Store().ID() != "col-1" {
		t.Fatalf("second mount: %v, store %q", srv.calls, col.Store().ID())
	}

	// the collection re-created under the name: the id is not usable,
	// the mount opens by name and remembers the new id
	srv.set(func(s *server) { s.id = "col-2" })
	s := newSetup(t, srv, dir)
	col, _, res = mustMount(t, s)
	if srv.count("open") != 2 || col.Store().ID() != "col-2" || !visible(res, "guide/intro.mdx") {
		t.Fatalf("re-created: %v, store %q", srv.calls, col.Store().ID())
	}
	if !strings.Contains(s.logs.String(), "remembered collection id not usable") || srv.count("close") != 0 {
		t.Fatalf("the store of the forgotten id was not reopened in place, or not logged: %v\n%s", srv.calls, s.logs)
	}
	mustMount(t, newSetup(t, srv, dir))
	if srv.count("open") != 2 || srv.count("open-by-id") != 3 {
		t.Fatalf("after re-creation the new id is remembered: %v", srv.calls)
	}
}

// TestRemembered: on a host that served a view, the next process serves
// the version it served last with no request, and its first poll checks
// it: the same version costs that one request; a new one is swapped in;
// a collection re-created under its name is opened by name in place (the
// store the engine reads through follows) and its id remembered.
func TestRemembered(t *testing.T) {
	dir := t.TempDir()
	srv := newServer(mintlify)
	if _, ok := remembered(t, newSetup(t, srv, dir), "admin"); ok {
		t.Fatal("a first run on the host remembered a version")
	}
	mustMount(t, newSetup(t, srv, dir), "admin")

	// warm: no request until the poll, which asks one header
	calls := maps.Clone(srv.calls)
	calls["open-by-id"]++ // no request: the store is addressed by the remembered id
	w, ok := remembered(t, newSetup(t, srv, dir), "admin")
	if !ok || !visible(w.res, "internal/billing.mdx") || !maps.Equal(srv.calls, calls) {
		t.Fatalf("warm start: remembered %v, calls %v (before %v)", ok, srv.calls, calls)
	}
	if w.r.Poll() || srv.count("info") != calls["info"]+1 || srv.count("header") != calls["header"] || !w.col.confirmed {
		t.Fatalf("the check of the current version: %v, confirmed %v", srv.calls, w.col.confirmed)
	}
	if _, ok := remembered(t, newSetup(t, srv, dir), "other"); ok {
		t.Fatal("a view never served here remembered another view's version")
	}

	// a new version since: served until the poll swaps the new one in,
	// which the next run remembers
	next := `{"guide/next": {"isPublic": true, "groups": []}}`
	srv.set(func(s *server) { s.tree = []byte(next) })
	w, ok = remembered(t, newSetup(t, srv, dir), "admin")
	if !ok || !visible(w.res, "guide/intro.mdx") {
		t.Fatal("the version served last was not served")
	}
	if !w.r.Poll() || w.applied == nil || w.applied.Lookup("guide/next.mdx") == nil {
		t.Fatalf("the poll did not swap the new version in: %v", srv.calls)
	}
	w, ok = remembered(t, newSetup(t, srv, dir), "admin")
	if !ok || !visible(w.res, "guide/next.mdx") || w.r.Poll() {
		t.Fatal("the version a refresh swapped in is not the one remembered")
	}

	// re-created under its name: the poll reopens by name in place
	srv.set(func(s *server) { s.id, s.tree = "col-2", []byte(mintlify) })
	w, ok = remembered(t, newSetup(t, srv, dir), "admin")
	if !ok {
		t.Fatal("nothing remembered")
	}
	st := w.col.Store()
	if !w.r.Poll() || st.ID() != "col-2" || w.col.Store() != st || w.applied.Lookup("internal/billing.mdx") == nil {
		t.Fatalf("re-created: swapped %v, store %q (same %v), %v", w.applied != nil, st.ID(), w.col.Store() == st, srv.calls)
	}
	opens := srv.count("open")
	col, _, _ := mustMount(t, newSetup(t, srv, dir), "admin")
	if col.Store().ID() != "col-2" || srv.count("open") != opens {
		t.Fatalf("the new id is not remembered: %q, %v", col.Store().ID(), srv.calls)
	}

	// re-created with the very same tree: the version is the one served,
	// yet the tree is loaded again under the new identity, so that the
	// next run serves it with no request
	srv.set(func(s *server) { s.id = "col-3" })
	w, ok = remembered(t, newSetup(t, srv, dir), "admin")
	if !ok || !w.r.Poll() || w.col.Store().ID() != "col-3" || w.applied == nil {
		t.Fatalf("re-created with the same tree: remembered %v, store %q, reloaded %v", ok, w.col.Store().ID(), w.applied != nil)
	}
	if w.r.Poll() {
		t.Fatal("a poll after the reload found a change")
	}
	calls = maps.Clone(srv.calls)
	calls["open-by-id"]++
	if _, ok := remembered(t, newSetup(t, srv, dir), "admin"); !ok || !maps.Equal(srv.calls, calls) {
		t.Fatalf("the run after: remembered %v, calls %v (before %v)", ok, srv.calls, calls)
	}

	// a layout with a groups key checks an index's header first: never
	// served unchecked
	s := newSetup(t, srv, dir)
	s.cfg.Layout.GroupsKey = "groups"
	if _, ok := remembered(t, s, "admin"); ok {
		t.Fatal("served unchecked under a groups key")
	}
}

// warm is a run that serves the remembered version: its collection, the
// tree served, and a refresher whose swaps are recorded.
type warm struct {
	col     *Collection[*store]
	res     treeload.Result
	r       *refresh.Refresher
	applied *tree.Tree
}

func remembered(t *testing.T, s *setup, groups ...string) (*warm, bool) {
	t.Helper()
	col, err := Open(context.Background(), s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = col.Close() })
	v := col.View(groups)
	w := &warm{col: col}
	var ok bool
	if w.res, ok = v.Remembered(); !ok {
		return w, false
	}
	w.r = v.Refresher(refresh.Config{Unchecked: true, Apply: func(t *tree.Tree) int { w.applied = t; return 0 }}, w.res)
	t.Cleanup(w.r.Close)
	return w, true
}

func TestOpenServerCannotBeAsked(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"unreachable", fmt.Errorf("dial: %w", chroma.ErrUnreachable)},
		{"unauthorized", fmt.Errorf("401: %w", chroma.ErrUnauthorized)},
		{"server error", fmt.Errorf("500: %w", chroma.ErrServer)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			srv := newServer(mintlify)
			mustMount(t, newSetup(t, srv, dir)) // remembers the id
			srv.set(func(s *server) { s.down = tc.err })
			_, _, _, err := newSetup(t, srv, dir).mount(t)
			if !errors.Is(err, tc.err) {
				t.Fatalf("load by a remembered id on a server that cannot be asked: %v, want %v", err, tc.err)
			}
			if srv.count("open") != 1 {
				t.Fatalf("a server that cannot be asked was taken for a forgotten id (opened by name): %v", srv.calls)
			}
			// and without a remembered id, opening by name fails alike
			_, _, _, err = newSetup(t, srv, "").mount(t)
			if !errors.Is(err, tc.err) {
				t.Fatalf("open by name: %v, want %v", err, tc.err)
			}
		})
	}
}

func TestNoHostTier(t *testing.T) {
	srv := newServer(mintlify)
	for range 2 {
		mustMount(t, newSetup(t, srv, ""))
	}
	if srv.count("open") != 2 || srv.count("open-by-id") != 0 || srv.count("parts") != 2 {
		t.Fatalf("without a host tier every mount opens by name and fetches the tree: %v", srv.calls)
	}
}

func TestTreeCache(t *testing.T) {
	dir := t.TempDir()
	srv := newServer(mintlify)
	mustMount(t, newSetup(t, srv, dir), "admin") // fetched, kept
	if srv.count("parts") != 1 {
		t.Fatalf("first mount: %v", srv.calls)
	}
	// another view (no snapshot of it): the tree's text from the host tier
	_, _, res := mustMount(t, newSetup(t, srv, dir))
	if srv.count("parts") != 1 || res.Snapshot || visible(res, "internal/billing.mdx") || !visible(res, "guide/intro.mdx") {
		t.Fatalf("tree cache hit: %v, snapshot %v", srv.calls, res.Snapshot)
	}
	// a changed tree is another digest: fetched
	srv.set(func(s *server) { s.tree = []byte(`{"guide/new": {"isPublic": true, "groups": []}}`) })
	_, _, res = mustMount(t, newSetup(t, srv, dir), "sre")
	if srv.count("parts") != 2 || !visible(res, "guide/new.mdx") {
		t.Fatalf("changed tree: %v", srv.calls)
	}
	// entries that fail verification are fetched again, never served
	corrupt(t, dir)
	_, _, res = mustMount(t, newSetup(t, srv, dir), "ops")
	if srv.count("parts") != 3 || !visible(res, "guide/new.mdx") {
		t.Fatalf("corrupt tree cache: %v", srv.calls)
	}
}

// corrupt flips a byte in the middle of every entry of the host tier.
func corrupt(t *testing.T, dir string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.Contains(p, string(filepath.Separator)+"refs"+string(filepath.Separator)) || strings.Contains(p, "locks") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil || len(b) < 2 {
			return err
		}
		b[len(b)/2] ^= 0xff
		n++
		return os.WriteFile(p, b, 0o600)
	})
	if err != nil || n == 0 {
		t.Fatalf("corrupt: %d entries, %v", n, err)
	}
}

func TestSnapshots(t *testing.T) {
	dir := t.TempDir()
	srv := newServer(mintlify)
	_, _, res := mustMount(t, newSetup(t, srv, dir), "admin")
	if res.Snapshot || !visible(res, "internal/billing.mdx") {
		t.Fatalf("first mount: snapshot %v", res.Snapshot)
	}
	headers := srv.count("header")

	// the same view again: its snapshot, no tree header, no parts
	_, _, res = mustMount(t, newSetup(t, srv, dir), "admin")
	if !res.Snapshot || srv.count("header") != headers || srv.count("parts") != 1 || !visible(res, "internal/billing.mdx") {
		t.Fatalf("same view: snapshot %v, %v", res.Snapshot, srv.calls)
	}

	// other groups never get it: their own tree, without the admin page
	for _, groups := range [][]string{nil, {"sre"}, {"admin", "sre"}} {
		_, _, res = mustMount(t, newSetup(t, srv, dir), groups...)
		if res.Snapshot {
			t.Fatalf("groups %v were given another view's snapshot", groups)
		}
		if visible(res, "internal/billing.mdx") != (len(groups) == 2) {
			t.Fatalf("groups %v: billing visible %v", groups, visible(res, "internal/billing.mdx"))
		}
	}

	// each view then has its own snapshot, and only its own
	for _, groups := range [][]string{nil, {"sre"}, {"admin", "sre"}, {"admin"}} {
		_, _, res = mustMount(t, newSetup(t, srv, dir), groups...)
		if !res.Snapshot || visible(res, "internal/billing.mdx") != slices.Contains(groups, "admin") {
			t.Fatalf("groups %v again: snapshot %v, billing visible %v", groups, res.Snapshot, visible(res, "internal/billing.mdx"))
		}
	}

	// a new stamp: the snapshot of the old one is not used
	srv.set(func(s *server) {
		s.tree = []byte(`{"internal/billing": {"isPublic": false, "groups": ["admin"]}, "internal/new": {"isPublic": false, "groups": ["admin"]}}`)
	})
	_, _, res = mustMount(t, newSetup(t, srv, dir), "admin")
	if res.Snapshot || !visible(res, "internal/new.mdx") {
		t.Fatalf("new stamp: snapshot %v", res.Snapshot)
	}
}

// langchain are the records of a LangChain (Python) vector store: two
// files, each in two chunks with start offsets.
func langchain(files ...string) []chroma.RawRecord {
	var recs []chroma.RawRecord
	for i, f := range files {
		recs = append(recs,
			chroma.RawRecord{ID: fmt.Sprintf("%d-0", i), Doc: "hello ", Meta: map[string]any{"source": f, "start_index": 0.0}},
			chroma.RawRecord{ID: fmt.Sprintf("%d-1", i), Doc: "world\n", Meta: map[string]any{"source": f, "start_index": 6.0}})
	}
	return recs
}

func TestScanFallback(t *testing.T) {
	srv := newServer("")
	srv.records = langchain("a.md", "b.md")
	s := newSetup(t, srv, t.TempDir())
	col, _, res := mustMount(t, s)
	if !visible(res, "a.md") || !visible(res, "b.md") || srv.count("scan") != 1 {
		t.Fatalf("scanned: %v", srv.calls)
	}
	if res.Stamp != treeload.ScanStamp(4) || !strings.Contains(s.logs.String(), "no path tree: scanned") {
		t.Fatalf("stamp %q; log:\n%s", res.Stamp, s.logs)
	}
	if stamp, err := col.Stamp(context.Background()); err != nil || stamp != res.Stamp {
		t.Fatalf("poll stamp %q, %v; loaded %q", stamp, err, res.Stamp)
	}

	// layouts that need a tree do not scan
	s = newSetup(t, srv, "")
	s.cfg.Layout.Name = "mintlify"
	if _, _, _, err := s.mount(t); !errors.Is(err, chroma.ErrNoTree) {
		t.Fatalf("mintlify layout without a tree: %v", err)
	}
	// past the scan limit: an error that says to index
	s = newSetup(t, srv, "")
	s.cfg.ScanLimit = 3
	if _, _, _, err := s.mount(t); !errors.Is(err, treeload.ErrTooBig) {
		t.Fatalf("past the scan limit: %v", err)
	}
}

// indexed is a server whose tree is an index of the records it holds,
// written without a groups key (and recording so).
func indexed() *server {
	srv := newServer(`{"a": {"isPublic": true, "groups": [], "path": "a.md"}}`)
	srv.records = langchain("a.md")
	srv.indexed, srv.indexKeyKnown = len(srv.records), true
	return srv
}

func TestStaleIndex(t *testing.T) {
	srv := indexed()
	s := newSetup(t, srv, "")
	col, v, res := mustMount(t, s)
	ctx := context.Background()
	if srv.count("scan") != 0 || !visible(res, "a.md") {
		t.Fatalf("fresh index: %v", srv.calls)
	}
	if stamp, _ := col.Stamp(ctx); stamp != res.Stamp {
		t.Fatalf("fresh index: poll %q, loaded %q", stamp, res.Stamp)
	}

	// another tool added a file: the count moved, the records are scanned
	srv.set(func(s *server) { s.records = append(s.records, langchain("b.md")...) })
	stamp, err := col.Stamp(ctx)
	if err != nil || stamp == res.Stamp {
		t.Fatalf("the count moved, the stamp did not: %q, %v", stamp, err)
	}
	res, err = v.Latest(ctx)
	if err != nil || !visible(res, "b.md") || srv.count("scan") != 1 {
		t.Fatalf("stale index: %v, %v", err, srv.calls)
	}
	if res.Stamp != stamp || !strings.Contains(s.logs.String(), "index is out of date: serving its records as scanned now") {
		t.Fatalf("stale index: stamp %q, poll %q; log:\n%s", res.Stamp, stamp, s.logs)
	}

	// the index written again: loaded again, not scanned
	srv.set(func(s *server) {
		s.tree = []byte(`{"a": {"isPublic": true, "groups": [], "path": "a.md"}, "b": {"isPublic": true, "groups": [], "path": "b.md"}}`)
		s.indexed = len(s.records)
	})
	stamp, _ = col.Stamp(ctx)
	res, err = v.Latest(ctx)
	if err != nil || srv.count("scan") != 1 || !visible(res, "b.md") || res.Stamp != stamp {
		t.Fatalf("re-indexed: %v, %v, stamp %q poll %q", err, srv.calls, res.Stamp, stamp)
	}

	// stale past the scan limit: the index served as it is, with a warning
	srv.set(func(s *server) { s.records = append(s.records, langchain("c.md")...) })
	col.cfg.ScanLimit = 5
	stamp, _ = col.Stamp(ctx)
	res, err = v.Latest(ctx)
	if err != nil || srv.count("scan") != 1 || visible(res, "c.md") || res.Stamp != stamp {
		t.Fatalf("stale past the limit: %v, %v, stamp %q poll %q", err, srv.calls, res.Stamp, stamp)
	}
	if !strings.Contains(s.logs.String(), "serving it as it is") {
		t.Fatalf("no warning; log:\n%s", s.logs)
	}
}

// TestPollFindsNothingNew runs the view's refresher: a poll whose stamp is
// the loaded one loads nothing, in every kind of collection.
func TestPollFindsNothingNew(t *testing.T) {
	stale := indexed()
	stale.records = append(stale.records, langchain("b.md")...)
	scanned := newServer("")
	scanned.records = langchain("a.md")
	for _, tc := range []struct {
		name string
		srv  *server
	}{
		{"tree", newServer(mintlify)},
		{"scanned", scanned},
		{"index", indexed()},
		{"stale index", stale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := tc.srv
			_, v, _ := mustMount(t, newSetup(t, srv, t.TempDir()))
			res, err := v.Latest(context.Background()) // what a refresh would serve
			if err != nil {
				t.Fatal(err)
			}
			applied := 0
			r := v.Refresher(refresh.Config{Apply: func(*tree.Tree) int { applied++; return 0 }}, res)
			defer r.Close()
			headers, scans := srv.count("header"), srv.count("scan")
			for range 3 {
				if r.Poll() {
					t.Fatal("a poll that found nothing new refreshed")
				}
			}
			if applied != 0 || srv.count("header") != headers || srv.count("scan") != scans {
				t.Fatalf("polls loaded: applied %d, %v", applied, srv.calls)
			}
			// something new: one poll loads it
			srv.set(func(s *server) { s.records = append(s.records, langchain("z.md")...) })
			if tc.name == "tree" {
				srv.set(func(s *server) { s.tree = []byte(`{"docs/z": {"isPublic": true, "groups": []}}`) })
			}
			if !r.Poll() || applied != 1 {
				t.Fatalf("a poll after a change did not refresh: applied %d, %v", applied, srv.calls)
			}
			if r.Poll() || applied != 1 {
				t.Fatalf("the poll after a refresh refreshed again: applied %d", applied)
			}
		})
	}
}

// TestRefreshKeepsForFlush: a refresh's tree reaches the host tier only
// once it is applied, and a failed one leaves nothing to write.
func TestRefreshKeepsForFlush(t *testing.T) {
	dir := t.TempDir()
	srv := newServer(mintlify)
	_, v, res := mustMount(t, newSetup(t, srv, dir), "admin")
	r := v.Refresher(refresh.Config{Apply: func(*tree.Tree) int { return 0 }}, res)
	defer r.Close()
	next := `{"internal/next": {"isPublic": false, "groups": ["admin"]}}`
	srv.set(func(s *server) { s.tree = []byte(next) })
	if !r.Poll() {
		t.Fatal("no refresh")
	}
	// the refreshed tree's snapshot was written by Applied: a new mount
	// of the same view loads it without the tree
	parts := srv.count("parts")
	_, _, res = mustMount(t, newSetup(t, srv, dir), "admin")
	if !res.Snapshot || !visible(res, "internal/next.mdx") || srv.count("parts") != parts {
		t.Fatalf("after a refresh: snapshot %v, %v", res.Snapshot, srv.calls)
	}
}

// TestTakeOutlivesARefresh: what Take hands over (a host daemon takes it
// under its lock and writes it later) is written by Write whatever the
// view did meanwhile: a refresh failing, which discards what the view
// kept, does not lose it; and a version a refresh served after the take
// stays the one remembered, though the older take is written after it.
func TestTakeOutlivesARefresh(t *testing.T) {
	dir := t.TempDir()
	srv := newServer(mintlify)
	load := func() (*View[*store], treeload.Result) {
		t.Helper()
		col, err := Open(context.Background(), newSetup(t, srv, dir).cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = col.Close() })
		v := col.View([]string{"admin"})
		res, err := v.Load(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return v, res
	}
	v, _ := load()
	k := v.Take()
	v.trees.discard() // what a failed refresh does
	k.Write()
	parts := srv.count("parts")
	if _, _, res := mustMount(t, newSetup(t, srv, dir), "admin"); !res.Snapshot || srv.count("parts") != parts {
		t.Fatalf("the snapshot taken was not written: loaded from a snapshot %v, %v", res.Snapshot, srv.calls)
	}

	v, res := load()
	k = v.Take() // remembers the version served now
	srv.set(func(s *server) { s.tree = []byte(`{"guide/next": {"isPublic": true, "groups": []}}`) })
	r := v.Refresher(refresh.Config{Apply: func(*tree.Tree) int { return 0 }}, res)
	defer r.Close()
	if !r.Poll() {
		t.Fatal("no refresh")
	}
	k.Write()
	if w, ok := remembered(t, newSetup(t, srv, dir), "admin"); !ok || !visible(w.res, "guide/next.mdx") {
		t.Fatalf("the version remembered is not the one the refresh served after the take (remembered %v)", ok)
	}
}

// TestIDRefName pins the name of the ref holding a collection's id:
// hosts remember ids under it from earlier versions.
func TestIDRefName(t *testing.T) {
	a := Address{Server: "http://127.0.0.1:8000", Tenant: "t", Database: "d", Collection: "docs"}
	if got, want := a.idRef(), "collection-id\x00http://127.0.0.1:8000\x00t\x00d\x00docs"; got != want {
		t.Fatalf("idRef %q, want %q", got, want)
	}
}

// TestManyViews: one collection, several views loaded at once (a daemon's
// shape): each sees its own groups, the collection is opened once.
func TestManyViews(t *testing.T) {
	srv := newServer(mintlify)
	s := newSetup(t, srv, t.TempDir())
	col, err := Open(context.Background(), s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer col.Close()
	groups := [][]string{nil, {"admin"}, {"sre"}, {"admin", "sre"}}
	results := make([]treeload.Result, len(groups))
	errs := make([]error, len(groups))
	var wg sync.WaitGroup
	for i, g := range groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := col.View(g)
			results[i], errs[i] = v.Load(context.Background())
			v.Flush()
		}()
	}
	wg.Wait()
	for i, g := range groups {
		if errs[i] != nil {
			t.Fatalf("view %v: %v", g, errs[i])
		}
		admin := len(g) > 0 && g[0] == "admin"
		if visible(results[i], "internal/billing.mdx") != admin {
			t.Fatalf("view %v: billing visible %v", g, !admin)
		}
	}
	if srv.count("open") != 1 {
		t.Fatalf("the collection was opened %d times", srv.count("open"))
	}
}

// TestDecodedOncePerVersion: the views of one collection decode its stored
// tree once per version: a view after the first asks for the tree's
// header only (no text, no parts) and builds its own pruned tree from the
// collection's decoded document, with its own warnings; a new version is
// fetched and decoded again, once.
func TestDecodedOncePerVersion(t *testing.T) {
	const doc = `{"guide/intro": {"isPublic": true, "groups": []}, "internal/billing": {"isPublic": false, "groups": ["admin"]}, "bad/../escape": {"isPublic": true, "groups": []}}`
	for _, host := range []bool{false, true} {
		t.Run(fmt.Sprintf("host tier %v", host), func(t *testing.T) {
			srv := newServer(doc)
			dir := ""
			if host {
				dir = t.TempDir()
			}
			col, err := Open(context.Background(), newSetup(t, srv, dir).cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer col.Close()
			var warnings []int
			for i, groups := range [][]string{{"admin"}, nil, {"sre"}, {"admin", "sre"}} {
				v := col.View(groups)
				res, err := v.Load(context.Background())
				if err != nil {
					t.Fatalf("view %v: %v", groups, err)
				}
				v.Flush()
				if visible(res, "internal/billing.mdx") != slices.Contains(groups, "admin") || !visible(res, "guide/intro.mdx") || res.Stamp != srv.stamp() {
					t.Fatalf("view %v: billing visible %v, stamp %q", groups, visible(res, "internal/billing.mdx"), res.Stamp)
				}
				if srv.count("header") != 1 || srv.count("parts") != 1 || srv.count("info") != i {
					t.Fatalf("after %d views: %v, want the tree fetched once and a header asked for by each later view", i+1, srv.calls)
				}
				warnings = append(warnings, len(res.Warnings.List))
			}
			if warnings[0] == 0 || slices.Max(warnings) != slices.Min(warnings) {
				t.Fatalf("warnings per view %v: want the same, non-zero, for each view", warnings)
			}

			srv.set(func(s *server) { s.tree = []byte(`{"guide/new": {"isPublic": true, "groups": []}}`) })
			for _, groups := range [][]string{{"ops"}, {"dev"}} {
				res, err := col.View(groups).Load(context.Background())
				if err != nil || !visible(res, "guide/new.mdx") || visible(res, "guide/intro.mdx") {
					t.Fatalf("view %v of the new version: %v", groups, err)
				}
			}
			if srv.count("header") != 2 || srv.count("parts") != 2 {
				t.Fatalf("a new version: %v, want it fetched once more", srv.calls)
			}
		})
	}
}

// TestNewViewTrustsAFreshVersion: with Config.Fresh, a new view of a
// loaded collection asks Chroma nothing while the decoded version was
// confirmed within it (loaded, or found current by a poll's Stamp); a
// Stamp that finds another version ends the trust (the next view, and the
// refresh's Latest, fetch it); Fresh 0 asks every time.
func TestNewViewTrustsAFreshVersion(t *testing.T) {
	const doc = `{"guide/intro": {"isPublic": true, "groups": []}, "internal/billing": {"isPublic": false, "groups": ["admin"]}}`
	for _, fresh := range []time.Duration{0, time.Hour} {
		t.Run(fmt.Sprint("fresh ", fresh), func(t *testing.T) {
			srv := newServer(doc)
			s := newSetup(t, srv, "")
			s.cfg.Fresh = fresh
			col, err := Open(context.Background(), s.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer col.Close()
			if _, err := col.View(nil).Load(context.Background()); err != nil {
				t.Fatal(err)
			}
			before := srv.count("info") + srv.count("header") + srv.count("parts")
			res, err := col.View([]string{"admin"}).Load(context.Background())
			if err != nil || !visible(res, "internal/billing.mdx") {
				t.Fatalf("a new view: %v", err)
			}
			asked := srv.count("info") + srv.count("header") + srv.count("parts") - before
			if want := map[bool]int{true: 0, false: 1}[fresh > 0]; asked != want {
				t.Fatalf("a new view of a loaded collection asked %d requests (%v), want %d", asked, srv.calls, want)
			}
			// a poll finds the same version: still trusted
			if _, err := col.Stamp(context.Background()); err != nil {
				t.Fatal(err)
			}
			before = srv.count("info") + srv.count("header") + srv.count("parts")
			if _, err := col.View([]string{"sre"}).Load(context.Background()); err != nil {
				t.Fatal(err)
			}
			if asked := srv.count("info") + srv.count("header") + srv.count("parts") - before; fresh > 0 && asked != 0 {
				t.Fatalf("after a poll that found the same version, a new view asked %d", asked)
			}
			// a poll finds a new version: the next view fetches it
			srv.set(func(s *server) { s.tree = []byte(`{"guide/new": {"isPublic": true, "groups": []}}`) })
			if _, err := col.Stamp(context.Background()); err != nil {
				t.Fatal(err)
			}
			res, err = col.View([]string{"ops"}).Load(context.Background())
			if err != nil || !visible(res, "guide/new.mdx") || visible(res, "guide/intro.mdx") {
				t.Fatalf("a new view after a poll found a new version: %v, served the old one: %v", err, visible(res, "guide/intro.mdx"))
			}
		})
	}
}

// TestTrustFollowsWhatWasAskedLast: the trust in the decoded version
// follows the request sent last, whatever order the answers come in: a
// fetch of the old version that ends after a poll found a newer one is
// not trusted, nor is a late confirmation of an earlier request; a
// confirmation sent later is; no tree ends the trust; Fresh bounds it.
func TestTrustFollowsWhatWasAskedLast(t *testing.T) {
	c := &Collection[*store]{cfg: Config[*store]{Fresh: time.Hour}}
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	fresh := func() bool { _, ok := c.freshStamp(); return ok }
	doc := &tree.Doc{}
	for _, step := range []struct {
		what string
		do   func()
		want bool
	}{
		{"a fetch of s1", func() { c.keepDecoded(doc, "s1", 1, at(0)) }, true},
		{"a poll finds s2", func() { c.checked("s2", at(20)) }, false},
		{"a fetch of s1 asked before that poll ends", func() { c.keepDecoded(doc, "s1", 1, at(10)) }, false},
		{"a late answer s1 to a request sent before the poll", func() { c.checked("s1", at(15)) }, false},
		{"a poll sent after finds s1", func() { c.checked("s1", at(30)) }, true},
		{"the collection has no tree", func() { c.checked("", at(40)) }, false},
		{"a fetch of s3", func() { c.keepDecoded(doc, "s3", 1, at(50)) }, true},
	} {
		step.do()
		if got := fresh(); got != step.want {
			t.Errorf("%s: trusted %v, want %v", step.what, got, step.want)
		}
	}
	old := &Collection[*store]{cfg: Config[*store]{Fresh: time.Hour}}
	old.keepDecoded(doc, "s1", 1, t0.Add(-2*time.Hour))
	if _, ok := old.freshStamp(); ok {
		t.Error("a version confirmed two hours ago is trusted with Fresh 1h")
	}
	old.checked("s1", t0)
	if _, ok := old.freshStamp(); !ok {
		t.Error("a poll's confirmation now does not renew the trust")
	}
}

// TestLoadLeavesTheIDToFlush: a load does not write the collection's id
// to the host tier (a disk write on a cold mount's critical path); the
// Flush after it does, and the next run opens the collection by it.
func TestLoadLeavesTheIDToFlush(t *testing.T) {
	dir := t.TempDir()
	srv := newServer(mintlify)
	s := newSetup(t, srv, dir)
	col, err := Open(context.Background(), s.cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = col.Close() })
	v := col.View([]string{"admin"})
	if _, err := v.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.host.Ref(s.cfg.Address.idRef()); ok {
		t.Fatal("the load wrote the collection's id to the host tier")
	}
	v.Flush()
	if id, ok := s.host.Ref(s.cfg.Address.idRef()); !ok || id != col.Store().ID() {
		t.Fatalf("after Flush the id ref is %q (%v), want %q", id, ok, col.Store().ID())
	}
	if k := v.Take(); !k.Empty() {
		t.Fatal("a second Take found something to write")
	}
	opens := srv.count("open")
	next, err := Open(context.Background(), newSetup(t, srv, dir).cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = next.Close() })
	if srv.count("open") != opens {
		t.Fatalf("the next run opened the collection by name: %v", srv.calls)
	}
}
