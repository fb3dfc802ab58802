package dockerplugin

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/docker/go-plugins-helpers/volume"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/daemon"
	"github.com/chromafs/chromafs/policy"
)

// fakeDaemon records attachments by path (the plugin's own logic is
// tested here; integration_test/dockerplugin_test.go runs the real one).
type fakeDaemon struct {
	at       map[string]api.AttachRequest
	attaches int
}

func (f *fakeDaemon) AttachFor(_ context.Context, fe daemon.Frontend, req api.AttachRequest) (api.Attachment, error) {
	if !fe.Subject.Docker {
		return api.Attachment{}, errors.New("not the docker subject")
	}
	if _, ok := f.at[req.Path]; ok {
		return api.Attachment{}, errors.New("in use")
	}
	f.at[req.Path] = req
	f.attaches++
	return api.Attachment{ID: "a", Path: req.Path}, nil
}

func (f *fakeDaemon) AttachmentAt(path string) (api.Attachment, bool) {
	_, ok := f.at[path]
	return api.Attachment{Path: path}, ok
}

func (f *fakeDaemon) DetachPath(path string) (bool, error) {
	_, ok := f.at[path]
	delete(f.at, path)
	return ok, nil
}

const rules = "- docker: true\n  collections: [docs]\n  groups: [team]\n"

func setup(t *testing.T, dir string, d *fakeDaemon, yaml string) (*Plugin, *atomic.Pointer[policy.Policy]) {
	t.Helper()
	pol, err := policy.Parse([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	var cur atomic.Pointer[policy.Policy]
	cur.Store(pol)
	p, err := New(Config{Daemon: d, Policy: cur.Load, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	return p, &cur
}

func TestCreateOptions(t *testing.T) {
	p, _ := setup(t, t.TempDir(), &fakeDaemon{at: map[string]api.AttachRequest{}}, rules)
	for _, c := range []struct {
		name string
		opts map[string]string
		says string // "" accepted
	}{
		{"public", map[string]string{"collection": "docs"}, ""},
		{"team", map[string]string{"collection": "docs", "groups": "team"}, ""},
		{"layout", map[string]string{"collection": "docs", "layout": "custom", "path-key": "source"}, ""},
		{"billing", map[string]string{"collection": "docs", "groups": "billing"}, "may not ask for group(s) billing"},
		{"other", map[string]string{"collection": "other"}, `may not attach collection "other"`},
		{"unknown", map[string]string{"collection": "docs", "colour": "red"}, `unknown option "colour"`},
		{"nocoll", map[string]string{"groups": "team"}, "no collection"},
		{"custom", map[string]string{"collection": "docs", "layout": "custom"}, "needs --path-key"},
		{"../up", map[string]string{"collection": "docs"}, "volume name"},
		{"climb", map[string]string{"collection": "../../vault/collections/payroll"}, "option collection: collection name"},
	} {
		err := p.Create(&volume.CreateRequest{Name: c.name, Options: c.opts})
		if c.says == "" && err != nil || c.says != "" && (err == nil || !strings.Contains(err.Error(), c.says)) {
			t.Errorf("create %s %v: %v, want %q", c.name, c.opts, err, c.says)
		}
	}
	l, _ := p.List()
	var names []string
	for _, v := range l.Volumes {
		names = append(names, v.Name)
	}
	if got := strings.Join(names, " "); got != "layout public team" {
		t.Errorf("volumes %q", got)
	}
	if err := p.Create(&volume.CreateRequest{Name: "team", Options: map[string]string{"collection": "docs"}}); err == nil {
		t.Error("creating a volume again with other options: no error")
	}
	if err := p.Create(&volume.CreateRequest{Name: "team", Options: map[string]string{"collection": "docs", "groups": "team"}}); err != nil {
		t.Errorf("creating a volume again with its options: %v", err)
	}
}

// TestMountsCounted: the first container attaches, the second shares it,
// the last unmount detaches; Remove refuses while mounted; the count and
// the volumes outlive the plugin; the policy is checked at mount.
func TestMountsCounted(t *testing.T) {
	dir := t.TempDir()
	d := &fakeDaemon{at: map[string]api.AttachRequest{}}
	p, _ := setup(t, dir, d, rules)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(p.Create(&volume.CreateRequest{Name: "v", Options: map[string]string{"collection": "docs", "groups": "team"}}))
	path := filepath.Join(dir, "volumes", "v")
	if r, _ := p.Path(&volume.PathRequest{Name: "v"}); r.Mountpoint != "" {
		t.Errorf("path before a mount: %q", r.Mountpoint)
	}
	for _, id := range []string{"c1", "c2", "c2"} {
		r, err := p.Mount(&volume.MountRequest{Name: "v", ID: id})
		must(err)
		if r.Mountpoint != path {
			t.Errorf("mountpoint %q, want %q", r.Mountpoint, path)
		}
	}
	if d.attaches != 1 || d.at[path].Collection != "docs" || strings.Join(d.at[path].Groups, ",") != "team" {
		t.Errorf("attaches %d, %+v", d.attaches, d.at[path])
	}
	if g, _ := p.Get(&volume.GetRequest{Name: "v"}); g.Volume.Mountpoint != path || g.Volume.Status["containers"] != 2 {
		t.Errorf("get while mounted: %+v", g.Volume)
	}
	if err := p.Remove(&volume.RemoveRequest{Name: "v"}); err == nil || !strings.Contains(err.Error(), "mounted by 2") {
		t.Errorf("remove while mounted: %v", err)
	}

	// a new plugin (a restarted daemon) knows the volume and its containers
	p, cur := setup(t, dir, d, rules)
	must(p.Unmount(&volume.UnmountRequest{Name: "v", ID: "c1"}))
	if _, ok := d.at[path]; !ok {
		t.Fatal("detached while c2 holds the volume")
	}
	must(p.Unmount(&volume.UnmountRequest{Name: "v", ID: "c2"}))
	if _, ok := d.at[path]; ok {
		t.Fatal("still attached after the last unmount")
	}
	if r, _ := p.Path(&volume.PathRequest{Name: "v"}); r.Mountpoint != "" {
		t.Errorf("path after the last unmount: %q", r.Mountpoint)
	}

	pol, err := policy.Parse([]byte("- docker: true\n  collections: [docs]\n  groups: []\n"))
	must(err)
	cur.Store(pol)
	if _, err := p.Mount(&volume.MountRequest{Name: "v", ID: "c3"}); err == nil || !strings.Contains(err.Error(), "may not ask for group(s) team") {
		t.Errorf("mount the policy no longer grants: %v", err)
	}
	if len(d.at) != 0 {
		t.Errorf("attached after a refused mount: %v", d.at)
	}
	must(p.Remove(&volume.RemoveRequest{Name: "v"}))
	p, _ = setup(t, dir, d, rules)
	if _, err := p.Get(&volume.GetRequest{Name: "v"}); err == nil {
		t.Error("a removed volume is back after a restart")
	}
}

// TestStaleAttachmentDetached: an attachment no container holds when
// the plugin starts is detached.
func TestStaleAttachmentDetached(t *testing.T) {
	dir := t.TempDir()
	d := &fakeDaemon{at: map[string]api.AttachRequest{}}
	p, _ := setup(t, dir, d, rules)
	if err := p.Create(&volume.CreateRequest{Name: "v", Options: map[string]string{"collection": "docs"}}); err != nil {
		t.Fatal(err)
	}
	d.at[filepath.Join(dir, "volumes", "v")] = api.AttachRequest{}
	setup(t, dir, d, rules)
	if len(d.at) != 0 {
		t.Errorf("a stale attachment stays: %v", d.at)
	}
}
