package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/treeload"
	"github.com/chromafs/chromafs/view"
)

// Loads outside the lock. Opening a collection (a request to find it by
// name) and loading a view's first tree (a request, or none from the host
// tier or from a tree the collection holds; a scan for a collection
// without one) may wait for a slow or stalled Chroma, up to the request
// timeout and its retries. d.mu is held across placing an attach, and
// every attach, detach and listing takes it: it must never wait for them,
// or one tenant's stalled server would stall every other tenant's
// attaches.
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
//
// An open or a load serves every attach waiting for it, so it runs with
// the first one's deadline (the request timeout's 4x at most), not its
// cancellation: one caller going away does not fail the others. Every
// attach waiting for it counts in its collection's preparing, so the
// collection is not closed under it. Close cancels the flights and waits
// for them before it closes the collections.

// errViewGone is placing's answer when the view prepare found served
// was dropped before d.mu was taken again (its last mount went): the
// attach prepares again.
var errViewGone = &Error{Code: api.CodeUnavailable, Err: errors.New("the view was dropped while it was being attached: try again")}

// preparedView is a view loaded by prepare, not placed yet.
type preparedView struct {
	vw  *view.View[*chroma.Store]
	res treeload.Result
	// remembered: res is the version this host served last, not checked
	// (view.View.Remembered); the view's refresher checks it at once
	remembered bool
}

// prepare opens rec's collection and loads its view, outside d.mu, and
// returns the collection; end with c.endPrepareLocked once the attach is
// placed or has failed (the collection closes then if nothing uses it).
// check, when set, runs under d.mu first: what refuses the attach
// cheaply (its path taken, its subject's limits) refuses it before any
// request.
func (d *Daemon) prepare(ctx context.Context, rec record, check func() error) (*collection, error) {
	d.mu.Lock()
	if d.loadsStopped { // Close sets it before d.closed
		d.unlock()
		return nil, errStopping
	}
	if check != nil {
		if err := check(); err != nil {
			d.unlock()
			return nil, err
		}
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
	c.preparing[groupsKey(rec.Groups)]++
	_, placed := c.views[groupsKey(rec.Groups)]
	d.unlock()
	if placed {
		return c, nil
	}
	if err := c.prepare(ctx, rec.Groups); err != nil {
		d.mu.Lock()
		c.endPrepareLocked(rec.Groups)
		d.unlock()
		return nil, fmt.Errorf("%s: %w", describeView(rec.Collection, rec.Groups), err)
	}
	return c, nil
}

// endPrepareLocked ends what prepare began for groups: once no attach of
// them is preparing, the view prepared for them and not placed is let go
// of (an attach of it later loads it again, from what the collection
// holds, with no request: never a tree kept from long ago), and c closes
// if it has no view and no other attach is preparing it. d.mu is held.
func (c *collection) endPrepareLocked(groups []string) {
	gk := groupsKey(groups)
	if c.preparing[gk]--; c.preparing[gk] == 0 {
		delete(c.preparing, gk)
		delete(c.prepared, gk)
	}
	c.closeIfUnused()
}

// prepare opens c and loads the view of groups, each in one flight shared
// by the attaches that need it. d.mu is not held.
func (c *collection) prepare(ctx context.Context, groups []string) error {
	if err := c.d.flight(ctx, "collection\x00"+c.key, c.open); err != nil {
		return err
	}
	gk := groupsKey(groups)
	return c.d.flight(ctx, "view\x00"+c.key+"\x00"+gk, func(ctx context.Context) error {
		c.d.mu.Lock()
		_, placed := c.views[gk]
		_, loaded := c.prepared[gk]
		col, closed := c.col, c.closed
		c.d.mu.Unlock()
		switch {
		case closed:
			return errStopping
		case placed || loaded: // another flight's, finished after this one's caller looked
			return nil
		}
		// on a host that served this view before (a view dropped for
		// memory, a daemon restarted), the version it served last, with
		// no request: checked right after it is placed
		vw := col.View(groups)
		res, remembered, err := vw.LoadRemembered(ctx)
		if err != nil {
			return err
		}
		c.d.mu.Lock()
		c.prepared[gk] = preparedView{vw, res, remembered}
		c.d.mu.Unlock()
		return nil
	})
}

// open opens c's store unless it is open. d.mu is not held.
func (c *collection) open(ctx context.Context) error {
	c.d.mu.Lock()
	opened, closed := c.col != nil, c.closed
	c.d.mu.Unlock()
	switch {
	case closed:
		return errStopping
	case opened:
		return nil
	}
	col, err := view.Open(ctx, c.cfg)
	if err != nil {
		return err
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if c.closed { // the daemon stopped meanwhile
		_ = col.Close()
		return errStopping
	}
	c.col = col
	return nil
}

// flight runs fn once for every caller of key at the same time, with a
// context of its own: the first caller's values (its trace) and deadline
// (4x the request timeout at most), not its cancellation, and the
// daemon's (Close). Close waits for every flight (d.loading).
func (d *Daemon) flight(ctx context.Context, key string, fn func(context.Context) error) error {
	_, err, _ := d.loads.Do(key, func() (any, error) {
		d.mu.Lock()
		if d.loadsStopped {
			d.mu.Unlock()
			return nil, errStopping
		}
		d.loading.Add(1)
		d.mu.Unlock()
		defer d.loading.Done()
		limit := 4 * d.cfg.Conn.Timeout
		if limit <= 0 {
			limit = 4 * chroma.DefaultTimeout
		}
		deadline := time.Now().Add(limit)
		if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
			deadline = dl
		}
		fctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
		defer cancel()
		defer context.AfterFunc(d.loadsCtx, cancel)()
		return nil, fn(fctx)
	})
	return err
}
