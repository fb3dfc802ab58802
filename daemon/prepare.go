package daemon

import (
	"context"
	"errors"
	"fmt"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/treeload"
	"github.com/chromafs/chromafs/view"
)

// Loads outside the lock. Opening a collection (a request to find it by
// name) and loading a view's first tree (a request, or none from the host
// tier or from a tree the collection holds) may wait for a slow or
// stalled Chroma, up to the request timeout and its retries. d.mu is
// held across placing an attach, and every attach, detach and listing
// takes it: it must never wait for them, or one tenant's stalled server
// would stall every other tenant's attaches.
//
// So an attach prepares what it will place before it takes d.mu: the
// collection, opened once (the first attach that needs it opens it, the
// others of the same collection wait for that open, attaches of other
// collections do not wait at all), then the view, loaded once in the same
// way. Placing, under d.mu, takes what was prepared and asks Chroma
// nothing. d.mu is only taken between the steps, to find or record their
// results. A collection is known to the daemon from the moment an attach
// starts preparing it (with no store yet while it opens); it closes when
// it has no view and no attach preparing it (collection.closeIfUnused).

// errViewGone is placing's answer when the view prepare found served
// was dropped before d.mu was taken again (its last mount went): the
// attach prepares again.
var errViewGone = &Error{Code: api.CodeUnavailable, Err: errors.New("the view was dropped while it was being attached: try again")}

// preparedView is a view loaded by prepare, not placed yet.
type preparedView struct {
	vw  *view.View[*chroma.Store]
	res treeload.Result
}

// prepare opens rec's collection and loads its view, outside d.mu, and
// returns the collection; end with c.endPrepareLocked once the attach is
// placed or has failed (the collection closes then if nothing uses it).
func (d *Daemon) prepare(ctx context.Context, rec record) (*collection, error) {
	d.mu.Lock()
	if d.closed {
		d.unlock()
		return nil, errStopping
	}
	key := collectionKey(rec.Collection, rec.Layout)
	c, ok := d.collections[key]
	if !ok {
		var err error
		if c, err = d.newCollection(rec.Collection, rec.Layout); err != nil {
			d.unlock()
			return nil, fmt.Errorf("%s: %w", describeView(rec.Collection, rec.Groups), err)
		}
		d.collections[key] = c
	}
	c.preparing++
	_, placed := c.views[groupsKey(rec.Groups)]
	d.unlock()
	if placed {
		return c, nil
	}
	// one flight's requests serve every attach waiting for it: they run
	// to their own deadline, whoever of those attaches gives up first
	limit := 4 * d.cfg.Conn.Timeout
	if limit <= 0 {
		limit = 4 * chroma.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
	defer cancel()
	if err := c.prepare(ctx, rec.Groups); err != nil {
		d.mu.Lock()
		c.endPrepareLocked()
		d.unlock()
		return nil, fmt.Errorf("%s: %w", describeView(rec.Collection, rec.Groups), err)
	}
	return c, nil
}

// endPrepareLocked ends what prepare began: c closes if it has no view
// and no other attach is preparing it. d.mu is held. A view prepared and not
// placed by the time the last preparing attach ends is let go of: a later
// attach loads it again (from what the collection holds, with no
// request), never serves a tree kept from long ago.
func (c *collection) endPrepareLocked() {
	c.preparing--
	if c.preparing == 0 {
		clear(c.prepared)
	}
	c.closeIfUnused()
}

// prepare opens c and loads the view of groups, each in one flight shared
// by the attaches that need it. d.mu is not held.
func (c *collection) prepare(ctx context.Context, groups []string) error {
	if err := c.open(ctx); err != nil {
		return err
	}
	gk := groupsKey(groups)
	_, err, _ := c.d.loads.Do("view\x00"+c.key+"\x00"+gk, func() (any, error) {
		c.d.mu.Lock()
		_, placed := c.views[gk]
		_, loaded := c.prepared[gk]
		col := c.col
		c.d.mu.Unlock()
		if placed || loaded { // another flight's, finished after this one's caller looked
			return nil, nil
		}
		vw := col.View(groups)
		res, err := vw.Load(ctx)
		if err != nil {
			return nil, err
		}
		c.d.mu.Lock()
		c.prepared[gk] = preparedView{vw, res}
		c.d.mu.Unlock()
		return nil, nil
	})
	return err
}

// open opens c's store, once: an attach that finds it opening waits for
// that open. d.mu is not held.
func (c *collection) open(ctx context.Context) error {
	_, err, _ := c.d.loads.Do("collection\x00"+c.key, func() (any, error) {
		c.d.mu.Lock()
		opened := c.col != nil
		c.d.mu.Unlock()
		if opened {
			return nil, nil
		}
		col, err := view.Open(ctx, c.cfg)
		if err != nil {
			return nil, err
		}
		c.d.mu.Lock()
		defer c.d.mu.Unlock()
		if c.closed { // the daemon stopped meanwhile
			_ = col.Close()
			return nil, errStopping
		}
		c.col = col
		return nil, nil
	})
	return err
}
