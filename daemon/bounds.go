package daemon

import (
	"fmt"
	"os/user"
	"strconv"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/policy"
)

// What one subject may hold, and the host-wide bounds every subject
// shares. A subject (a unix user, a pod's service account, Docker; see
// policy.Subject.Key) may hold at most its policy.Limits: attachments,
// the FUSE mounts they make (mountKey: one per view, or per view and owner,
// one per private attachment), private attachments, and layouts other than the
// daemon's default (each opens its collection again: a read engine, a
// cache, a tree, a poller). The host-wide bounds
// (Config.MaxAttachments, Config.MaxMounts) keep a reserve for root, so
// that other subjects together cannot fill them for root either. Root
// has no per-subject limits; the daemon of a user without privileges
// serves that user as root.

// hostBound is what of a host-wide bound n a subject may fill: all of it
// for root, all but the reserve (a sixteenth, at least one when n > 1)
// for every other subject.
func hostBound(n int, root bool) int {
	if root || n < 2 {
		return n
	}
	return n - max(1, n/16)
}

// reserveNote says, in a refusal, that the rest of a bound is root's.
func reserveNote(n int, root bool) string {
	if r := n - hostBound(n, root); r > 0 {
		return fmt.Sprintf(", of which %d are kept for root", r)
	}
	return ""
}

// checkBoundsLocked refuses rec when placing it would take its subject
// past its limits, or the host past its bound. d.mu is held.
func (d *Daemon) checkBoundsLocked(rec record) error {
	subj := subjectOf(rec)
	root := d.asRoot(rec.UID, rec.Open)
	held := len(d.attachments) + len(d.pending)
	if held >= hostBound(d.cfg.MaxAttachments, root) {
		return &Error{Code: api.CodeUnavailable, Err: fmt.Errorf("this daemon holds %d attachments, its bound (--max-attachments %d%s)",
			held, d.cfg.MaxAttachments, reserveNote(d.cfg.MaxAttachments, root))}
	}
	if root {
		return nil
	}
	lim, limited := d.policy.Load().Limits(subj)
	if !limited {
		return nil
	}
	h := d.holdingsLocked(subj.Key())
	// the subject's own lingering mounts give way before it is refused
	for d.overMounts(rec, h, lim) && d.evictLingering("the subject's limits reached", func(m *mountState) bool {
		return m.lingerBy == subj.Key() && m.key != d.mountKey(rec)
	}) != nil {
		h = d.holdingsLocked(subj.Key())
	}
	refuse := func(what string, n int, limit string) error {
		return &Error{Code: api.CodeRefused, Err: fmt.Errorf("%s holds %d %s, its limit (the policy's limits.%s, default %s): detach one first, or ask for a rule that raises it",
			subj, n, what, limit, defaultOf(limit))}
	}
	switch {
	case h.attachments >= lim.Attachments:
		return refuse("attachments", h.attachments, "attachments")
	case rec.Private && h.private >= lim.PrivateMounts:
		return refuse("private attachments", h.private, "private_mounts")
	case !h.mounts[d.mountKey(rec)] && len(h.mounts) >= lim.Mounts:
		return refuse("FUSE mounts (one per view it attaches, one per private attachment)", len(h.mounts), "mounts")
	}
	if k := d.layoutUse(rec); k != "" && !h.layouts[k] && len(h.layouts) >= lim.Layouts {
		return refuse("collections opened with a layout of their own", len(h.layouts), "layouts")
	}
	return nil
}

func defaultOf(limit string) string {
	l := policy.DefaultLimits
	n := map[string]int{"attachments": l.Attachments, "mounts": l.Mounts, "private_mounts": l.PrivateMounts, "layouts": l.Layouts}[limit]
	return strconv.Itoa(n)
}

// overMounts reports whether placing rec would take its subject, holding
// h, past its FUSE mounts or layouts.
func (d *Daemon) overMounts(rec record, h holdings, lim policy.Limits) bool {
	if !h.mounts[d.mountKey(rec)] && len(h.mounts) >= lim.Mounts {
		return true
	}
	k := d.layoutUse(rec)
	return k != "" && !h.layouts[k] && len(h.layouts) >= lim.Layouts
}

// holdings is what one subject holds.
type holdings struct {
	attachments, private int
	mounts               map[string]bool // mountKey keys
	layouts              map[string]bool // layoutUse keys
}

// holdingsLocked counts what the subject of key holds: its attachments,
// placed or waiting for Chroma, and the mounts that linger after its
// attachments left them (their mounts and layouts). d.mu is held.
func (d *Daemon) holdingsLocked(key string) holdings {
	h := holdings{mounts: map[string]bool{}, layouts: map[string]bool{}}
	count := func(r record) {
		if subjectOf(r).Key() != key {
			return
		}
		h.attachments++
		h.mounts[d.mountKey(r)] = true
		if r.Private {
			h.private++
		}
		if k := d.layoutUse(r); k != "" {
			h.layouts[k] = true
		}
	}
	for _, a := range d.attachments {
		count(a.rec)
	}
	for _, r := range d.pending {
		count(r)
	}
	d.forLingering(func(m *mountState) {
		if m.lingerBy == key {
			h.mounts[m.key] = true
			if m.lingerLayout != "" {
				h.layouts[m.lingerLayout] = true
			}
		}
	})
	return h
}

// layoutUse names the collection rec opens with a layout of its own (""
// when it uses the daemon's default layout).
func (d *Daemon) layoutUse(rec record) string {
	if layoutKey(rec.Layout) == layoutKey(d.cfg.Layout) {
		return ""
	}
	return collectionKey(rec.Collection, rec.Layout)
}

// systemGroups is Config.UserGroups's default: the user's primary group
// and every group the system's user database lists them in.
func systemGroups(uid uint32) (uint32, []uint32, error) {
	u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10))
	if err != nil {
		return 0, nil, err
	}
	primary, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return 0, nil, fmt.Errorf("uid %d: gid %q: %w", uid, u.Gid, err)
	}
	ids, err := u.GroupIds()
	if err != nil {
		return 0, nil, err
	}
	var groups []uint32
	for _, s := range ids {
		if g, err := strconv.ParseUint(s, 10, 32); err == nil {
			groups = append(groups, uint32(g))
		}
	}
	return uint32(primary), groups, nil
}
