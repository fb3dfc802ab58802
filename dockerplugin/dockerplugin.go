// Package dockerplugin is chromafsd's Docker volume plugin: Docker's
// volume plugin protocol (github.com/docker/go-plugins-helpers/volume)
// served on a unix socket beside the daemon's own API, so that
//
//	docker volume create -d chromafs -o collection=docs -o groups=billing docs-billing
//	docker run -v docs-billing:/docs:ro IMAGE ...
//
// gives a container a view of a collection.
//
// # Volumes
//
// A volume is a name and what it asks for: a collection, its access
// groups (none: public pages only) and the layout keys of chromafs
// attach (layout, path-key, order-key, offset-key, offset-unit; not
// groups-key: that is the daemon's). Create checks the options (an
// unknown one is an error) and the policy for the Docker subject (policy.Subject{Docker: true},
// never root: dockerd calls as root for whoever runs docker), so a
// refused collection or group is refused there, in the message docker
// prints. Volumes are kept in DIR/volumes.json (written atomically), so
// they outlive the daemon; Remove forgets one, and refuses while a
// container has it mounted.
//
// # Mounts
//
// Docker calls Mount and Unmount once per container. The first Mount of
// a volume attaches its view (daemon.AttachFor, for the Docker subject,
// the policy checked again: SIGHUP may have changed it) at the plugin's
// own path DIR/volumes/NAME, under a directory only root may enter;
// dockerd binds that path into the container. The containers holding a
// volume are counted by their ids (kept in volumes.json too): a second
// container shares the attachment, the one that stops takes nothing from
// the other, and the last Unmount detaches (daemon.DetachPath), leaving
// no mount. Whether a volume is attached is the daemon's answer
// (AttachmentAt), not a count: a daemon restarted re-creates the
// attachment from its own state, and a Mount that finds none (the view
// was detached behind the plugin's back, or --detach-on-exit) attaches
// again. Path, Get and List report the mountpoint while attached.
//
// At start (New), a volume the daemon still has attached but no
// container holds is detached.
package dockerplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/docker/go-plugins-helpers/volume"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/chroma/name"
	"github.com/chromafs/chromafs/daemon"
	"github.com/chromafs/chromafs/internal/cli"
	"github.com/chromafs/chromafs/policy"
	"github.com/chromafs/chromafs/treeload"
)

// DefaultSocket is where dockerd looks for a plugin named chromafs.
const DefaultSocket = "/run/docker/plugins/chromafs.sock"

// Daemon is what the plugin needs of chromafsd's daemon (*daemon.Daemon).
type Daemon interface {
	AttachFor(ctx context.Context, f daemon.Frontend, req api.AttachRequest) (api.Attachment, error)
	AttachmentAt(path string) (api.Attachment, bool)
	DetachPath(path string) (bool, error)
}

// Config is a plugin's configuration.
type Config struct {
	Daemon Daemon
	// Policy returns the policy in force (SIGHUP may swap it); nil, or a
	// nil policy, refuses every volume.
	Policy func() *policy.Policy
	// Dir is the plugin's own directory (made 0700): volumes.json, and
	// volumes/NAME where each volume is attached.
	Dir string
	Log *slog.Logger
}

// subject is who a volume made through Docker is, for the policy.
var subject = policy.Subject{Docker: true}

var frontend = daemon.Frontend{Name: "docker", Subject: subject}

// options are the -o keys of docker volume create, with their help.
var options = []string{"collection", "groups", "layout", "path-key", "order-key", "offset-key", "offset-unit"}

// validName is Docker's rule for a volume name (it is also a path
// component of the plugin's directory).
var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,254}$`)

// vol is a volume as volumes.json keeps it.
type vol struct {
	Name       string     `json:"name"`
	Collection string     `json:"collection"`
	Groups     []string   `json:"groups,omitempty"`
	Layout     api.Layout `json:"layout,omitzero"`
	Created    time.Time  `json:"created"`
	Containers []string   `json:"containers,omitempty"` // ids of the containers that have it mounted
}

// Plugin implements volume.Driver.
type Plugin struct {
	cfg  Config
	log  *slog.Logger
	mu   sync.Mutex // held across a whole request: volumes.json follows one at a time
	vols map[string]*vol
}

var _ volume.Driver = (*Plugin)(nil)

// New opens the plugin's directory and the volumes kept there; call it
// after the daemon restored its attachments, so that AttachmentAt knows
// them: a volume attached that no container holds is detached.
func New(cfg Config) (*Plugin, error) {
	if cfg.Daemon == nil || cfg.Dir == "" || !filepath.IsAbs(cfg.Dir) {
		return nil, errors.New("dockerplugin: a daemon and an absolute directory are needed")
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Plugin{cfg: cfg, log: log.With("frontend", "docker"), vols: map[string]*vol{}}
	if err := os.MkdirAll(p.volumesDir(), 0o700); err != nil {
		return nil, fmt.Errorf("dockerplugin: %w", err)
	}
	for _, d := range []string{cfg.Dir, p.volumesDir()} {
		if err := os.Chmod(d, 0o700); err != nil {
			return nil, fmt.Errorf("dockerplugin: %w", err)
		}
	}
	b, err := os.ReadFile(p.stateFile())
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("dockerplugin: %w", err)
	default:
		var list []*vol
		if err := json.Unmarshal(b, &list); err != nil {
			return nil, fmt.Errorf("dockerplugin: %s: %w", p.stateFile(), err)
		}
		for _, v := range list {
			if validName.MatchString(v.Name) {
				p.vols[v.Name] = v
			}
		}
	}
	for _, v := range p.vols {
		_, attached := cfg.Daemon.AttachmentAt(p.pathOf(v.Name))
		switch {
		case attached && len(v.Containers) == 0:
			if _, err := cfg.Daemon.DetachPath(p.pathOf(v.Name)); err != nil {
				p.log.Warn("a volume no container holds stays attached", "volume", v.Name, "err", err)
			}
		case !attached && len(v.Containers) > 0:
			p.log.Warn("a volume held by containers is not attached: its next mount attaches it", "volume", v.Name, "containers", len(v.Containers))
		}
	}
	p.log.Info("docker volumes", "dir", cfg.Dir, "volumes", len(p.vols))
	return p, nil
}

func (p *Plugin) stateFile() string         { return filepath.Join(p.cfg.Dir, "volumes.json") }
func (p *Plugin) volumesDir() string        { return filepath.Join(p.cfg.Dir, "volumes") }
func (p *Plugin) pathOf(name string) string { return filepath.Join(p.volumesDir(), name) }

// allow checks the policy in force for v.
func (p *Plugin) allow(v *vol) error {
	var pol *policy.Policy
	if p.cfg.Policy != nil {
		pol = p.cfg.Policy()
	}
	if err := pol.Allow(subject, v.Collection, v.Groups); err != nil {
		return fmt.Errorf("volume %s: %w (the policy's rules with docker: true decide)", v.Name, err)
	}
	return nil
}

// save writes volumes.json atomically. p.mu is held.
func (p *Plugin) save() error {
	list := make([]*vol, 0, len(p.vols))
	for _, v := range p.vols {
		list = append(list, v)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Name < list[j].Name })
	b, err := json.MarshalIndent(list, "", "  ")
	if err != nil {
		return err
	}
	tmp := p.stateFile() + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("volumes.json: %w", err)
	}
	if err := os.Rename(tmp, p.stateFile()); err != nil {
		return fmt.Errorf("volumes.json: %w", err)
	}
	return nil
}

// parse checks a create request's name and options.
func parse(req *volume.CreateRequest) (*vol, error) {
	if !validName.MatchString(req.Name) {
		return nil, fmt.Errorf("volume name %q: want letters, digits, _ . - (a letter or digit first)", req.Name)
	}
	v := &vol{Name: req.Name, Created: time.Now().UTC().Truncate(time.Second)}
	keys := make([]string, 0, len(req.Options))
	for k := range req.Options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		val := strings.TrimSpace(req.Options[k])
		switch k {
		case "collection":
			v.Collection = val
		case "groups":
			gs, err := cli.Groups(val)
			if err != nil {
				return nil, fmt.Errorf("option groups: %w", err)
			}
			v.Groups = gs
		case "layout":
			v.Layout.Name = val
		case "path-key":
			v.Layout.PathKey = val
		case "order-key":
			v.Layout.OrderKey = val
		case "offset-key":
			v.Layout.OffsetKey = val
		case "offset-unit":
			v.Layout.OffsetUnit = val
		case "groups-key":
			return nil, errors.New("option groups-key: the key of records' access groups is chromafsd's --groups-key, not a volume's")
		default:
			return nil, fmt.Errorf("unknown option %q (chromafs volumes take %s)", k, strings.Join(options, ", "))
		}
	}
	if v.Collection == "" {
		return nil, errors.New("no collection: -o collection=NAME is needed")
	}
	if err := name.CheckCollection(v.Collection); err != nil {
		return nil, fmt.Errorf("option collection: %w", err)
	}
	if v.Layout.Name != "" {
		l := treeload.Layout{Name: v.Layout.Name, PathKey: v.Layout.PathKey, OrderKey: v.Layout.OrderKey,
			OffsetKey: v.Layout.OffsetKey, Unit: v.Layout.OffsetUnit, GroupsKey: v.Layout.GroupsKey}
		if err := l.Validate(); err != nil {
			return nil, fmt.Errorf("layout options: %w", err)
		}
	}
	return v, nil
}

// Create records a volume once its options and the policy allow it.
// Creating a volume again with the same options is not an error.
func (p *Plugin) Create(req *volume.CreateRequest) error {
	v, err := parse(req)
	if err != nil {
		p.log.Info("create refused", "volume", req.Name, "err", err)
		return err
	}
	if err := p.allow(v); err != nil {
		p.log.Info("create refused", "volume", req.Name, "err", err)
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.vols[v.Name]; ok {
		if old.Collection == v.Collection && slices.Equal(old.Groups, v.Groups) && old.Layout == v.Layout {
			return nil
		}
		return fmt.Errorf("volume %s exists with other options", v.Name)
	}
	p.vols[v.Name] = v
	if err := p.save(); err != nil {
		delete(p.vols, v.Name)
		return err
	}
	p.log.Info("volume created", "volume", v.Name, "collection", v.Collection, "groups", strings.Join(v.Groups, ","))
	return nil
}

// get returns the volume name. p.mu is held.
func (p *Plugin) get(name string) (*vol, error) {
	v, ok := p.vols[name]
	if !ok {
		return nil, fmt.Errorf("no chromafs volume %q", name)
	}
	return v, nil
}

// mountpoint is v's path while attached, else "". p.mu is held.
func (p *Plugin) mountpoint(v *vol) string {
	if _, ok := p.cfg.Daemon.AttachmentAt(p.pathOf(v.Name)); ok {
		return p.pathOf(v.Name)
	}
	return ""
}

// describe is v as Get and List report it. p.mu is held.
func (p *Plugin) describe(v *vol) *volume.Volume {
	status := map[string]any{"collection": v.Collection, "groups": strings.Join(v.Groups, ","), "containers": len(v.Containers)}
	if v.Layout != (api.Layout{}) {
		status["layout"] = v.Layout
	}
	return &volume.Volume{Name: v.Name, Mountpoint: p.mountpoint(v), CreatedAt: v.Created.Format(time.RFC3339), Status: status}
}

// List reports every volume.
func (p *Plugin) List() (*volume.ListResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := &volume.ListResponse{Volumes: []*volume.Volume{}}
	for _, v := range p.vols {
		out.Volumes = append(out.Volumes, p.describe(v))
	}
	sort.Slice(out.Volumes, func(i, j int) bool { return out.Volumes[i].Name < out.Volumes[j].Name })
	return out, nil
}

// Get reports one volume.
func (p *Plugin) Get(req *volume.GetRequest) (*volume.GetResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, err := p.get(req.Name)
	if err != nil {
		return nil, err
	}
	return &volume.GetResponse{Volume: p.describe(v)}, nil
}

// Path reports a volume's mountpoint ("" while no container has it).
func (p *Plugin) Path(req *volume.PathRequest) (*volume.PathResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, err := p.get(req.Name)
	if err != nil {
		return nil, err
	}
	return &volume.PathResponse{Mountpoint: p.mountpoint(v)}, nil
}

// Remove forgets a volume no container has mounted.
func (p *Plugin) Remove(req *volume.RemoveRequest) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, err := p.get(req.Name)
	if err != nil {
		return err
	}
	if n := len(v.Containers); n > 0 {
		return fmt.Errorf("volume %s is mounted by %d container(s)", v.Name, n)
	}
	if _, err := p.cfg.Daemon.DetachPath(p.pathOf(v.Name)); err != nil {
		return fmt.Errorf("volume %s: %w", v.Name, err)
	}
	if err := os.Remove(p.pathOf(v.Name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("volume %s: %w", v.Name, err)
	}
	delete(p.vols, v.Name)
	if err := p.save(); err != nil {
		p.vols[v.Name] = v
		return err
	}
	p.log.Info("volume removed", "volume", v.Name)
	return nil
}

// Mount attaches a volume's view for container req.ID unless it is
// attached already, and counts the container.
func (p *Plugin) Mount(req *volume.MountRequest) (*volume.MountResponse, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, err := p.get(req.Name)
	if err != nil {
		return nil, err
	}
	if err := p.allow(v); err != nil {
		p.log.Info("mount refused", "volume", v.Name, "container", req.ID, "err", err)
		return nil, err
	}
	path := p.pathOf(v.Name)
	if _, ok := p.cfg.Daemon.AttachmentAt(path); !ok {
		if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), mountTimeout)
		defer cancel()
		a, err := p.cfg.Daemon.AttachFor(ctx, frontend, api.AttachRequest{
			Collection: v.Collection, Groups: v.Groups, Path: path, Layout: v.Layout,
		})
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		p.log.Info("volume attached", "volume", v.Name, "attachment", a.ID, "view", a.View)
	}
	if !slices.Contains(v.Containers, req.ID) {
		v.Containers = append(v.Containers, req.ID)
		if err := p.save(); err != nil {
			return nil, err
		}
	}
	p.log.Info("volume mounted", "volume", v.Name, "container", req.ID, "containers", len(v.Containers))
	return &volume.MountResponse{Mountpoint: path}, nil
}

// Unmount lets container req.ID go; the last one detaches the view.
func (p *Plugin) Unmount(req *volume.UnmountRequest) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	v, err := p.get(req.Name)
	if err != nil {
		return err
	}
	if i := slices.Index(v.Containers, req.ID); i >= 0 {
		v.Containers = slices.Delete(v.Containers, i, i+1)
		if err := p.save(); err != nil {
			return err
		}
	}
	p.log.Info("volume unmounted", "volume", v.Name, "container", req.ID, "containers", len(v.Containers))
	if len(v.Containers) > 0 {
		return nil
	}
	path := p.pathOf(v.Name)
	if was, err := p.cfg.Daemon.DetachPath(path); err != nil {
		return fmt.Errorf("volume %s: %w", v.Name, err)
	} else if was {
		p.log.Info("volume detached", "volume", v.Name)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		p.log.Warn("the volume's directory stays", "volume", v.Name, "err", err)
	}
	return nil
}

// Capabilities says the volumes are this host's (scope local).
func (p *Plugin) Capabilities() *volume.CapabilitiesResponse {
	return &volume.CapabilitiesResponse{Capabilities: volume.Capability{Scope: "local"}}
}

// mountTimeout bounds the attach a Mount makes (Docker waits for it).
const mountTimeout = time.Minute

// Listen makes the plugin's unix socket at path (mode 0600: dockerd runs
// as root), its directory first; a socket left there by a daemon before
// is replaced, any other file is an error.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("--docker-plugin-socket: %w", err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("--docker-plugin-socket %s: exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("--docker-plugin-socket: %w", err)
		}
	}
	old := syscall.Umask(0o177) // made 0600, never wider for a moment
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("--docker-plugin-socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("--docker-plugin-socket: %w", err)
	}
	return l, nil
}

// Serve answers Docker's requests on l until l is closed (the error
// returned then is net.ErrClosed's).
func (p *Plugin) Serve(l net.Listener) error {
	return volume.NewHandler(p).Serve(l)
}
