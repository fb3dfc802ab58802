package daemon

import (
	"time"
)

// A shared mount (a view's mount for all its owners, or for one, or the
// front ends' open one) outlives its last attachment for Config.Linger, so that the next
// conversation of that view, minutes later, finds it as the last one
// left it: the kernel's dentries, inodes and page cache of the mount, the
// view's tree and searcher, the collection's memory cache. Attaching
// again within the linger wakes it (the same mount, copied onto the new
// path); when the linger ends unused it is dropped as a detach would have.
//
// A lingering mount counts against the subject whose attachment left it
// last (its FUSE mounts and layouts, bounds.go), and is evicted, oldest
// first, when that subject would otherwise be refused a mount, or when a
// new mount would pass the host's bound (Config.MaxMounts). No new caller
// reaches it but through an attach: it sits in STATE_DIR/mnt, root's
// 0700, with its root 0500 (root's, or its owner's). A sandbox that still holds a
// copy of it does read on, for as long as the mount lives (attached
// again, that is past the linger); where a detach must cut a running
// sandbox off, Config.Linger is 0. Private mounts never linger (they are one
// attachment's own), nor does anything of a daemon without privileges
// (its mounts are on the attachments' own paths). Close drops every
// lingering mount (nothing records it for the next daemon); those of a
// daemon that was killed stay dead in STATE_DIR/mnt until the next one's
// Restore sweeps them (sweepMounts).

// startLinger lets m, whose last attachment (rec) went, linger; false
// when it may not (the caller drops it). d.mu is held.
func (d *Daemon) startLinger(m *mountState, rec record) bool {
	if d.cfg.Linger <= 0 || d.closed || !d.privileged || m.private {
		return false
	}
	m.idleSince = time.Now()
	m.lingerBy, m.lingerLayout, m.lingerUID = subjectOf(rec).Key(), d.layoutUse(rec), rec.UID
	d.lingering.Add(1)
	var t *time.Timer
	t = time.AfterFunc(d.cfg.Linger, func() {
		defer d.lingering.Done()
		d.mu.Lock()
		defer d.unlock()
		if m.linger != t { // woken or evicted (Close evicts every one)
			return
		}
		m.linger = nil
		d.log.Info("lingering mount dropped", "why", "its linger ended", "view", m.view.id, "mount", m.key, "idle", time.Since(m.idleSince).Round(time.Second))
		d.drop(m)
	})
	m.linger = t
	return true
}

// wake ends m's linger, if it lingers: an attachment is placed on it.
// d.mu is held.
func (d *Daemon) wake(m *mountState) {
	if d.endLinger(m) {
		d.log.Info("lingering mount attached again", "view", m.view.id, "mount", m.key, "idle", time.Since(m.idleSince).Round(time.Millisecond))
	}
}

// endLinger stops m's linger timer; false when m does not linger. d.mu
// is held.
func (d *Daemon) endLinger(m *mountState) bool {
	if m.linger == nil {
		return false
	}
	if m.linger.Stop() {
		d.lingering.Done() // its function will not run
	}
	m.linger = nil
	return true
}

// evictLingering drops the mount that has lingered longest among those
// that f accepts and returns it; nil when there is none. why says in the
// log why it goes. d.mu is held.
func (d *Daemon) evictLingering(why string, f func(*mountState) bool) *mountState {
	var oldest *mountState
	d.forLingering(func(m *mountState) {
		if f(m) && (oldest == nil || m.idleSince.Before(oldest.idleSince)) {
			oldest = m
		}
	})
	if oldest == nil {
		return nil
	}
	d.endLinger(oldest)
	d.log.Info("lingering mount dropped", "why", why, "view", oldest.view.id, "mount", oldest.key)
	d.drop(oldest)
	return oldest
}

// forLingering calls f for every mount that lingers. f must not drop a
// mount. d.mu is held.
func (d *Daemon) forLingering(f func(*mountState)) {
	for _, c := range d.collections {
		for _, v := range c.views {
			for _, m := range v.mounts {
				if m.linger != nil {
					f(m)
				}
			}
		}
	}
}

// dropLingering drops every lingering mount (Close). d.mu is held.
func (d *Daemon) dropLingering() {
	for d.evictLingering("the daemon stops", func(*mountState) bool { return true }) != nil {
	}
}

// lingeringMounts counts v's mounts that linger, and returns when the
// last of their lingers ends. d.mu is held.
func (v *viewState) lingeringMounts(linger time.Duration) (n int, until time.Time) {
	for _, m := range v.mounts {
		if m.linger != nil {
			n++
			if end := m.idleSince.Add(linger); end.After(until) {
				until = end
			}
		}
	}
	return n, until
}
