package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromafs/chromafs/accesslog"
	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/chroma/name"
	"github.com/chromafs/chromafs/internal/cli"
	"github.com/chromafs/chromafs/internal/peercred"
	"github.com/chromafs/chromafs/mountpath"
	"github.com/chromafs/chromafs/policy"
)

// attachment is a view's mount placed at a path.
type attachment struct {
	api.Attachment
	rec   record
	mount *mountState
}

// Attach places the view req asks for at req.Path for who, if the policy
// grants it and the path is one who may mount on.
func (d *Daemon) Attach(ctx context.Context, who peercred.Cred, req api.AttachRequest) (api.Attachment, error) {
	rec, err := d.checkRequest(who, req)
	if err != nil {
		return api.Attachment{}, err
	}
	return d.attach(ctx, rec, mountpath.User{UID: who.UID, GID: who.GID, Groups: who.Groups}, req.AccessLog, who.String())
}

// Frontend is a container front end (CSI, Docker) attaching for a subject
// it vouches for (a pod from kubelet's pod info, a Docker volume): the
// policy judges Subject, never root whoever relays it; the path is the
// front end's own (kubelet's or Docker's, checked as root); and the view
// is open to every user of the one sandbox it is bound into (its root
// 0555, owned by root), since which user a pod or container runs as is
// not known.
type Frontend struct {
	Name    string // csi, docker: in logs
	Subject policy.Subject
}

// AttachFor places the view req asks for at req.Path for a front end's
// subject (req.Private, req.Owner and req.AccessLog are not taken).
func (d *Daemon) AttachFor(ctx context.Context, f Frontend, req api.AttachRequest) (api.Attachment, error) {
	if f.Subject.Unix() {
		return api.Attachment{}, &Error{Code: api.CodeInternal, Err: errors.New("a front end's subject is a pod or Docker")}
	}
	rec, err := d.checkFields(req, false)
	if err != nil {
		return api.Attachment{}, err
	}
	if err := d.policy.Load().Allow(f.Subject, req.Collection, rec.Groups); err != nil {
		return api.Attachment{}, &Error{Code: api.CodeRefused, Err: err}
	}
	rec.Open, rec.Pod, rec.Docker = true, f.Subject.Pod, f.Subject.Docker
	return d.attach(ctx, rec, mountpath.User{}, "", f.Name+" for "+f.Subject.String())
}

// attach checks rec's path as u, prepares the view (outside d.mu:
// prepare.go) and places it under d.mu.
func (d *Daemon) attach(ctx context.Context, rec record, u mountpath.User, accessLog, who string) (api.Attachment, error) {
	dir, err := mountpath.Open(rec.Path, u)
	if err != nil {
		return api.Attachment{}, pathError(err)
	}
	defer dir.Close()
	var log *accesslog.Log
	if accessLog != "" {
		f, err := mountpath.CreateFile(accessLog, u)
		if err != nil {
			return api.Attachment{}, &Error{Code: api.CodeRefused, Err: fmt.Errorf("--access-log: %w", err)}
		}
		log = d.newAccessLog(f)
	}
	ctx, trace := chroma.WithTrace(ctx)
	start := time.Now()
	var a *attachment
	// where an attach's time went, for its log line: preparing (the
	// collection opened, the view loaded, or waiting for the flight that
	// does it), waiting for d.mu, placing (mounting) under it
	var prepared, waited, placed time.Duration
	for try := 1; ; try++ {
		var c *collection
		t0 := time.Now()
		c, err = d.prepare(ctx, rec, func() error { return d.admitLocked(rec) })
		t1 := time.Now()
		d.mu.Lock()
		t2 := time.Now()
		prepared, waited = prepared+t1.Sub(t0), waited+t2.Sub(t1)
		if err == nil {
			if err = d.admitLocked(rec); err == nil { // again: others were placed meanwhile
				a, err = d.place(c, rec, dir, log)
			}
			c.endPrepareLocked(rec.Groups)
		}
		placed += time.Since(t2)
		if !errors.Is(err, errViewGone) || try == 3 {
			break
		}
		d.unlock()
	}
	if err != nil {
		d.closeLater(log)
		d.unlock()
		return api.Attachment{}, err
	}
	n := d.saveLocked(a.rec)
	out := a.Attachment
	d.beginLocked(a.mount.view)
	d.unlock()
	d.synced(n)
	requests := trace.Requests()
	trips, chromaWaited := trace.RoundTrips()
	d.attaches.Add(1)
	d.attachRequests.Add(int64(requests))
	d.attachRoundTrips.Add(int64(trips))
	d.log.Info("attached", "attachment", out.ID, "path", out.Path, "view", out.View, "collection", rec.Collection,
		"groups", strings.Join(rec.Groups, ","), "private", rec.Private, "peer", who, "took", time.Since(start).Round(time.Microsecond),
		"prepare", prepared.Round(time.Microsecond), "lock_wait", waited.Round(time.Microsecond), "place", placed.Round(time.Microsecond),
		"chroma_requests", requests, "chroma_round_trips", trips, "chroma_waited", chromaWaited.Round(time.Microsecond))
	a.mount.view.c.startEngine()
	return out, nil
}

// admitLocked refuses rec unless it may be placed now: the daemon runs,
// the path is free, the bounds allow it. d.mu is held.
func (d *Daemon) admitLocked(rec record) error {
	if d.closed {
		return errStopping
	}
	if a, ok := d.byPath[rec.Path]; ok {
		return &Error{Code: api.CodeInUse, Err: fmt.Errorf("%s is attachment %s already", rec.Path, a.ID)}
	}
	return d.checkBoundsLocked(rec)
}

// AttachmentAt returns the attachment at path, if any (a front end's
// idempotent publish asks first).
func (d *Daemon) AttachmentAt(path string) (api.Attachment, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, ok := d.byPath[filepath.Clean(path)]
	if !ok {
		return api.Attachment{}, false
	}
	return a.Attachment, true
}

// ViewOf returns the collection and groups of the attachment at path (a
// front end checks that a publish asks for what is there).
func (d *Daemon) ViewOf(path string) (collection string, groups []string, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	a, ok := d.byPath[filepath.Clean(path)]
	if !ok {
		return "", nil, false
	}
	return a.rec.Collection, a.rec.Groups, true
}

// DetachPath takes away the attachment at path for a front end (which
// checks its own callers); no attachment there is not an error
// (unpublish is idempotent): it reports whether there was one.
func (d *Daemon) DetachPath(path string) (bool, error) {
	d.mu.Lock()
	a, ok := d.byPath[filepath.Clean(path)]
	if !ok {
		if rec, ok := d.pendingFor(api.DetachRequest{Path: path}); ok {
			delete(d.pending, rec.ID) // not placed yet (Chroma was away)
			d.dropMounts(rec)
			n := d.forgetLocked(rec.ID)
			d.unlock()
			d.synced(n)
			return true, nil
		}
		d.unlock()
		return false, nil
	}
	if err := d.detachLocked(a); err != nil {
		d.unlock()
		return true, &Error{Code: api.CodeInternal, Err: err}
	}
	n := d.forgetLocked(a.ID)
	d.unlock()
	d.synced(n)
	d.log.Info("detached", "attachment", a.ID, "path", a.Path)
	return true, nil
}

// checkFields validates what every request must hold and returns the
// record it asks for (no owner, no policy yet).
func (d *Daemon) checkFields(req api.AttachRequest, root bool) (record, error) {
	bad := func(format string, args ...any) (record, error) {
		return record{}, &Error{Code: api.CodeBadRequest, Err: fmt.Errorf(format, args...)}
	}
	if req.Collection == "" {
		return bad("no collection named")
	}
	if err := name.CheckCollection(req.Collection); err != nil {
		return bad("%v", err)
	}
	if !filepath.IsAbs(req.Path) {
		return bad("path %q: want an absolute path", req.Path)
	}
	if req.AccessLog != "" && !filepath.IsAbs(req.AccessLog) {
		return bad("access log %q: want an absolute path", req.AccessLog)
	}
	groups, err := cli.Groups(strings.Join(req.Groups, ","))
	if err != nil {
		return bad("groups: %v", err)
	}
	layout, err := d.layoutOf(req.Layout, root)
	if err != nil {
		return record{}, err
	}
	return record{ID: newID(), Path: filepath.Clean(req.Path), Collection: req.Collection, Groups: groups, Layout: layout, Created: time.Now().UTC()}, nil
}

// checkRequest validates req and checks the policy for who; it returns
// the attachment's record (without its mount id).
func (d *Daemon) checkRequest(who peercred.Cred, req api.AttachRequest) (record, error) {
	rec, err := d.checkFields(req, d.asRoot(who.UID, false))
	if err != nil {
		return record{}, err
	}
	if !d.privileged && who.UID != uint32(currentUID()) {
		return record{}, &Error{Code: api.CodeRefused, Err: fmt.Errorf("uid %d: a daemon that does not run as root serves its own user only", who.UID)}
	}
	// a daemon of one user serves that user as a root daemon serves root:
	// the user holds the token and the caches anyway
	if !d.asRoot(who.UID, false) {
		if err := d.policy.Load().Allow(policy.Subject{UID: who.UID, GIDs: append([]uint32{who.GID}, who.Groups...)}, req.Collection, rec.Groups); err != nil {
			return record{}, &Error{Code: api.CodeRefused, Err: err}
		}
	}
	owner := api.Owner{UID: who.UID, GID: who.GID}
	if req.Owner != nil {
		if who.UID != 0 && *req.Owner != owner {
			return record{}, &Error{Code: api.CodeRefused, Err: fmt.Errorf("uid %d: only root may serve a view to another user (owner %d:%d)", who.UID, req.Owner.UID, req.Owner.GID)}
		}
		owner = *req.Owner
	}
	rec.UID, rec.GID, rec.UserGroups = who.UID, who.GID, who.Groups
	rec.OwnerUID, rec.OwnerGID = owner.UID, owner.GID
	rec.Private = req.Private || !d.privileged
	rec.AccessLog = req.AccessLog
	return rec, nil
}

// place makes the attachment rec at dir in c, prepared (prepare.go): its
// view (the one c serves, or the one prepared), its mount, and
// (privileged) the copy on dir. d.mu is held.
func (d *Daemon) place(c *collection, rec record, dir *mountpath.Dir, log *accesslog.Log) (*attachment, error) {
	v, err := c.viewFor(rec.Groups)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", describeView(rec.Collection, rec.Groups), err)
	}
	m, err := d.mountFor(v, rec, rec.Path)
	if err != nil {
		c.dropView(v)
		return nil, err
	}
	m.attachments++
	if d.privileged {
		idmap, err := d.copyIDMap(m, rec)
		var id uint64
		if err == nil {
			id, err = mountpath.BindOnto(m.dir, dir, idmap)
		}
		if err != nil {
			d.release(m, rec)
			return nil, &Error{Code: api.CodeInternal, Err: err}
		}
		// the copy's device is its view mount's (one super block), read
		// from the mount table once, when that was mounted
		rec.MountID, rec.MountNS, rec.MountDev = id, d.mountNS, m.device
	}
	if log != nil {
		m.logs.add(rec.ID, log)
	}
	a := &attachment{rec: rec, mount: m, Attachment: api.Attachment{
		ID: rec.ID, Path: rec.Path, View: v.id, UID: rec.UID, Owner: rec.OwnerUID, Private: rec.Private, Created: rec.Created,
	}}
	d.attachments[a.ID] = a
	d.byPath[a.Path] = a
	return a, nil
}

// Detach takes an attachment away: its owner's, or anyone's for root.
func (d *Daemon) Detach(who peercred.Cred, req api.DetachRequest) (api.Attachment, error) {
	d.mu.Lock()
	a, ok := d.attachments[req.ID]
	if req.ID == "" {
		a, ok = d.byPath[filepath.Clean(req.Path)]
	}
	if !ok {
		if rec, ok := d.pendingFor(req); ok && (who.UID == 0 || who.UID == rec.UID) {
			delete(d.pending, rec.ID) // not placed yet (Chroma was away): its old mounts go
			d.dropMounts(rec)
			n := d.forgetLocked(rec.ID)
			d.unlock()
			d.synced(n)
			return api.Attachment{ID: rec.ID, Path: rec.Path, UID: rec.UID, Owner: rec.OwnerUID, Private: rec.Private, Created: rec.Created}, nil
		}
	}
	if !ok || (who.UID != 0 && who.UID != a.UID) {
		d.unlock()
		what := req.ID
		if what == "" {
			what = req.Path
		}
		return api.Attachment{}, &Error{Code: api.CodeNotFound, Err: fmt.Errorf("no attachment %s of uid %d", what, who.UID)}
	}
	if err := d.detachLocked(a); err != nil {
		d.unlock()
		return api.Attachment{}, &Error{Code: api.CodeInternal, Err: err}
	}
	n := d.forgetLocked(a.ID)
	d.unlock()
	d.synced(n)
	d.log.Info("detached", "attachment", a.ID, "path", a.Path, "peer", who.String())
	return a.Attachment, nil
}

// detachLocked removes a's copy from its path and releases its mount.
// d.mu is held.
func (d *Daemon) detachLocked(a *attachment) error {
	if d.privileged {
		// by the path it was placed at, else (renamed, or a link put on the
		// way since) wherever its mount id is now
		if err := mountpath.Unmount(a.Path, a.rec.MountID); err != nil {
			if err := mountpath.UnmountID(a.rec.MountID, a.rec.MountDev); err != nil {
				return fmt.Errorf("detach %s: %w", a.Path, err)
			}
		}
		ids, devs := a.rec.mounts()
		for i := len(ids) - 1; i >= 1; i-- { // the dead mounts of daemons before
			if err := mountpath.UnmountID(ids[i], devs[i]); err != nil {
				d.log.Warn("a dead mount of a daemon before stays", "path", a.Path, "err", err)
			}
		}
	}
	a.mount.logs.remove(a.ID)
	delete(d.attachments, a.ID)
	delete(d.byPath, a.Path)
	d.release(a.mount, a.rec)
	return nil
}

// pathError gives mountpath's refusals their API codes.
func pathError(err error) error {
	switch {
	case errors.Is(err, mountpath.ErrInUse):
		return &Error{Code: api.CodeInUse, Err: err}
	case errors.Is(err, mountpath.ErrNotAllowed):
		return &Error{Code: api.CodeRefused, Err: err}
	}
	return &Error{Code: api.CodeBadRequest, Err: err}
}

// newID is a new attachment's id: 12 hex digits.
func newID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// pendingFor finds a pending record by req's id or path. d.mu is held.
func (d *Daemon) pendingFor(req api.DetachRequest) (record, bool) {
	for _, r := range d.pending {
		if (req.ID != "" && r.ID == req.ID) || (req.ID == "" && r.Path == filepath.Clean(req.Path)) {
			return r, true
		}
	}
	return record{}, false
}
