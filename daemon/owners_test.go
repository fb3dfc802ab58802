package daemon

import (
	"testing"
	"time"
)

// TestMountKeyAcrossOwners: the shared attachments of a view use one
// mount whatever their owner where idmapped copies are made and mounts
// linger; a mount per owner with an access log, with --linger 0, or
// without idmapped copies; private and open ones their own.
func TestMountKeyAcrossOwners(t *testing.T) {
	base := record{ID: "a1", Collection: "docs", Groups: []string{"team"}, OwnerUID: 1000, OwnerGID: 1000}
	other := base
	other.ID, other.OwnerUID, other.OwnerGID = "a2", 1001, 1001
	logged, private, open := other, other, other
	logged.AccessLog = "/tmp/log"
	private.Private = true
	open.Open = true
	for _, c := range []struct {
		name   string
		idmap  bool
		linger time.Duration
		rec    record
		same   bool // the same mount as base's
	}{
		{"another owner", true, time.Minute, other, true},
		{"another owner, no idmapped copies", false, time.Minute, other, false},
		{"another owner, --linger 0", true, 0, other, false},
		{"another owner, an access log", true, time.Minute, logged, false},
		{"private", true, time.Minute, private, false},
		{"open", true, time.Minute, open, false},
	} {
		d := &Daemon{idmap: c.idmap, cfg: Config{Linger: c.linger}}
		if got := d.mountKey(c.rec) == d.mountKey(base); got != c.same {
			t.Errorf("%s: mount %q, owner 1000's %q: same %v, want %v", c.name, d.mountKey(c.rec), d.mountKey(base), got, c.same)
		}
	}
}
