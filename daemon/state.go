package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/chromafs/chromafs/accesslog"
	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/internal/proc"
	"github.com/chromafs/chromafs/mountpath"
	"github.com/chromafs/chromafs/policy"
	"github.com/chromafs/chromafs/treeload"
)

// record is what the state directory keeps of an attachment: enough to
// re-create it, and to find its old mount (MountID) to stack on.
type record struct {
	ID         string          `json:"id"`
	Path       string          `json:"path"`
	UID        uint32          `json:"uid"`
	GID        uint32          `json:"gid"`
	UserGroups []uint32        `json:"user_groups,omitempty"` // the user's groups, for checking the path again
	OwnerUID   uint32          `json:"owner_uid"`             // the user the view is served to
	OwnerGID   uint32          `json:"owner_gid"`
	Collection string          `json:"collection"`
	Groups     []string        `json:"groups"`
	Layout     treeload.Layout `json:"layout"`
	Private    bool            `json:"private,omitempty"`
	// Open is a front end's attachment (CSI, Docker): served to every
	// user (root 0555) of the one sandbox its path is bound into, for the
	// subject Pod or Docker.
	Open      bool        `json:"open,omitempty"`
	Pod       *policy.Pod `json:"pod,omitempty"`
	Docker    bool        `json:"docker,omitempty"`
	AccessLog string      `json:"access_log,omitempty"`
	MountID   uint64      `json:"mount_id,omitempty"`
	// MountDev is MountID's device (major:minor of its super block): the
	// same in every copy of the mount, so a daemon restarted in another
	// mount namespace finds its dead mount by it (MountID is its id in
	// the namespace it was placed in).
	MountDev string `json:"mount_dev,omitempty"`
	// MountNS is the boot and mount namespace MountID and Below were
	// taken in (proc.MountNamespace): in another one (a new container of
	// the daemon, a reboot) they name nothing of the record's, and only
	// devices at Path find its dead mounts.
	MountNS string `json:"mount_ns,omitempty"`
	// Below are the dead mounts of daemons before, stacked under MountID
	// at Path (oldest first), and BelowDev their devices: detach takes
	// them away too.
	Below    []uint64  `json:"below,omitempty"`
	BelowDev []string  `json:"below_dev,omitempty"`
	Created  time.Time `json:"created"`
	// retried: a restore of it failed once already (its reason was logged)
	retried bool
}

// saveLocked records that rec is placed (new, or changed) and returns
// the change's number: the caller waits for it with d.state.sync after
// releasing d.mu. d.mu is held.
func (d *Daemon) saveLocked(rec record) uint64 {
	n := d.state.put(rec)
	d.compactIfDue()
	return n
}

// forgetLocked records that the attachment id is gone. d.mu is held.
func (d *Daemon) forgetLocked(id string) uint64 {
	n := d.state.del(id)
	d.compactIfDue()
	return n
}

// compactIfDue writes the snapshot again once the journal has grown well
// past the records (or a write to it failed). d.mu is held.
func (d *Daemon) compactIfDue() {
	if d.state.needsCompaction(len(d.attachments) + len(d.pending)) {
		d.compactLocked()
	}
}

// compactLocked writes every record as the snapshot and empties the
// journal. d.mu is held.
func (d *Daemon) compactLocked() {
	recs := make([]record, 0, len(d.attachments)+len(d.pending))
	for _, a := range d.sortedAttachments() {
		recs = append(recs, a.rec)
	}
	recs = append(recs, d.sortedPending()...) // still to place
	if err := d.state.compact(recs); err != nil {
		d.log.Error("the attachments could not be saved: a restart will not re-create them", "err", err)
	}
}

// synced waits for change n to be on disk (d.mu is not held).
func (d *Daemon) synced(n uint64) {
	if err := d.state.sync(n); err != nil {
		d.log.Error("the attachments could not be saved: a restart will not re-create them", "err", err)
	}
}

// Restore re-creates the attachments a daemon before kept: each on its
// old (dead) mount, so that sandboxes holding copies of it see the new
// one. One that cannot be placed now (Chroma cannot be reached, the
// user's groups cannot be told) is kept, and tried again every few
// seconds until it is placed (it answers ENOTCONN meanwhile); one whose
// path is gone, or holds something else now, or that the policy no
// longer grants, is dropped with a warning, and its old mounts with it.
// It returns how many were restored.
//
// The records wait in d.pending until each is placed or dropped (a
// compaction meanwhile keeps them), and everything a record's path or
// access log may wait on (a file system its user controls) is done
// without d.mu: the daemon answers its other callers throughout.
func (d *Daemon) Restore(ctx context.Context) (int, error) {
	recs, err := d.state.load()
	if err != nil {
		// kept aside, not overwritten by the next save: an operator may mend it
		suffix := ".damaged-" + time.Now().UTC().Format("20060102T150405")
		var kept []string
		for _, name := range []string{stateFile, journalFile} {
			p := filepath.Join(d.cfg.StateDir, name)
			if rerr := os.Rename(p, p+suffix); rerr == nil {
				kept = append(kept, p+suffix)
			}
		}
		if len(kept) > 0 {
			err = fmt.Errorf("%w (kept as %s)", err, strings.Join(kept, ", "))
		}
		return 0, err
	}
	d.mu.Lock()
	d.sweepMounts(recs)
	for _, rec := range recs {
		d.pending[rec.ID] = rec
	}
	d.unlock()
	n := d.placePending(ctx, recs)
	d.mu.Lock()
	defer d.unlock()
	d.compactLocked()
	if len(recs) > 0 {
		d.log.Info("restored attachments", "restored", n, "recorded", len(recs), "waiting", len(d.pending))
	}
	if len(d.pending) > 0 && d.retrying == nil && !d.closed && !d.loadsStopped {
		d.retrying = make(chan struct{})
		d.retries.Add(1)
		go d.retryPending()
	}
	return n, nil
}

// placePending tries to place each of recs that is still pending, and
// returns how many it placed.
func (d *Daemon) placePending(ctx context.Context, recs []record) int {
	n := 0
	for _, rec := range recs {
		if d.restoreOrKeep(ctx, rec) {
			n++
		}
	}
	return n
}

// restoreOrKeep places rec, keeps it pending when it cannot be placed
// now, or drops it. d.mu is not held.
func (d *Daemon) restoreOrKeep(ctx context.Context, rec record) bool {
	prep, err := d.prepareRestore(rec)
	var c *collection
	if err == nil {
		c, err = d.prepare(ctx, rec, nil)
	}
	d.mu.Lock()
	endPrepare := func() {
		if c != nil {
			c.endPrepareLocked(rec.Groups)
		}
	}
	if _, ok := d.pending[rec.ID]; !ok || d.loadsStopped { // detached meanwhile, or stopping (set before d.closed)
		prep.close(d)
		endPrepare()
		d.unlock()
		return false
	}
	var a *attachment
	if err == nil {
		a, err = d.placeRestored(c, prep)
	} else {
		prep.close(d)
	}
	endPrepare()
	switch {
	case err == nil:
		delete(d.pending, rec.ID)
		n := d.saveLocked(a.rec) // its new mount id
		d.beginLocked(a.mount.view)
		d.unlock()
		d.synced(n)
		a.mount.view.c.startEngine()
		return true
	case temporary(err):
		if !rec.retried {
			d.log.Warn("attachment not restored yet; trying again", "attachment", rec.ID, "path", rec.Path, "err", err)
		}
		rec.retried = true
		d.pending[rec.ID] = rec
		d.unlock()
	default:
		d.log.Warn("attachment not restored; dropped", "attachment", rec.ID, "path", rec.Path, "collection", rec.Collection, "err", err)
		delete(d.pending, rec.ID)
		d.dropMounts(rec)
		n := d.forgetLocked(rec.ID)
		d.unlock()
		d.synced(n)
	}
	return false
}

// temporary reports whether err says Chroma could not be reached or
// answered, or something else that a later try may find mended (a later
// try may place the attachment).
func temporary(err error) bool {
	var ne net.Error
	return codeOf(err) == api.CodeUnavailable || chroma.Retryable(err) || errors.As(err, &ne)
}

// dropMounts takes away what a dropped record left mounted (the copy of
// the daemon before and the dead ones under it). d.mu is held.
func (d *Daemon) dropMounts(rec record) {
	if !d.privileged {
		return
	}
	ids, devs := deadMounts(rec, d.mountNS)
	for i, id := range ids {
		if err := mountpath.UnmountID(id, devs[i]); err != nil {
			d.log.Warn("a dead mount of a dropped attachment stays", "path", rec.Path, "err", err)
		}
	}
}

// retryPending tries the pending attachments again every few seconds
// until none is left or the daemon closes.
func (d *Daemon) retryPending() {
	defer d.retries.Done()
	tick := time.NewTicker(retryEvery)
	defer tick.Stop()
	for {
		select {
		case <-d.retrying:
			return
		case <-tick.C:
		}
		d.mu.Lock()
		recs := d.sortedPending()
		d.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 4*d.cfg.Conn.Timeout)
		placed := d.placePending(ctx, recs)
		cancel()
		d.mu.Lock()
		left := len(d.pending)
		d.mu.Unlock()
		if placed > 0 {
			d.log.Info("restored attachments on a later try", "restored", placed, "waiting", left)
		}
		if left == 0 {
			return
		}
	}
}

// retryEvery is how often pending attachments are tried again.
const retryEvery = 2 * time.Second

func (d *Daemon) sortedPending() []record {
	out := make([]record, 0, len(d.pending))
	for _, r := range d.pending {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// restoring is a record made ready to place again: its path and its
// access log opened and checked as its user (without d.mu).
type restoring struct {
	rec record
	dir *mountpath.Dir
	log *accesslog.Log
}

// close lets go of what prepareRestore opened (d.mu is held: the log is
// closed once it is free).
func (p *restoring) close(d *Daemon) {
	if p == nil {
		return
	}
	if p.dir != nil {
		p.dir.Close()
	}
	d.closeLater(p.log)
}

// prepareRestore checks rec again as its user is now and opens its path
// and access log, without d.mu (each may wait on a file system the user
// controls, within mountpath's bounds). The policy judges the user with
// the groups the system's user database gives them today, of those they
// held when they attached (a group taken away since no longer grants
// anything; one added since was not the caller's then).
func (d *Daemon) prepareRestore(rec record) (*restoring, error) {
	p := &restoring{rec: rec}
	if rec.OwnerUID == 0 && rec.OwnerGID == 0 && rec.UID != 0 { // a record without an owner: the caller's
		p.rec.OwnerUID, p.rec.OwnerGID = rec.UID, rec.GID
	}
	u := mountpath.User{UID: rec.UID, GID: rec.GID, Groups: rec.UserGroups} // a front end's: root
	if !rec.Open && rec.UID != 0 {
		var err error
		if u.GID, u.Groups, err = d.groupsNow(rec); err != nil {
			return p, err
		}
	}
	if !d.asRoot(rec.UID, rec.Open) {
		subj := subjectOf(rec)
		if subj.Unix() {
			subj.GIDs = append([]uint32{u.GID}, u.Groups...)
		}
		if err := d.policy.Load().Allow(subj, rec.Collection, rec.Groups); err != nil {
			return p, err
		}
	}
	var err error
	if d.privileged {
		id := rec.MountID
		if !rec.sameNamespace(d.mountNS) {
			id = 0 // a number of another namespace: the device tells
		}
		p.dir, err = mountpath.Reopen(rec.Path, u, id, rec.MountDev)
	} else {
		if err := clearDeadMount(rec.Path); err != nil {
			return p, err
		}
		p.dir, err = mountpath.Open(rec.Path, u)
	}
	if err != nil {
		return p, err
	}
	if id, err := p.dir.MountID(); err == nil {
		switch {
		case id == rec.MountID && rec.MountID != 0 && rec.sameNamespace(d.mountNS): // stacked on it: its ids hold
			_, devs := rec.mounts()
			p.rec.Below, p.rec.BelowDev = append(slices.Clone(rec.Below), rec.MountID), append(devs[1:], devs[0])
		case mountpath.Recorded(id, rec.Path, rec.MountDev): // a copy in a new namespace: found by device
			p.rec.Below, p.rec.BelowDev = deadMounts(rec, d.mountNS)
		}
	}
	if rec.AccessLog != "" {
		if f, err := mountpath.CreateFile(rec.AccessLog, u); err == nil {
			p.log = d.newAccessLog(f)
		} else {
			d.log.Warn("access log not reopened", "attachment", rec.ID, "err", err)
		}
	}
	return p, nil
}

// mounts are the record's mount and the dead ones below it, with their
// devices ("" where a record of an older daemon has none).
func (rec record) mounts() ([]uint64, []string) {
	ids := append([]uint64{rec.MountID}, rec.Below...)
	devs := make([]string, len(ids))
	devs[0] = rec.MountDev
	for i := range rec.Below {
		if i < len(rec.BelowDev) {
			devs[i+1] = rec.BelowDev[i]
		}
	}
	return ids, devs
}

// sameNamespace reports whether rec's mount ids are of the boot and mount
// namespace ns (the daemon's) (a record of an older daemon, without one, is
// taken to be: as that daemon took it).
func (rec record) sameNamespace(ns string) bool {
	return rec.MountNS == "" || rec.MountNS == ns
}

// deadMounts are the mounts of rec stacked at its path, as this mount
// namespace numbers them (oldest first): root-made FUSE mounts of its
// devices, or, in the namespace its ids were taken in, of its ids (a
// record of an older daemon has no devices). A daemon restarted in a new
// namespace finds copies of them there, under new ids; other attachments'
// copies of the same view (same device) are at other paths.
func deadMounts(rec record, ns string) ([]uint64, []string) {
	ids, devs := rec.mounts()
	same := rec.sameNamespace(ns)
	var below []uint64
	var belowDev []string
	for _, m := range proc.MountsAt(rec.Path) {
		for i := range ids {
			if mountpath.Ours(m.Mount, devs[i]) || devs[i] == "" && same && m.ID == ids[i] && ids[i] != 0 {
				below, belowDev = append(below, m.ID), append(belowDev, devs[i])
				break
			}
		}
	}
	return below, belowDev
}

// placeRestored places a prepared record. d.mu is held.
func (d *Daemon) placeRestored(c *collection, p *restoring) (*attachment, error) {
	defer p.dir.Close()
	if _, ok := d.byPath[p.rec.Path]; ok {
		d.closeLater(p.log)
		return nil, errors.New("the path is attached twice")
	}
	a, err := d.place(c, p.rec, p.dir, p.log)
	if err != nil {
		d.closeLater(p.log)
		return nil, err
	}
	return a, nil
}

// groupsNow is the primary group and the supplementary groups rec's user
// holds now, of those recorded when they attached. A user the database
// does not know holds none: the overflow gid stands for their group, and
// rules naming unix groups grant them nothing. A database that cannot be
// asked now is a temporary error (the record waits, and is tried again).
func (d *Daemon) groupsNow(rec record) (gid uint32, groups []uint32, err error) {
	primary, now, err := d.cfg.UserGroups(rec.UID)
	var unknown user.UnknownUserIdError
	switch {
	case errors.As(err, &unknown):
		return overflowGID, nil, nil
	case err != nil:
		return 0, nil, &Error{Code: api.CodeUnavailable, Err: fmt.Errorf("uid %d's groups cannot be told now: %w", rec.UID, err)}
	}
	held := map[uint32]bool{primary: true}
	for _, g := range now {
		held[g] = true
	}
	gid = overflowGID
	if held[rec.GID] {
		gid = rec.GID
	}
	for _, g := range rec.UserGroups {
		if held[g] {
			groups = append(groups, g)
		}
	}
	return gid, groups, nil
}

// overflowGID is the kernel's group for an id it cannot map (nogroup).
const overflowGID = 65534

// clearDeadMount detaches the dead FUSE mount a daemon without privileges
// left at path (with fusermount3, as it was made).
func clearDeadMount(path string) error {
	if !isDeadMount(path) {
		return nil
	}
	return fusermountLazy(path)
}

// errStopping is returned to calls made while the daemon stops.
var errStopping = &Error{Code: api.CodeUnavailable, Err: errors.New("the daemon is stopping")}
