// Package csi is chromafsd's CSI node plugin: the Identity and Node
// services of the Container Storage Interface, so that a Kubernetes pod
// asks for a view of a collection as a volume, inline in its spec
// (ephemeral) or as a pre-provisioned PersistentVolume, and kubelet has
// the daemon place it at the volume's target path.
//
// # Design
//
// There is no controller service (but for ControllerGetCapabilities
// answering none, see Register) and no staging: a volume is nothing to
// create or attach, it is a view (collection, groups, layout) that the
// host daemon serves already, so NodePublishVolume is one
// daemon.AttachFor at kubelet's target path and NodeUnpublishVolume one
// DetachPath. Both kinds of volume go through the same publish: the view
// comes from the volume context (an inline volume's volumeAttributes, or
// a PV's csi.volumeAttributes), whose keys are collection, groups (a
// comma list), and the layout keys layout, path_key, order_key,
// offset_key, offset_unit and groups_key; any other key, but kubelet's
// own csi.storage.k8s.io/..., is refused, so that a misspelt key is not a
// silently different view. The volume id is taken as given.
//
// Who asks is the pod, never kubelet (which calls as root): with the
// CSIDriver's podInfoOnMount, kubelet puts the pod's namespace and
// service account in the volume context, and the policy (package policy)
// judges that subject; a request without pod info is a pod of no
// namespace, which gets the public pages only. A group the pod is not
// granted is refused (PermissionDenied), never narrowed.
//
// Volumes are read-only. A capability whose access mode writes is taken
// only with readonly set (kubelet asks for SINGLE_NODE_WRITER for every
// inline volume; the pod spec says readOnly: true); a write without
// readonly, and a block volume, are capabilities the volume does not
// have: FailedPrecondition, the code the spec's NodePublishVolume error
// table gives for "Exceeds capabilities". Missing fields are
// InvalidArgument.
//
// Idempotence: a publish is serialized per target path; a second publish
// at a target that holds an attachment answers OK when it asks for the
// same view (the same volume and context while this process knows it,
// the same collection and groups after a restart, when only the daemon's
// record is left), AlreadyExists otherwise. Unpublish of a target that
// holds nothing is OK. The plugin creates the target directory (the
// spec makes it its job) and removes it on unpublish.
//
// Restarts: attachments are the daemon's, kept in its state directory
// and placed again by the next daemon on the old mounts, so a pod's
// volume answers again after the DaemonSet's pod restarts; kubelet does
// not publish again, and need not.
package csi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/chroma/name"
	"github.com/chromafs/chromafs/daemon"
	"github.com/chromafs/chromafs/policy"
)

// DriverName is the CSI driver's name: the CSIDriver object's, the
// StorageClass's or PV's driver, node-driver-registrar's.
const DriverName = "chromafs.csi.chromafs.dev"

// Volume context keys.
const (
	KeyCollection = "collection"
	KeyGroups     = "groups"
	KeyLayout     = "layout"
	KeyPathKey    = "path_key"
	KeyOrderKey   = "order_key"
	KeyOffsetKey  = "offset_key"
	KeyOffsetUnit = "offset_unit"
	KeyGroupsKey  = "groups_key"

	// kubelet's, with the CSIDriver's podInfoOnMount
	KeyPodNamespace      = "csi.storage.k8s.io/pod.namespace"
	KeyPodServiceAccount = "csi.storage.k8s.io/serviceAccount.name"
	KeyEphemeral         = "csi.storage.k8s.io/ephemeral"
	kubeletPrefix        = "csi.storage.k8s.io/"
)

var viewKeys = []string{KeyCollection, KeyGroups, KeyLayout, KeyPathKey, KeyOrderKey, KeyOffsetKey, KeyOffsetUnit, KeyGroupsKey}

// Attacher is what the plugin needs of the daemon (*daemon.Daemon).
type Attacher interface {
	AttachFor(ctx context.Context, f daemon.Frontend, req api.AttachRequest) (api.Attachment, error)
	AttachmentAt(path string) (api.Attachment, bool)
	ViewOf(path string) (collection string, groups []string, ok bool)
	DetachPath(path string) (bool, error)
}

// Plugin serves the Identity and Node services for one node.
type Plugin struct {
	csipb.UnimplementedIdentityServer
	csipb.UnimplementedNodeServer
	csipb.UnimplementedControllerServer

	d       Attacher
	nodeID  string
	version string
	log     *slog.Logger

	mu        sync.Mutex
	locks     map[string]*targetLock
	published map[string]string // target path → the publish's key (volume id and context), this process's
}

type targetLock struct {
	sync.Mutex
	users int
}

// New returns the plugin of node nodeID over d; version is the vendor
// version GetPluginInfo reports.
func New(d Attacher, nodeID, version string, log *slog.Logger) (*Plugin, error) {
	if nodeID == "" {
		return nil, errors.New("csi: a node id is needed (--node-id)")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Plugin{d: d, nodeID: nodeID, version: version, log: log, locks: map[string]*targetLock{}, published: map[string]string{}}, nil
}

// Register adds the plugin's services to s. The Controller service is
// there only to answer ControllerGetCapabilities with none (csi-sanity's
// node cases ask it whatever GetPluginCapabilities says); a CO does not
// call a controller the plugin does not announce. Its other calls are
// Unimplemented.
func (p *Plugin) Register(s *grpc.Server) {
	csipb.RegisterIdentityServer(s, p)
	csipb.RegisterNodeServer(s, p)
	csipb.RegisterControllerServer(s, p)
}

// ControllerGetCapabilities: none.
func (p *Plugin) ControllerGetCapabilities(context.Context, *csipb.ControllerGetCapabilitiesRequest) (*csipb.ControllerGetCapabilitiesResponse, error) {
	return &csipb.ControllerGetCapabilitiesResponse{}, nil
}

// Listen listens on endpoint, unix:///PATH (a socket left by a process
// before is replaced).
func Listen(endpoint string) (net.Listener, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Scheme != "unix" || !filepath.IsAbs(u.Path) {
		return nil, fmt.Errorf("csi endpoint %q: want unix:///PATH", endpoint)
	}
	if err := os.MkdirAll(filepath.Dir(u.Path), 0o750); err != nil {
		return nil, fmt.Errorf("csi endpoint: %w", err)
	}
	if fi, err := os.Lstat(u.Path); err == nil && fi.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(u.Path)
	}
	old := syscall.Umask(0o177) // made 0600, never wider for a moment
	l, err := net.Listen("unix", u.Path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("csi endpoint: %w", err)
	}
	if err := os.Chmod(u.Path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("csi endpoint: %w", err)
	}
	return l, nil
}

// Serve serves p on l until the returned stop is called (it stops the
// server and closes l).
func (p *Plugin) Serve(l net.Listener) (stop func()) {
	s := grpc.NewServer(grpc.UnaryInterceptor(p.logCalls))
	p.Register(s)
	go func() {
		if err := s.Serve(l); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			p.log.Warn("csi server", "err", err)
		}
	}()
	return s.Stop
}

func (p *Plugin) logCalls(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	resp, err := h(ctx, req)
	if err != nil {
		p.log.Info("csi call refused", "method", info.FullMethod, "code", status.Code(err).String(), "err", err)
	} else {
		p.log.Debug("csi call", "method", info.FullMethod)
	}
	return resp, err
}

// GetPluginInfo names the driver.
func (p *Plugin) GetPluginInfo(context.Context, *csipb.GetPluginInfoRequest) (*csipb.GetPluginInfoResponse, error) {
	return &csipb.GetPluginInfoResponse{Name: DriverName, VendorVersion: p.version}, nil
}

// GetPluginCapabilities: none (no controller service, no topology).
func (p *Plugin) GetPluginCapabilities(context.Context, *csipb.GetPluginCapabilitiesRequest) (*csipb.GetPluginCapabilitiesResponse, error) {
	return &csipb.GetPluginCapabilitiesResponse{}, nil
}

// Probe answers ready: the daemon serves once the plugin does.
func (p *Plugin) Probe(context.Context, *csipb.ProbeRequest) (*csipb.ProbeResponse, error) {
	return &csipb.ProbeResponse{}, nil
}

// NodeGetInfo gives the node id.
func (p *Plugin) NodeGetInfo(context.Context, *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return &csipb.NodeGetInfoResponse{NodeId: p.nodeID}, nil
}

// NodeGetCapabilities: none (no staging, no stats, no expansion).
func (p *Plugin) NodeGetCapabilities(context.Context, *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	return &csipb.NodeGetCapabilitiesResponse{}, nil
}

// NodeStageVolume is not offered (no STAGE_UNSTAGE_VOLUME).
func (p *Plugin) NodeStageVolume(context.Context, *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	return nil, status.Error(codes.Unimplemented, "chromafs volumes are not staged")
}

// NodeUnstageVolume is not offered.
func (p *Plugin) NodeUnstageVolume(context.Context, *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	return nil, status.Error(codes.Unimplemented, "chromafs volumes are not staged")
}

// Request is what a publish asks for, read from its volume context.
type Request struct {
	Attach  api.AttachRequest
	Subject policy.Subject
}

// ParseContext reads a volume context: the view and the pod. A pod
// without pod info is policy.Pod{} (public pages only).
func ParseContext(vc map[string]string) (Request, error) {
	for k := range vc {
		if !slices.Contains(viewKeys, k) && !strings.HasPrefix(k, kubeletPrefix) {
			return Request{}, fmt.Errorf("volume context key %q: want one of %s (or kubelet's %s...)", k, strings.Join(viewKeys, ", "), kubeletPrefix)
		}
	}
	r := Request{Attach: api.AttachRequest{Collection: vc[KeyCollection], Layout: api.Layout{
		Name: vc[KeyLayout], PathKey: vc[KeyPathKey], OrderKey: vc[KeyOrderKey], OffsetKey: vc[KeyOffsetKey],
		OffsetUnit: vc[KeyOffsetUnit], GroupsKey: vc[KeyGroupsKey],
	}}}
	if r.Attach.Collection == "" {
		return Request{}, fmt.Errorf("volume context: no %q", KeyCollection)
	}
	if err := name.CheckCollection(r.Attach.Collection); err != nil {
		return Request{}, fmt.Errorf("volume context %q: %w", KeyCollection, err)
	}
	for _, g := range strings.Split(vc[KeyGroups], ",") {
		if g = strings.TrimSpace(g); g != "" {
			r.Attach.Groups = append(r.Attach.Groups, g)
		}
	}
	pod := &policy.Pod{}
	if ns := vc[KeyPodNamespace]; ns != "" {
		pod = &policy.Pod{Namespace: ns, ServiceAccount: vc[KeyPodServiceAccount]}
	}
	r.Subject = policy.Subject{Pod: pod}
	return r, nil
}

// publishKey is what makes two publishes the same: the volume, the view,
// the pod, the capability's read-only-ness.
func publishKey(req *csipb.NodePublishVolumeRequest) string {
	keys := make([]string, 0, len(req.VolumeContext))
	for k := range req.VolumeContext {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "%q ro=%v mode=%v", req.VolumeId, req.Readonly, req.GetVolumeCapability().GetAccessMode().GetMode())
	for _, k := range keys {
		fmt.Fprintf(&b, " %q=%q", k, req.VolumeContext[k])
	}
	return b.String()
}

// writes reports whether m is an access mode that writes.
func writes(m csipb.VolumeCapability_AccessMode_Mode) bool {
	switch m {
	case csipb.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY, csipb.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY:
		return false
	}
	return true
}

// checkCapability: a mount volume, read-only.
func checkCapability(c *csipb.VolumeCapability, readonly bool) error {
	if c == nil {
		return status.Error(codes.InvalidArgument, "no volume capability")
	}
	if c.GetMount() == nil {
		return status.Error(codes.FailedPrecondition, "chromafs volumes are filesystems (access type mount), not block devices")
	}
	m := c.GetAccessMode().GetMode()
	if m == csipb.VolumeCapability_AccessMode_UNKNOWN {
		return status.Error(codes.InvalidArgument, "no access mode")
	}
	if writes(m) && !readonly {
		return status.Errorf(codes.FailedPrecondition, "chromafs volumes are read-only: access mode %s without readonly (set readOnly: true on the volume)", m)
	}
	return nil
}

// lock serializes the calls on one target path.
func (p *Plugin) lock(target string) func() {
	p.mu.Lock()
	l := p.locks[target]
	if l == nil {
		l = &targetLock{}
		p.locks[target] = l
	}
	l.users++
	p.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		p.mu.Lock()
		if l.users--; l.users == 0 {
			delete(p.locks, target)
		}
		p.mu.Unlock()
	}
}

// NodePublishVolume attaches the view the volume context names at the
// target path, for the pod kubelet names.
func (p *Plugin) NodePublishVolume(ctx context.Context, req *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	if req.VolumeId == "" {
		return nil, status.Error(codes.InvalidArgument, "no volume id")
	}
	if req.TargetPath == "" || !filepath.IsAbs(req.TargetPath) {
		return nil, status.Errorf(codes.InvalidArgument, "target path %q: want an absolute path", req.TargetPath)
	}
	if err := checkCapability(req.VolumeCapability, req.Readonly); err != nil {
		return nil, err
	}
	r, err := ParseContext(req.VolumeContext)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	target := filepath.Clean(req.TargetPath)
	r.Attach.Path = target
	key := publishKey(req)
	defer p.lock(target)()

	if _, ok := p.d.AttachmentAt(target); ok {
		p.mu.Lock()
		known, seen := p.published[target]
		p.mu.Unlock()
		if seen {
			if known == key {
				return &csipb.NodePublishVolumeResponse{}, nil
			}
			return nil, status.Errorf(codes.AlreadyExists, "volume %s: %s holds another publish already", req.VolumeId, target)
		}
		// published by a daemon before this one: its record says the view
		coll, groups, _ := p.d.ViewOf(target)
		want := slices.Clone(r.Attach.Groups)
		slices.Sort(want)
		have := slices.Clone(groups)
		slices.Sort(have)
		if coll == r.Attach.Collection && slices.Equal(slices.Compact(want), slices.Compact(have)) {
			p.mu.Lock()
			p.published[target] = key
			p.mu.Unlock()
			return &csipb.NodePublishVolumeResponse{}, nil
		}
		return nil, status.Errorf(codes.AlreadyExists, "volume %s: %s holds collection %q groups %v already", req.VolumeId, target, coll, groups)
	}
	created := false
	if _, err := os.Lstat(target); errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(target, 0o750); err != nil {
			return nil, status.Errorf(codes.Internal, "target path: %v", err)
		}
		created = true
	}
	a, err := p.d.AttachFor(ctx, daemon.Frontend{Name: "csi", Subject: r.Subject}, r.Attach)
	if err != nil {
		if created {
			_ = os.Remove(target)
		}
		return nil, status.Errorf(grpcCode(err), "volume %s: %v", req.VolumeId, err)
	}
	p.mu.Lock()
	p.published[target] = key
	p.mu.Unlock()
	p.log.Info("csi volume published", "volume", req.VolumeId, "target", target, "attachment", a.ID,
		"collection", r.Attach.Collection, "groups", strings.Join(r.Attach.Groups, ","), "subject", r.Subject.String(),
		"ephemeral", req.VolumeContext[KeyEphemeral] == "true")
	return &csipb.NodePublishVolumeResponse{}, nil
}

// NodeUnpublishVolume detaches what is at the target path (nothing there
// is OK) and removes the target directory.
func (p *Plugin) NodeUnpublishVolume(ctx context.Context, req *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	if req.VolumeId == "" {
		return nil, status.Error(codes.InvalidArgument, "no volume id")
	}
	if req.TargetPath == "" || !filepath.IsAbs(req.TargetPath) {
		return nil, status.Errorf(codes.InvalidArgument, "target path %q: want an absolute path", req.TargetPath)
	}
	target := filepath.Clean(req.TargetPath)
	defer p.lock(target)()
	had, err := p.d.DetachPath(target)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "volume %s: %v", req.VolumeId, err)
	}
	p.mu.Lock()
	delete(p.published, target)
	p.mu.Unlock()
	if err := os.Remove(target); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, status.Errorf(codes.Internal, "volume %s: removing the target path: %v", req.VolumeId, err)
	}
	if had {
		p.log.Info("csi volume unpublished", "volume", req.VolumeId, "target", target)
	}
	return &csipb.NodeUnpublishVolumeResponse{}, nil
}

// grpcCode is the gRPC code of a daemon error.
func grpcCode(err error) codes.Code {
	if errors.Is(err, policy.ErrRefused) {
		return codes.PermissionDenied
	}
	if errors.Is(err, chroma.ErrNotFound) {
		return codes.NotFound
	}
	var e *daemon.Error
	if errors.As(err, &e) {
		switch e.Code {
		case api.CodeRefused:
			return codes.PermissionDenied
		case api.CodeBadRequest:
			return codes.InvalidArgument
		case api.CodeNotFound:
			return codes.NotFound
		case api.CodeInUse:
			return codes.AlreadyExists
		case api.CodeUnavailable:
			return codes.Unavailable
		}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return codes.DeadlineExceeded
	}
	return codes.Internal
}
