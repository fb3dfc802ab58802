package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/accesslog"
	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/fusefs"
	"github.com/chromafs/chromafs/internal/proc"
)

// mountState is one FUSE mount of a view: shared by the attachments of
// all its owners (idmapped copies, owners.go), or of one, or a private
// attachment's own.
type mountState struct {
	view        *viewState
	key         string
	dir         string // where it is mounted: STATE_DIR/mnt/KEY (root), or the attachment's path
	uid, gid    uint32
	private     bool
	idmapped    bool // the view's one mount for all owners: their copies are idmapped (owners.go)
	fsys        *fusefs.FS
	server      *fuse.Server
	device      string // major:minor, for aborting the connection
	attachments int
	logs        *fanout // the access logs of its attachments
	done        chan struct{}

	// linger is set while m outlives its last attachment (linger.go):
	// the timer that drops it, since when it has had none, and the
	// subject (policy.Subject.Key) and layout use (layoutUse) of the
	// attachment that left last, whose bounds it counts against, and its
	// caller's uid (whose chromafs list shows it).
	linger       *time.Timer
	idleSince    time.Time
	lingerBy     string
	lingerLayout string
	lingerUID    uint32
}

// mountKey names the mount the attachment rec uses: its view's one
// shared by every owner (owners.go), its owner's shared one of its view,
// the front ends' open one, or (private) its own.
func (d *Daemon) mountKey(rec record) string {
	view := viewID(collectionKey(rec.Collection, rec.Layout), rec.Groups)
	switch {
	case rec.Private:
		return "p-" + rec.ID
	case rec.Open:
		return view + "-open"
	case d.sharedAcrossOwners(rec):
		return view + "-shared"
	}
	return view + "-u" + strconv.FormatUint(uint64(rec.OwnerUID), 10)
}

// mountFor returns v's mount for the attachment rec, mounting it if
// needed. d.mu is held.
func (d *Daemon) mountFor(v *viewState, rec record, path string) (*mountState, error) {
	key := d.mountKey(rec)
	uid, gid, private := rec.OwnerUID, rec.OwnerGID, rec.Private
	perm := uint32(0o500)
	idmapped := d.sharedAcrossOwners(rec)
	switch {
	case rec.Open:
		uid, gid, perm = 0, 0, 0o555
	case idmapped: // root's, and each owner's in their copies
		uid, gid = 0, 0
	}
	if m, ok := v.mounts[key]; ok {
		d.wake(m)
		return m, nil
	}
	root := d.asRoot(rec.UID, rec.Open)
	for d.mounts >= hostBound(d.cfg.MaxMounts, root) &&
		d.evictLingering("--max-mounts reached", func(m *mountState) bool { return m.view != v }) != nil {
	}
	if d.mounts >= hostBound(d.cfg.MaxMounts, root) {
		return nil, &Error{Code: api.CodeUnavailable, Err: fmt.Errorf("this daemon serves %d FUSE mounts, its bound (--max-mounts %d%s)", d.mounts, d.cfg.MaxMounts, reserveNote(d.cfg.MaxMounts, root))}
	}
	m := &mountState{view: v, key: key, uid: uid, gid: gid, private: private, idmapped: idmapped, logs: &fanout{closer: d.closeLater}, done: make(chan struct{})}
	m.dir = path // without privileges: a FUSE mount at the path itself
	if d.privileged {
		m.dir = filepath.Join(d.cfg.StateDir, "mnt", key)
		if err := d.prepareMountDir(m.dir); err != nil {
			return nil, err
		}
	}
	fcfg := fusefs.Config{Collection: v.c.name, UID: uid, GID: gid, NoKernelPush: !d.cfg.PushPages, RootPerm: perm}
	if !idmapped { // no access log on the mount of all owners
		fcfg.Access = m.logs
	}
	if v.search != nil {
		fcfg.Search = v.search
	}
	m.fsys = fusefs.New(v.tree.Load(), counting{v.c.engine, v}, fcfg)
	mo := fuse.MountOptions{
		AllowOther: d.privileged, DirectMount: d.privileged, FsName: "chromafs:" + v.c.name, IDMappedMount: idmapped,
		Logger: slog.NewLogLogger(d.log.Handler(), slog.LevelDebug),
	}
	server, err := m.fsys.Mount(m.dir, mo)
	if err != nil {
		m.fsys.Close()
		return nil, fmt.Errorf("mount %s: %w", m.dir, err)
	}
	m.server = server
	if mi, ok := proc.MountAt(m.dir); ok {
		m.device = mi.Device
	}
	go func() { server.Wait(); close(m.done) }()
	v.mounts[key] = m
	v.c.mounts.Store(m, struct{}{})
	d.mounts++
	d.relieveSoon()
	return m, nil
}

// privateMountDir makes dir (STATE_DIR/mnt) a mount of its own (bound
// onto itself, with what is mounted below it, once: a daemon before may
// have done it) whose propagation is private, so that the daemon's mounts
// in it are not shared with their copies. On a host where every mount is
// shared (systemd's), a copy of a shared mount joins its peer group: the
// copies of one view's mount on the attachments' paths would be peers,
// and after a restart a copy stacked on one attachment's dead copy would
// be stacked on every other's too. Each copy is made shared on its own
// (mountpath.BindOnto), a peer group of its own with the copies
// sandboxes make of it.
func privateMountDir(dir string) error {
	private := func() error { return syscall.Mount("", dir, "", syscall.MS_PRIVATE|syscall.MS_REC, "") }
	err := private()
	if errors.Is(err, syscall.EINVAL) { // not a mount's root yet
		if err := syscall.Mount(dir, dir, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s onto itself: %w", dir, err)
		}
		err = private()
	}
	if err != nil {
		return fmt.Errorf("make %s private: %w", dir, err)
	}
	return nil
}

// prepareMountDir makes an empty directory for a mount of the daemon's
// own, clearing what a daemon before left there (its dead mounts).
func (d *Daemon) prepareMountDir(dir string) error {
	if err := clearMounts(dir); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// clearMounts takes away the mounts stacked at dir by earlier daemons
// (their copies elsewhere stay).
func clearMounts(dir string) error {
	for range 8 {
		if _, ok := proc.MountAt(dir); !ok {
			return nil
		}
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			return fmt.Errorf("clear %s: %w", dir, err)
		}
	}
	return nil
}

// sweepMounts takes away what a daemon before left in STATE_DIR/mnt that
// no record (recs) needs and no live mount is: the mounts that lingered
// when it was killed, which nothing records. d.mu is held.
func (d *Daemon) sweepMounts(recs []record) {
	if !d.privileged {
		return
	}
	keep := map[string]bool{}
	for _, r := range recs {
		keep[d.mountKey(r)] = true
	}
	for _, c := range d.collections {
		for _, v := range c.views {
			for k := range v.mounts {
				keep[k] = true
			}
		}
	}
	root := filepath.Join(d.cfg.StateDir, "mnt")
	ents, err := os.ReadDir(root)
	if err != nil {
		d.log.Warn("sweep the mounts of daemons before", "err", err)
		return
	}
	for _, e := range ents {
		if keep[e.Name()] || !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		if err := clearMounts(dir); err != nil {
			d.log.Warn("a mount of a daemon before stays", "dir", dir, "err", err)
			continue
		}
		_ = os.Remove(dir)
	}
}

// release is told that the attachment rec of m went; the last one takes
// m away, or leaves it to linger (linger.go). d.mu is held.
func (d *Daemon) release(m *mountState, rec record) {
	m.attachments--
	if m.attachments > 0 || d.startLinger(m, rec) {
		return
	}
	d.drop(m)
}

// drop takes m away: its server ends, it is unmounted, and its view goes
// with its last mount. d.mu is held.
func (d *Daemon) drop(m *mountState) {
	v := m.view
	m.stop(true)
	delete(v.mounts, m.key)
	v.c.mounts.Delete(m)
	d.mounts--
	v.c.dropView(v)
}

// stop ends m's server. With unmount, the mount goes and its connection
// is aborted, so that copies of it a sandbox still holds end too (the
// server would otherwise wait for them); without, the mount stays (dead)
// for the next daemon to stack on. A daemon without privileges always
// unmounts: nothing can be stacked on its mounts, and it cannot abort a
// connection.
func (m *mountState) stop(unmount bool) {
	d := m.view.c.d
	switch {
	case !d.privileged:
		if err := m.server.Unmount(); err != nil {
			if err := fusermountLazy(m.dir); err != nil {
				d.log.Warn("unmount", "dir", m.dir, "err", err)
			}
		}
	case unmount:
		if err := syscall.Unmount(m.dir, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
			d.log.Warn("unmount", "dir", m.dir, "err", err)
		}
	}
	if d.privileged {
		abort(m.device)
	}
	select {
	case <-m.done:
	case <-time.After(5 * time.Second):
		d.log.Warn("a mount's server did not stop", "dir", m.dir)
	}
	m.fsys.Close()
	m.logs.closeAll()
	if unmount && d.privileged {
		_ = os.Remove(m.dir)
	}
}

// fusectl is where the kernel's FUSE connections are controlled.
const fusectl = "/sys/fs/fuse/connections"

// mountFusectl mounts the fusectl file system at fusectl if it is not
// (systemd does at boot; a container or a minimal host may not): abort
// needs it.
func mountFusectl() error {
	if _, ok := proc.MountAt(fusectl); ok {
		return nil
	}
	return syscall.Mount("fusectl", fusectl, "fusectl", syscall.MS_NOSUID|syscall.MS_NODEV|syscall.MS_NOEXEC, "")
}

// abort ends the FUSE connection of device (major:minor) through
// /sys/fs/fuse/connections: every mount of it answers ENOTCONN, and its
// server's loop ends.
func abort(device string) {
	_, minor, ok := strings.Cut(device, ":")
	if !ok {
		return
	}
	_ = os.WriteFile(filepath.Join(fusectl, minor, "abort"), []byte("1"), 0o200)
}

// fanout writes a shared mount's access-log events to every attachment's
// log on it (a reader tells conversations apart by the pid and cgroup).
// A log's Write only queues (the daemon's logs are accesslog.NewQueued):
// a FUSE request never waits on a log's file. The logs it lets go of are
// handed to closer (the daemon's closeLater: closed once d.mu is free).
type fanout struct {
	closer func(*accesslog.Log)
	mu     sync.Mutex
	logs   map[string]*accesslog.Log // by attachment id
}

func (f *fanout) Write(e accesslog.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, l := range f.logs {
		l.Write(e)
	}
}

func (f *fanout) add(id string, l *accesslog.Log) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.logs == nil {
		f.logs = map[string]*accesslog.Log{}
	}
	f.logs[id] = l
}

func (f *fanout) remove(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l, ok := f.logs[id]; ok {
		f.closer(l)
		delete(f.logs, id)
	}
}

func (f *fanout) closeAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for id, l := range f.logs {
		f.closer(l)
		delete(f.logs, id)
	}
}
