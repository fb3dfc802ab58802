package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/fusefs"
	"github.com/chromafs/chromafs/mountpath"
)

// One mount of a view for all its owners. A view's conversations run as
// many users (a sandbox per uid; root serving each with --owner), and a
// mount per (view, owner) would make each user's first conversation copy
// the whole view into a page cache of its own, at the cost of a new
// view. Where the kernel makes idmapped copies of a FUSE mount (Linux
// 6.12), the shared attachments of a view, whatever their owner, are
// copies of one mount whose files are root's (STATE_DIR/mnt/VIEW-shared,
// root 0500): each owner's copy is idmapped (mountpath.IDMap) to show
// them as that owner's, so that the kernel lets that owner, and no other
// user, into it (default_permissions), and every copy reads the one
// mount's page cache. An attachment with an access log keeps a mount per
// (view, owner), as everywhere else: a log sees the reads of its mount,
// and must not see another user's. So does every attachment of a daemon
// with Config.Linger 0, where a detach must cut off its user's sandboxes
// (a mount and its copies end with its last attachment, whoever's).
// Private attachments have their own.
//
// The daemon learns at its start whether the kernel allows it (a probe:
// an empty FUSE mount and an idmapped copy of it, a few milliseconds);
// where it does not, every owner has a mount of its own. STATE_DIR/mnt is
// a private mount (privateMountDir), so that the copies of the one mount
// are not peers of each other where every mount is shared.

// probeIDMap sets d.idmap when the kernel makes idmapped copies of a
// chromafs mount. Called once, by New, for a privileged daemon.
func (d *Daemon) probeIDMap() {
	start := time.Now()
	err := d.tryIDMap()
	switch {
	case errors.Is(err, mountpath.ErrNoIDMap):
		d.log.Info("a mount per view and owner: this kernel makes no idmapped copy of a FUSE mount (Linux 6.12 does)", "err", err)
		return
	case err != nil:
		d.log.Warn("a mount per view and owner: the idmapped copies of a view's one mount could not be tried", "err", err)
		return
	}
	d.idmap = true
	d.log.Info("one mount per view for all its owners: idmapped copies", "probe", time.Since(start).Round(time.Microsecond))
}

func (d *Daemon) tryIDMap() error {
	dir := filepath.Join(d.cfg.StateDir, "mnt", "idmap-probe")
	if err := d.prepareMountDir(dir); err != nil {
		return err
	}
	defer os.Remove(dir)
	server, err := fusefs.MountProbe(dir, fuse.MountOptions{
		AllowOther: true, DirectMount: true, IDMappedMount: true, FsName: "chromafs:probe",
	})
	if err != nil {
		return err
	}
	defer func() {
		if err := server.Unmount(); err != nil {
			d.log.Warn("unmount the idmap probe", "dir", dir, "err", err)
		}
	}()
	m, err := d.idmapFor(65534, 65534)
	if err != nil {
		return err
	}
	return mountpath.ProbeIDMap(dir, m)
}

// sharedAcrossOwners reports whether the attachment rec uses its view's
// one mount for all owners.
func (d *Daemon) sharedAcrossOwners(rec record) bool {
	return d.idmap && d.cfg.Linger > 0 && !rec.Private && !rec.Open && rec.AccessLog == ""
}

// idmapFor returns the idmap of an owner's copies, made once per owner.
// d.mu is held (or New runs).
func (d *Daemon) idmapFor(uid, gid uint32) (*mountpath.IDMap, error) {
	k := [2]uint32{uid, gid}
	if m, ok := d.idmaps[k]; ok {
		return m, nil
	}
	if len(d.idmaps) >= maxIDMaps { // a descriptor each: start again
		d.closeIDMaps()
	}
	m, err := mountpath.NewIDMap(uid, gid)
	if err != nil {
		return nil, err
	}
	if d.idmaps == nil {
		d.idmaps = map[[2]uint32]*mountpath.IDMap{}
	}
	d.idmaps[k] = m
	return m, nil
}

// maxIDMaps bounds the owners' idmaps kept open.
const maxIDMaps = 1024

// closeIDMaps lets go of every owner's idmap (the copies made keep
// theirs).
func (d *Daemon) closeIDMaps() {
	var errs []error
	for k, m := range d.idmaps {
		errs = append(errs, m.Close())
		delete(d.idmaps, k)
	}
	if err := errors.Join(errs...); err != nil {
		d.log.Warn("close idmaps", "err", err)
	}
}

// copyIDMap is the idmap of the copy of m for the attachment rec: nil
// but on the one mount of a view for all owners, for an owner not root.
// d.mu is held.
func (d *Daemon) copyIDMap(m *mountState, rec record) (*mountpath.IDMap, error) {
	if !m.idmapped || (rec.OwnerUID == 0 && rec.OwnerGID == 0) {
		return nil, nil
	}
	idmap, err := d.idmapFor(rec.OwnerUID, rec.OwnerGID)
	if err != nil {
		return nil, fmt.Errorf("serve the view to %d:%d: %w", rec.OwnerUID, rec.OwnerGID, err)
	}
	return idmap, nil
}
