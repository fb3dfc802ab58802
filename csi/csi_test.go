package csi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/daemon"
	"github.com/chromafs/chromafs/policy"
)

// fakeDaemon records attachments by path and judges them by a policy,
// for the plugin's own logic (the real daemon is in integration_test).
type fakeDaemon struct {
	pol      *policy.Policy
	at       map[string]api.AttachRequest
	subjects []policy.Subject
}

func (f *fakeDaemon) AttachFor(_ context.Context, fe daemon.Frontend, req api.AttachRequest) (api.Attachment, error) {
	f.subjects = append(f.subjects, fe.Subject)
	if err := f.pol.Allow(fe.Subject, req.Collection, req.Groups); err != nil {
		return api.Attachment{}, &daemon.Error{Code: api.CodeRefused, Err: err}
	}
	if fi, err := os.Stat(req.Path); err != nil || !fi.IsDir() {
		return api.Attachment{}, &daemon.Error{Code: api.CodeBadRequest, Err: fmt.Errorf("no directory %s", req.Path)}
	}
	f.at[req.Path] = req
	return api.Attachment{ID: "a1", Path: req.Path}, nil
}

func (f *fakeDaemon) AttachmentAt(path string) (api.Attachment, bool) {
	_, ok := f.at[path]
	return api.Attachment{ID: "a1", Path: path}, ok
}

func (f *fakeDaemon) ViewOf(path string) (string, []string, bool) {
	r, ok := f.at[path]
	return r.Collection, r.Groups, ok
}

func (f *fakeDaemon) DetachPath(path string) (bool, error) {
	_, ok := f.at[path]
	delete(f.at, path)
	return ok, nil
}

const testPolicy = `
- namespaces: [agents]
  collections: [docs]
  groups: [team]
- service_accounts: [other/reader]
  collections: [docs]
  groups: []
`

func newTestPlugin(t *testing.T) (*Plugin, *fakeDaemon) {
	t.Helper()
	pol, err := policy.Parse([]byte(testPolicy))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeDaemon{pol: pol, at: map[string]api.AttachRequest{}}
	p, err := New(f, "node-1", "v1.2.3", nil)
	if err != nil {
		t.Fatal(err)
	}
	return p, f
}

func capability(mode csipb.VolumeCapability_AccessMode_Mode) *csipb.VolumeCapability {
	return &csipb.VolumeCapability{
		AccessType: &csipb.VolumeCapability_Mount{Mount: &csipb.VolumeCapability_MountVolume{}},
		AccessMode: &csipb.VolumeCapability_AccessMode{Mode: mode},
	}
}

func publishReq(target string, ro bool, mode csipb.VolumeCapability_AccessMode_Mode, vc map[string]string) *csipb.NodePublishVolumeRequest {
	return &csipb.NodePublishVolumeRequest{VolumeId: "vol", TargetPath: target, Readonly: ro, VolumeCapability: capability(mode), VolumeContext: vc}
}

func TestNodePublishVolume(t *testing.T) {
	const (
		ro    = csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
		rwo   = csipb.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
		rwx   = csipb.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
		agent = KeyPodNamespace
	)
	block := publishReq("", true, ro, map[string]string{"collection": "docs"})
	block.VolumeCapability.AccessType = &csipb.VolumeCapability_Block{Block: &csipb.VolumeCapability_BlockVolume{}}
	for _, tc := range []struct {
		name    string
		req     *csipb.NodePublishVolumeRequest
		want    codes.Code
		subject string
	}{
		{"reader of a granted namespace", publishReq("", false, ro, map[string]string{"collection": "docs", "groups": "team", agent: "agents"}), codes.OK, "pod of service account agents/"},
		{"inline volume: writer mode with readonly", publishReq("", true, rwo, map[string]string{"collection": "docs", agent: "agents", KeyEphemeral: "true"}), codes.OK, "pod of service account agents/"},
		{"service account", publishReq("", true, ro, map[string]string{"collection": "docs", agent: "other", KeyPodServiceAccount: "reader"}), codes.OK, "pod of service account other/reader"},
		{"no pod info: public pages", publishReq("", true, ro, map[string]string{"collection": "docs"}), codes.OK, "a pod without pod info"},
		{"no pod info asks for a group", publishReq("", true, ro, map[string]string{"collection": "docs", "groups": "team"}), codes.PermissionDenied, "a pod without pod info"},
		{"group not granted to the service account", publishReq("", true, ro, map[string]string{"collection": "docs", "groups": "team", agent: "other", KeyPodServiceAccount: "reader"}), codes.PermissionDenied, "pod of service account other/reader"},
		{"namespace not granted", publishReq("", true, ro, map[string]string{"collection": "docs", agent: "elsewhere"}), codes.PermissionDenied, "pod of service account elsewhere/"},
		{"writer without readonly", publishReq("", false, rwo, map[string]string{"collection": "docs", agent: "agents"}), codes.FailedPrecondition, ""},
		{"multi writer without readonly", publishReq("", false, rwx, map[string]string{"collection": "docs", agent: "agents"}), codes.FailedPrecondition, ""},
		{"block", block, codes.FailedPrecondition, ""},
		{"no capability", &csipb.NodePublishVolumeRequest{VolumeId: "vol", VolumeContext: map[string]string{"collection": "docs"}}, codes.InvalidArgument, ""},
		{"no volume id", &csipb.NodePublishVolumeRequest{VolumeCapability: capability(ro)}, codes.InvalidArgument, ""},
		{"no collection", publishReq("", true, ro, map[string]string{agent: "agents"}), codes.InvalidArgument, ""},
		{"a collection name out of its database", publishReq("", true, ro, map[string]string{"collection": "../../vault/collections/payroll", agent: "agents"}), codes.InvalidArgument, ""},
		{"unknown key", publishReq("", true, ro, map[string]string{"collection": "docs", "grups": "team"}), codes.InvalidArgument, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, f := newTestPlugin(t)
			target := filepath.Join(t.TempDir(), "pods", "uid", "volumes", "mount")
			tc.req.TargetPath = target
			_, err := p.NodePublishVolume(context.Background(), tc.req)
			if got := status.Code(err); got != tc.want {
				t.Fatalf("code %v (%v), want %v", got, err, tc.want)
			}
			if tc.subject != "" && (len(f.subjects) != 1 || f.subjects[0].String() != tc.subject) {
				t.Errorf("subject %v, want %q", f.subjects, tc.subject)
			}
			_, statErr := os.Stat(target)
			if tc.want == codes.OK {
				if statErr != nil {
					t.Errorf("target path not created: %v", statErr)
				}
				want, _ := ParseContext(tc.req.VolumeContext)
				if !slices.Equal(f.at[target].Groups, want.Attach.Groups) || f.at[target].Collection != "docs" {
					t.Errorf("attached %+v", f.at[target])
				}
			} else if statErr == nil {
				t.Errorf("a refused publish left its target path")
			}
		})
	}
}

func TestPublishIdempotent(t *testing.T) {
	p, f := newTestPlugin(t)
	target := filepath.Join(t.TempDir(), "mount")
	vc := map[string]string{"collection": "docs", "groups": "team", KeyPodNamespace: "agents"}
	ro := csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	ctx := context.Background()
	for i := range 2 {
		if _, err := p.NodePublishVolume(ctx, publishReq(target, true, ro, vc)); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	if len(f.subjects) != 1 {
		t.Errorf("the second publish attached again (%d attaches)", len(f.subjects))
	}
	other := map[string]string{"collection": "docs", KeyPodNamespace: "agents"}
	if _, err := p.NodePublishVolume(ctx, publishReq(target, true, ro, other)); status.Code(err) != codes.AlreadyExists {
		t.Errorf("another context at the same target: %v, want AlreadyExists", err)
	}

	// a new process (after a restart) knows the daemon's record only
	p2, err := New(f, "node-1", "v", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p2.NodePublishVolume(ctx, publishReq(target, true, ro, vc)); err != nil {
		t.Errorf("the same publish after a restart: %v", err)
	}
	if _, err := p2.NodePublishVolume(ctx, publishReq(target, true, ro, other)); status.Code(err) != codes.AlreadyExists {
		t.Errorf("another view after a restart: %v, want AlreadyExists", err)
	}

	for i := range 2 {
		if _, err := p2.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{VolumeId: "vol", TargetPath: target}); err != nil {
			t.Fatalf("unpublish %d: %v", i, err)
		}
	}
	if _, ok := f.at[target]; ok {
		t.Error("unpublish left the attachment")
	}
	if _, err := os.Stat(target); !os.IsNotExist(err) {
		t.Errorf("unpublish left the target path: %v", err)
	}
	if _, err := p2.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{TargetPath: target}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("unpublish without volume id: %v", err)
	}
}

func TestIdentityAndNodeInfo(t *testing.T) {
	p, _ := newTestPlugin(t)
	ctx := context.Background()
	info, _ := p.GetPluginInfo(ctx, nil)
	if info.Name != DriverName || info.VendorVersion != "v1.2.3" {
		t.Errorf("plugin info %v", info)
	}
	caps, _ := p.GetPluginCapabilities(ctx, nil)
	if len(caps.Capabilities) != 0 {
		t.Errorf("plugin capabilities %v: want none (no controller service)", caps)
	}
	node, _ := p.NodeGetInfo(ctx, nil)
	if node.NodeId != "node-1" {
		t.Errorf("node id %q", node.NodeId)
	}
	nc, _ := p.NodeGetCapabilities(ctx, nil)
	if len(nc.Capabilities) != 0 {
		t.Errorf("node capabilities %v: want none (no staging)", nc)
	}
	if _, err := New(&fakeDaemon{}, "", "v", nil); err == nil {
		t.Error("New without a node id")
	}
}

func TestListen(t *testing.T) {
	for _, bad := range []string{"/tmp/x.sock", "tcp://127.0.0.1:1", "unix://relative"} {
		if l, err := Listen(bad); err == nil {
			l.Close()
			t.Errorf("Listen(%q): no error", bad)
		}
	}
	sock := filepath.Join(t.TempDir(), "csi", "csi.sock")
	l, err := Listen("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket: %v %v", err, fi)
	}
}
