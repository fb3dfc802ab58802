// Package view is the policy of serving a collection's tree: how a
// collection is opened, how a view's tree is loaded and kept current, and
// what the host tier remembers between runs. chromafs-mount holds one
// Collection and one View of it; a process serving many views of many
// collections holds a Collection per (server, tenant, database,
// collection, layout) and a View per set of groups of it.
//
// Opening (Open, then the first Load). The host tier remembers the id a
// collection's name stood for (a ref named by server, tenant, database and
// name), so a restart addresses it without asking: nothing is requested
// until the first Load, whose one request (the tree header) confirms the
// id. When the server no longer knows the id (the collection was deleted,
// or re-created under the name), the collection is opened by name and the
// load runs again; a server that cannot be asked (unreachable, busy past
// the deadline, unauthorized) is an error, never taken for a forgotten
// id. Without a remembered id it is opened by name, back-pressure waited
// out, and the id is remembered once a load succeeds.
//
// Loading (View.Load). A view's tree comes, nearest first, from
//
//	a snapshot of the built tree (tree.Snapshot) of the same stamp and
//	    the same view (groups and limits: never another view's), asked
//	    for only when the host tier has ever kept one for this view
//	the stored tree's text in the host tier, named by the collection's
//	    identity and the text's digest and verified against it
//	Chroma (treeload.Load; then it is kept for the host tier)
//	the collection's records, when it has no path tree and the layout
//	    allows a scan (another tool's collection, package foreign), or
//	    when its tree is an index whose groups key is not the layout's
//	    (see "Access in an index" below)
//
// What a load fetched or built is written to the host tier by Flush (or
// Take, then Write: a host daemon takes it under its lock and writes it in
// the background), once the tree is served: never while mounting (the
// write would delay it), with the stamp of the version the view serves.
//
// Warm start (View.Remembered, issue 31). A process on a host that served
// a view before, opened by the remembered id, serves the snapshot of the
// version that view served last with no request at all, and polls at
// once (refresh.Config.Unchecked); the poll confirms the id, or reopens
// the collection by name in place (the store every reader holds follows)
// and loads its tree again, and a newer version is swapped in as a
// refresh swaps one. A layout with a groups key is never served so (its
// index's header decides what may be served).
//
// Following (Collection.Stamp, View.Latest, View.Refresher). A poll asks
// for the collection's stamp: the tree's; a scanned collection's record
// count; for an index chromafs-ingest index wrote, its stamp and, once the
// collection holds another number of records than the index counted, that
// number too. A load returns the stamp a poll would then see, so a poll
// that finds nothing new loads nothing. A stale index (the count moved)
// gives way to a scan of the records, with a warning, within the scan
// limit (past it the index is served as it is, with a warning); an index
// written again is loaded again.
//
// Access in an index (issue 28). An index's entries carry the groups
// chromafs-ingest index read under its --groups-key, which its header
// records (chroma.TreeInfo.IndexGroupsKey; indexes written before it was
// recorded do not say). A scan of a stale index reads records' groups
// under that key, and under the layout's too when it names another: a
// record is restricted by each (package foreign), so a mismatch hides,
// never reveals. A stale index that does not record its key is never
// replaced by a scan (a scan could read other groups than it did): it is
// served as it is, with a warning to re-run index. When the layout names
// a groups key (a daemon's --groups-key) and an index records another one
// (or none: written without one), or does not record its key, its entries
// are not served as they are, fresh or stale, since they could show what
// the operator's key hides: where the index records its key, the records
// are scanned under both keys within the scan limit, with a warning; past
// the limit, for a layout that does not scan, or for an index that does
// not record its key, the load fails (ErrIndexGroupsKey) with an error
// that names both keys and the command that fixes it (chromafs-ingest
// index --groups-key KEY). Such a scan's stamp is the index's, as a poll
// sees it (indexStamp), so polls that find nothing new load nothing.
//
// Collection and View. The store, opening, the stamp, the stale-index
// check and the stored tree's text are the collection's; the groups, the
// snapshots and what is pending for the host tier are a view's. The
// stored tree is decoded once per version for all the views of a
// collection: the Collection keeps the decoded document of the last
// version a view fetched, and a view without a snapshot of its own builds
// its pruned tree from it after one small request (the tree's header)
// confirms the version is still current, or with no request while a
// request sent within Config.Fresh did (a poll's, or the fetch's);
// otherwise it fetches and decodes, and keeps the document for the next
// view.
//
// The collaborators are small interfaces (Store, Opener, Host) that
// chroma.Store, ChromaOpener and hostcache.Cache implement, so that the
// policy is unit-tested with fakes.
package view

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chromafs/chromafs/cache"
	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/tree"
	"github.com/chromafs/chromafs/treeload"
)

// Store is an opened collection; *chroma.Store implements it.
type Store interface {
	treeload.Source      // the stored tree, through a tree cache
	treeload.StampSource // its stamp, for snapshots
	treeload.Scanner     // the records, for collections without a tree
	TreeInfo(ctx context.Context) (chroma.TreeInfo, error)
	Identity() string // names the collection's content in the tiers
	ID() string       // the collection's id ("" until known)
	// Reopen opens the collection by name again, in place: a store opened
	// by an id the server no longer knows then reads the collection the
	// name names now, and so does everything reading through it.
	Reopen(ctx context.Context) error
	Close() error
}

// Opener opens the collection a Collection serves: by name (requests
// are made) or by an id remembered from an earlier run (nothing is
// requested until the store is used).
type Opener[S Store] interface {
	Open(ctx context.Context) (S, error)
	OpenByID(id string) (S, error)
}

// Host is the host tier as this package uses it (*hostcache.Cache):
// verified entries by key, and small refs by name.
type Host interface {
	Get(k cache.PageKey, size int64) ([]byte, bool)
	Put(k cache.PageKey, data []byte)
	Ref(name string) (string, bool)
	SetRef(name, value string)
}

// Address names a collection: where it is and what it is called.
type Address struct {
	Server, Tenant, Database, Collection string
}

// idRef names the host-tier ref holding the collection's id. The name is
// what mounts before this package wrote: changing it would make every
// host forget its ids once.
func (a Address) idRef() string {
	return "collection-id\x00" + a.Server + "\x00" + a.Tenant + "\x00" + a.Database + "\x00" + a.Collection
}

// Config is what a Collection needs.
type Config[S Store] struct {
	Address Address
	Open    Opener[S]
	// Host is the host tier; nil runs without one (nothing remembered).
	Host Host
	// Layout maps the records of a collection without a path tree to
	// files; layouts that do not scan (Layout.Scans) need a tree.
	Layout treeload.Layout
	// ScanLimit bounds how many records a load scans.
	ScanLimit int
	// Limits bound the decoded tree; zero means tree.DefaultLimits.
	Limits tree.Limits
	// Fresh is how long the version of the stored tree the collection
	// holds decoded, once confirmed (loaded, or found current by Stamp),
	// is trusted by a new view's Load without asking Chroma: a new view
	// of a loaded collection then costs no request, and serves the
	// version its collection's other views serve. A process that polls
	// the collection (Stamp) every interval sets it above that interval;
	// 0 asks every time.
	Fresh time.Duration
	// Log receives what loading decided; nil discards it.
	Log *slog.Logger
}

// Collection is one opened collection; see the package doc. Its methods
// may be called from several goroutines.
type Collection[S Store] struct {
	cfg Config[S]
	log *slog.Logger

	// mu is held by loads until one has confirmed the store, and by a
	// poll's settle (a network request, while the store is not confirmed:
	// View.Remembered)
	mu        sync.Mutex
	store     S
	hasStore  bool
	byID      string // the remembered id store was opened with ("": by name)
	confirmed bool   // a load succeeded, or a poll was answered: the store is final
	// reopened: a poll reopened the store by name; polls report a change
	// until a View.Latest has loaded the tree again (under the collection's
	// new identity, which the host tier then remembers)
	reopened bool
	opened   time.Duration
	// keepID is the id of a store opened by name, once settled, for the
	// next View.Take (or Flush) to remember on the host tier: writing it
	// is no part of the load that settles the store
	keepID atomic.Pointer[string]

	docMu      sync.Mutex // protects the following
	doc        *tree.Doc  // the stored tree of docStamp, decoded: what the views build from
	docStamp   string
	docBytes   int       // the stored document's size
	docMemory  int64     // doc.MemoryBytes()
	docChecked time.Time // when the last request that confirmed docStamp current was sent (zero: not trusted)
	// distrusted is when the last request that found another stamp (or no
	// tree) was sent: a confirmation sent before it trusts nothing
	distrusted time.Time
}

// decoded returns the decoded document the collection keeps, its stamp
// and its stored size; ok is false when there is none.
func (c *Collection[S]) decoded() (doc *tree.Doc, stamp string, size int, ok bool) {
	c.docMu.Lock()
	defer c.docMu.Unlock()
	return c.doc, c.docStamp, c.docBytes, c.doc != nil
}

// MemoryBytes estimates the heap the decoded document c keeps holds (its
// views' trees are theirs: tree.Tree.MemoryBytes).
func (c *Collection[S]) MemoryBytes() int64 {
	c.docMu.Lock()
	defer c.docMu.Unlock()
	return c.docMemory
}

// keepDecoded keeps doc, the stored tree of stamp, for the next view;
// asked is when the request that read its stamp was sent. A fetch can
// take seconds: when a request sent after asked found another version
// (checked), the document is kept but not trusted.
func (c *Collection[S]) keepDecoded(doc *tree.Doc, stamp string, size int, asked time.Time) {
	c.docMu.Lock()
	defer c.docMu.Unlock()
	c.doc, c.docStamp, c.docBytes, c.docChecked = doc, stamp, size, time.Time{}
	c.docMemory = 0
	if doc != nil {
		c.docMemory = doc.MemoryBytes()
	}
	if asked.After(c.distrusted) {
		c.docChecked = asked
	}
}

// checked is told the stored tree's stamp Chroma answered to a request
// sent at asked ("" for no tree): the decoded document is confirmed
// current, or no longer trusted. Answers may arrive out of order: what
// was asked last wins.
func (c *Collection[S]) checked(stamp string, asked time.Time) {
	c.docMu.Lock()
	defer c.docMu.Unlock()
	if c.doc != nil && stamp != "" && stamp == c.docStamp {
		if asked.After(c.distrusted) && asked.After(c.docChecked) {
			c.docChecked = asked
		}
		return
	}
	if asked.After(c.distrusted) {
		c.distrusted = asked
	}
	if !c.docChecked.After(asked) { // a confirmation sent later stands
		c.docChecked = time.Time{}
	}
}

// freshStamp returns the stamp of the decoded document when it was
// confirmed current within Config.Fresh (see there).
func (c *Collection[S]) freshStamp() (string, bool) {
	c.docMu.Lock()
	defer c.docMu.Unlock()
	if c.cfg.Fresh <= 0 || c.doc == nil || c.docChecked.IsZero() || time.Since(c.docChecked) >= c.cfg.Fresh {
		return "", false
	}
	return c.docStamp, true
}

// Open opens the collection cfg names: by the id the host tier
// remembers for it (no request), else by name. The first View.Load
// confirms the id; see the package doc.
func Open[S Store](ctx context.Context, cfg Config[S]) (*Collection[S], error) {
	c := &Collection[S]{cfg: cfg, log: cfg.Log}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.cfg.Limits == (tree.Limits{}) {
		c.cfg.Limits = tree.DefaultLimits
	}
	if cfg.Host != nil {
		if id, ok := cfg.Host.Ref(cfg.Address.idRef()); ok {
			st, err := cfg.Open.OpenByID(id)
			if err != nil {
				return nil, err
			}
			c.store, c.hasStore, c.byID = st, true, id
			return c, nil
		}
	}
	if err := c.openByName(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// openByName opens the collection by its name, waiting out back-pressure.
func (c *Collection[S]) openByName(ctx context.Context) error {
	start := time.Now()
	var st S
	err := chroma.WhileBusy(ctx, func() (err error) { st, err = c.cfg.Open.Open(ctx); return err })
	if err != nil {
		return err
	}
	c.store, c.hasStore, c.byID, c.opened = st, true, "", time.Since(start)
	return nil
}

// Store is the opened collection: one store for the collection's life
// (a store opened by a forgotten id is reopened by name in place).
func (c *Collection[S]) Store() S {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.store
}

// Address is the collection's name.
func (c *Collection[S]) Address() Address { return c.cfg.Address }

// Close closes the store.
func (c *Collection[S]) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.hasStore {
		return nil
	}
	c.hasStore = false
	return c.store.Close()
}

// confirm is the first successful load of c, by v: when the store was
// opened by a remembered id the server no longer knows, it opens the
// collection by name (in place: see reopen) and loads again. c.mu is
// held.
func (c *Collection[S]) confirm(ctx context.Context, v *View[S]) (treeload.Result, error) {
	res, err := v.load(ctx, c.store, false)
	if err != nil && c.byID != "" && !cannotAsk(ctx, err) {
		c.log.Debug("remembered collection id not usable; opening by name", "id", c.byID, "err", err)
		v.trees.discard()
		if err := c.reopen(ctx); err != nil {
			return treeload.Result{}, err
		}
		res, err = v.load(ctx, c.store, false)
	}
	if err != nil {
		return res, err
	}
	c.settled()
	return res, nil
}

// reopen opens the collection of a store opened by a remembered id by
// its name instead, in place (Store.Reopen): whatever already reads
// through the store (a mount serving a remembered tree, View.Remembered)
// reads the collection the name names now. c.mu is held.
func (c *Collection[S]) reopen(ctx context.Context) error {
	start := time.Now()
	if err := chroma.WhileBusy(ctx, func() error { return c.store.Reopen(ctx) }); err != nil {
		return err
	}
	c.byID, c.opened = "", time.Since(start)
	return nil
}

// settled records that the store is final: a load succeeded, or a poll
// of a store opened by a remembered id was answered. A store opened by
// name has its id remembered for the next run, by the next View.Take or
// Flush (keepID), not here on the load's path: a process that stops
// before either (a mount that failed after its load, a daemon stopped
// before it wrote what a view kept) leaves the next run to open the
// collection by name again. c.mu is held.
func (c *Collection[S]) settled() {
	if c.byID == "" && c.cfg.Host != nil {
		id := c.store.ID()
		c.keepID.Store(&id)
	}
	c.confirmed = true
}

// takeID hands over the id settled kept for the host tier, and the ref
// it goes under ("" when there is none).
func (c *Collection[S]) takeID() (ref, id string) {
	if p := c.keepID.Swap(nil); p != nil {
		return c.cfg.Address.idRef(), *p
	}
	return "", ""
}

// settle is a poll's part in confirming the store while no load has
// (View.Remembered served the tree a host tier remembered): err is what
// asking the stored tree's header by the remembered id answered. When
// the server does not know the id, the collection is opened by name in
// place and retry reports that the header must be asked again; an answer
// confirms the store.
func (c *Collection[S]) settle(ctx context.Context, err error) (retry bool, _ error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.confirmed {
		return false, nil
	}
	if err != nil && !errors.Is(err, chroma.ErrNoTree) {
		if c.byID == "" || cannotAsk(ctx, err) {
			return false, nil
		}
		c.log.Info("remembered collection id not usable; opening by name and loading its tree", "id", c.byID, "err", err)
		if err := c.reopen(ctx); err != nil {
			return false, err
		}
		c.reopened = true
		return true, nil
	}
	// ErrNoTree is an answer about the collection of that id (a by-id get
	// of an id the server does not know fails with ErrNotFound): the id
	// is confirmed, and the load that follows scans or fails as for any
	// collection without a tree
	c.settled()
	return false, nil
}

// reloadMark is added to a poll's stamp while c.reopened: the refresher
// then loads the tree, whatever its version, under the new identity.
const reloadMark = "+reopened"

// stampMark returns the mark a poll's stamp carries (see reopened).
func (c *Collection[S]) stampMark() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reopened {
		return reloadMark
	}
	return ""
}

// loadedAgain ends what reopened asked for: a View.Latest succeeded.
func (c *Collection[S]) loadedAgain() {
	c.mu.Lock()
	c.reopened = false
	c.mu.Unlock()
}

// cannotAsk reports whether err says the server could not be asked
// (rather than that it does not know the collection's id).
func cannotAsk(ctx context.Context, err error) bool {
	return chroma.Retryable(err) || errors.Is(err, chroma.ErrUnauthorized) || ctx.Err() != nil
}

// Stamp is a refresh poll: the tree's stamp; for a scanned collection,
// its record count; for a tree chromafs-ingest index wrote, its stamp
// and, once the collection holds another number of records than the
// index recorded, that number too (the other tool added or removed
// records). View.Load and View.Latest return the stamp this then gives.
//
// While no load has confirmed the store (View.Remembered), the poll
// confirms it: when the server no longer knows the remembered id, the
// collection is opened by name in place (see settle) and its header asked;
// from then until a View.Latest has loaded the tree again, the stamp
// carries a mark, so that the refresher loads it (under the collection's
// new identity) even when its version is the one served.
func (c *Collection[S]) Stamp(ctx context.Context) (string, error) {
	stamp, err := c.stamp(ctx)
	if err != nil {
		return stamp, err
	}
	return stamp + c.stampMark(), nil
}

// stamp is Stamp without the mark of a reopened store.
func (c *Collection[S]) stamp(ctx context.Context) (string, error) {
	st := c.Store()
	asked := time.Now()
	info, err := st.TreeInfo(ctx)
	if retry, serr := c.settle(ctx, err); serr != nil {
		return "", serr
	} else if retry {
		asked = time.Now()
		info, err = st.TreeInfo(ctx)
		if _, serr := c.settle(ctx, err); serr != nil {
			return "", serr
		}
	}
	switch {
	case err == nil:
		c.checked(info.Stamp, asked)
	case errors.Is(err, chroma.ErrNoTree):
		c.checked("", asked)
	}
	if errors.Is(err, chroma.ErrNoTree) && c.cfg.Layout.Scans() {
		n, cerr := st.Count(ctx)
		return treeload.ScanStamp(n), cerr
	}
	if err != nil || info.IndexRecords < 0 || !c.cfg.Layout.Scans() {
		return info.Stamp, err
	}
	n, err := st.Count(ctx)
	return indexStamp(info, n), err
}

// indexStamp is the stamp of an index tree in a collection of n records.
func indexStamp(info chroma.TreeInfo, n int) string {
	if n == info.IndexRecords {
		return info.Stamp
	}
	return info.Stamp + "+" + treeload.ScanStamp(n)
}

// staleIndex reports whether the collection's tree is an index that no
// longer counts the collection's records (n), with the tree's header.
func (c *Collection[S]) staleIndex(ctx context.Context, st S) (info chroma.TreeInfo, n int, stale bool) {
	if !c.cfg.Layout.Scans() {
		return info, 0, false
	}
	info, err := st.TreeInfo(ctx)
	if err != nil || info.IndexRecords < 0 {
		return info, 0, false // not an index (or an error the load will meet)
	}
	n, err = st.Count(ctx)
	return info, n, err == nil && n != info.IndexRecords
}
