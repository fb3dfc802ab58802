package view

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/foreign"
	"github.com/chromafs/chromafs/refresh"
	"github.com/chromafs/chromafs/tree"
	"github.com/chromafs/chromafs/treeload"
)

// View is a collection's tree as a set of groups sees it; see the package
// doc.
type View[S Store] struct {
	c      *Collection[S]
	groups []string
	trees  *treeCache
}

// View returns the view of c for groups (a file is visible when it is
// public or its groups intersect these).
func (c *Collection[S]) View(groups []string) *View[S] {
	return &View[S]{c: c, groups: groups, trees: &treeCache{host: c.cfg.Host, view: treeload.View(groups, c.cfg.Limits)}}
}

// Collection is the collection v views.
func (v *View[S]) Collection() *Collection[S] { return v.c }

// Load loads v's tree: from a snapshot, the host tier, Chroma or a scan
// (see the package doc), and logs what it cost and the tree's warnings.
// The first load of a collection confirms how it was opened. A load of a
// new view of a loaded collection serves the version it holds decoded
// without asking, while Config.Fresh trusts it.
func (v *View[S]) Load(ctx context.Context) (treeload.Result, error) {
	c := v.c
	c.mu.Lock()
	if c.confirmed {
		st := c.store
		c.mu.Unlock()
		res, err := v.load(ctx, st, true)
		return v.served(v.report(res, 0), err)
	}
	defer c.mu.Unlock()
	res, err := c.confirm(ctx, v)
	return v.served(v.report(res, c.opened), err)
}

// Remembered is the warm start of a process serving v (issue 31): the
// tree of the version v served last on this host, from the host tier's
// snapshot of it, with no request, while the collection is opened by the
// id the host tier remembers and nothing has confirmed it; ok is false
// otherwise (no host tier, nothing remembered, a layout with a groups key,
// whose check of an index needs the tree's header, or the collection
// already confirmed: Load it). The version is not checked: the caller
// serves it and polls at once (a Refresher with refresh.Config.Unchecked),
// and the poll confirms the collection (Collection.Stamp: a collection the
// server no longer knows by that id is opened by name in place) and swaps
// in the current version if it is another. Until then a conversation sees
// what it saw last on this host, as between two polls.
func (v *View[S]) Remembered() (treeload.Result, bool) {
	c := v.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cfg.Host == nil || c.confirmed || c.byID == "" || c.cfg.Layout.GroupsKey != "" {
		return treeload.Result{}, false
	}
	v.trees.forStore(c.store)
	stamp, ok := v.trees.lastServed()
	if !ok {
		return treeload.Result{}, false
	}
	res, ok := treeload.FromSnapshot(v.trees, stamp, v.groups, c.cfg.Limits)
	if ok {
		c.log.Debug("serving the version this host served last; checking it in the background", "stamp", stamp)
	}
	return res, ok
}

// LoadRemembered is Remembered when it answers (remembered is true: the
// caller's refresher checks it at once, refresh.Config.Unchecked), else
// Load.
func (v *View[S]) LoadRemembered(ctx context.Context) (res treeload.Result, remembered bool, err error) {
	if res, remembered = v.Remembered(); remembered {
		return res, true, nil
	}
	res, err = v.Load(ctx)
	return res, false, err
}

// served tells the tree cache the stamp of a tree v serves, once loaded.
func (v *View[S]) served(res treeload.Result, err error) (treeload.Result, error) {
	if err == nil {
		v.trees.serve(res.Stamp)
	}
	return res, err
}

// Latest is Load for a refresh: an index older than its collection's
// records gives way to a scan of them, under the groups key the index
// was written with (and the view's, when it has another), within the scan
// limit; past it, or when the index does not record its groups key (an
// older chromafs-ingest wrote it), the index is served as Load serves it
// and a warning says to re-run index. Its stamp is the one
// Collection.Stamp gives for what it loaded.
func (v *View[S]) Latest(ctx context.Context) (treeload.Result, error) {
	res, err := v.latest(ctx)
	if err == nil {
		v.c.loadedAgain()
	}
	return res, err
}

func (v *View[S]) latest(ctx context.Context) (treeload.Result, error) {
	c := v.c
	st := c.Store()
	info, n, stale := c.staleIndex(ctx, st)
	if !stale {
		return v.load(ctx, st, false)
	}
	if !info.IndexGroupsKeyKnown {
		// its entries carry the groups it was written with; a scan would
		// read records' groups under a key that may not be the one
		res, err := v.load(ctx, st, false)
		if err == nil {
			c.log.Warn("the collection's index is out of date, and its --groups-key is not recorded (an older chromafs-ingest wrote it): serving it as it is, not its records; re-run chromafs-ingest index",
				"indexed_records", info.IndexRecords, "records", n)
			res.Stamp = indexStamp(info, n)
		}
		return res, err
	}
	scanned, rep, err := treeload.Scanned(ctx, st, c.cfg.Layout, c.cfg.ScanLimit, v.groups, c.cfg.Limits, info.IndexGroupsKey)
	if errors.Is(err, treeload.ErrTooBig) {
		res, err := v.load(ctx, st, false)
		if err == nil {
			c.log.Warn("the collection's index is out of date: serving it as it is; re-run chromafs-ingest index",
				"indexed_records", info.IndexRecords, "records", n, "scan_limit", c.cfg.ScanLimit)
			res.Stamp = indexStamp(info, n)
		}
		return res, err
	}
	if err != nil {
		return scanned, err
	}
	c.log.Warn("the collection's index is out of date: serving its records as scanned now; re-run chromafs-ingest index",
		"indexed_records", info.IndexRecords, "records", n, "files", rep.Files, "not_exact", len(rep.Marked),
		"groups_keys", strings.Join(treeload.GroupsKeys(c.cfg.Layout.GroupsKey, info.IndexGroupsKey), ","))
	c.logWarnings(rep)
	scanned.Stamp = indexStamp(info, n)
	return scanned, nil
}

// Refresher returns a refresh.Refresher following v, which serves
// loaded: cfg's Stamp, Load, Applied and Log are v's (Collection.Stamp;
// Latest, forgetting what it kept when it fails; Flush, then cfg's
// Applied if set), its Interval, Timeout and Apply the caller's.
func (v *View[S]) Refresher(cfg refresh.Config, loaded treeload.Result) *refresh.Refresher {
	applied := cfg.Applied
	cfg.Stamp = v.c.Stamp
	cfg.Load = func(ctx context.Context) (treeload.Result, error) {
		res, err := v.Latest(ctx)
		if err != nil {
			v.trees.discard() // nothing is swapped in: nothing to keep
		}
		return v.served(res, err)
	}
	cfg.Applied = func() {
		v.Flush()
		if applied != nil {
			applied()
		}
	}
	cfg.Log = v.c.log
	return refresh.New(cfg, loaded.Tree, loaded.Stamp)
}

// Flush writes what the last load fetched or built (the stored tree's
// text, the view's snapshot, the collection's id when it was opened by
// name) to the host tier: once the tree is served, never while mounting.
func (v *View[S]) Flush() { v.Take().Write() }

// Take is Flush in two steps: it hands over what Flush would write (at
// once: the caller may hold a lock), for the caller to Write when it
// will (compressing and writing a large tree takes milliseconds).
func (v *View[S]) Take() Kept {
	k := v.trees.take()
	if k.c != nil {
		k.idRef, k.id = v.c.takeID()
	}
	return k
}

// load loads st's tree as v sees it (its groups, the collection's
// limits), through the host tier's tree cache; a collection without a
// tree is scanned when the layout allows it. With trustFresh (a new
// view's Load, not a refresh), a decoded tree confirmed within
// Config.Fresh is served without asking its stamp (layouts without a
// groups key, whose check needs the tree's header). Under a groups key of the
// layout's, an index written with another (or without recording one) is
// not served as it is (see indexAsIs and rescan).
func (v *View[S]) load(ctx context.Context, st S, trustFresh bool) (treeload.Result, error) {
	c := v.c
	name := c.cfg.Address.Collection
	var res treeload.Result
	var err error
	if c.cfg.Layout.GroupsKey == "" {
		var header *chroma.TreeInfo
		if stamp, ok := c.freshStamp(); ok && trustFresh {
			header = &chroma.TreeInfo{Stamp: stamp, IndexRecords: -1}
		}
		res, err = v.loadTree(ctx, st, header)
	} else {
		res, err = v.loadChecked(ctx, st)
	}
	if !errors.Is(err, chroma.ErrNoTree) || !c.cfg.Layout.Scans() {
		return res, err
	}
	res, rep, err := treeload.Scanned(ctx, st, c.cfg.Layout, c.cfg.ScanLimit, v.groups, c.cfg.Limits)
	if err != nil {
		return res, fmt.Errorf("collection %q has no path tree, and scanning it failed: %w", name, err)
	}
	c.log.Info("no path tree: scanned the collection's records", "records", rep.Records, "files", rep.Files,
		"without_path", rep.Skipped, "not_exact", len(rep.Marked), "offsets", rep.Offsets.String())
	if w := rep.Offsets.Warning(); w != "" {
		c.log.Warn(w)
	}
	c.logWarnings(rep)
	return res, nil
}

// loadChecked is loadTree for a layout with a groups key: the tree's
// header says first whether the tree is an index that may be served as it
// is (indexAsIs), else it is rescanned. The tree loaded must be the
// version the header named (an index written again in between may record
// another key): else it is checked again.
func (v *View[S]) loadChecked(ctx context.Context, st S) (treeload.Result, error) {
	for attempt := 0; ; attempt++ {
		var info chroma.TreeInfo
		if err := chroma.WhileBusy(ctx, func() (err error) { info, err = st.TreeInfo(ctx); return err }); err != nil {
			return treeload.Result{}, err
		}
		if !v.c.indexAsIs(info) {
			return v.rescan(ctx, st, info)
		}
		res, err := v.loadTree(ctx, st, &info)
		if err != nil || res.Stamp == info.Stamp {
			return res, err
		}
		if attempt == 2 {
			return treeload.Result{}, fmt.Errorf("collection %q: the path tree changed three times while it was loaded: %w", v.c.cfg.Address.Collection, chroma.ErrBadTree)
		}
	}
}

// ErrIndexGroupsKey is wrapped by the error of a load that cannot serve an
// index because it was written with another key of records' access groups
// than the view's layout names (or without recording which), and the
// records cannot be scanned under both instead.
var ErrIndexGroupsKey = errors.New("the index was written with another groups key")

// indexAsIs reports whether the entries of the tree info describes may be
// served as they are, with the groups they carry: it is not an index
// chromafs-ingest index wrote (the groups are the tree's own), or the
// view's layout names no groups key (the index's are the only ones), or
// the index records that it was written with the layout's. Otherwise
// the index's groups were read under another key, or one it does not
// record: served as they are, they could show a view what the operator's
// key hides.
func (c *Collection[S]) indexAsIs(info chroma.TreeInfo) bool {
	key := c.cfg.Layout.GroupsKey
	return info.IndexRecords < 0 || key == "" || info.IndexGroupsKeyKnown && info.IndexGroupsKey == key
}

// rescan serves an index whose groups are not the view's layout's key's
// (see indexAsIs) the way that fails closed: its records scanned under
// both keys, the layout's and the one the index recorded (a record is
// restricted by each: a mismatch hides, never reveals), within the scan
// limit. An index that does not record its key, a layout that does not
// scan, or a collection past the scan limit is an error wrapping
// ErrIndexGroupsKey that names both keys and the command that fixes it.
// The stamp is the one Collection.Stamp gives.
func (v *View[S]) rescan(ctx context.Context, st S, info chroma.TreeInfo) (treeload.Result, error) {
	c := v.c
	name, key := c.cfg.Address.Collection, c.cfg.Layout.GroupsKey
	written := "without recording its --groups-key (an older chromafs-ingest)"
	if info.IndexGroupsKeyKnown && info.IndexGroupsKey == "" {
		written = "without --groups-key"
	} else if info.IndexGroupsKeyKnown {
		written = fmt.Sprintf("with --groups-key %q", info.IndexGroupsKey)
	}
	refuse := func(why string) error {
		return fmt.Errorf("collection %q: %w: its index was written %s, this view reads records' groups under %q, and %s: run chromafs-ingest index --collection %s --groups-key %s",
			name, ErrIndexGroupsKey, written, key, why, name, key)
	}
	switch {
	case !info.IndexGroupsKeyKnown:
		return treeload.Result{}, refuse("its entries cannot be checked against that key")
	case !c.cfg.Layout.Scans():
		return treeload.Result{}, refuse(fmt.Sprintf("layout %s does not scan the records", c.cfg.Layout.Name))
	}
	res, rep, err := treeload.Scanned(ctx, st, c.cfg.Layout, c.cfg.ScanLimit, v.groups, c.cfg.Limits, info.IndexGroupsKey)
	if errors.Is(err, treeload.ErrTooBig) {
		return res, refuse(fmt.Sprintf("its records are too many to scan under both keys instead (past the scan limit, %d)", c.cfg.ScanLimit))
	}
	if err != nil {
		return res, fmt.Errorf("collection %q: scanning the records of an index written %s under %q: %w", name, written, key, err)
	}
	c.log.Warn("the collection's index was written with another groups key than this view's: serving its records as scanned now, under both keys; re-run chromafs-ingest index with the view's key",
		"index_groups_key", info.IndexGroupsKey, "groups_key", key, "records", res.Records, "files", rep.Files)
	c.logWarnings(rep)
	res.Stamp = indexStamp(info, res.Records)
	return res, nil
}

// logWarnings logs a scan's warnings (reassembly's, and records of one
// file that disagree on their groups), at most maxLoggedWarnings.
func (c *Collection[S]) logWarnings(rep foreign.Report) {
	for i, w := range rep.Warnings {
		if i == maxLoggedWarnings {
			c.log.Warn("scan: more warnings not shown", "count", len(rep.Warnings)-i)
			break
		}
		c.log.Warn("scan: " + w)
	}
}

// maxLoggedWarnings bounds the warnings a scan logs.
const maxLoggedWarnings = 20

// loadTree loads st's stored tree as v sees it: from v's snapshot when
// the host tier ever kept one (treeload.Load); else built from the
// collection's decoded document when the tree's header (header, when the
// caller has just read it or trusts the collection's confirmed version,
// Config.Fresh; else one small request) says it is still the current
// version; else fetched (through the host tier's tree cache) and
// decoded, the document kept for the next view. What it builds is kept
// for the host tier as v's snapshot.
func (v *View[S]) loadTree(ctx context.Context, st S, header *chroma.TreeInfo) (treeload.Result, error) {
	c := v.c
	name, lim := c.cfg.Address.Collection, c.cfg.Limits
	tc := v.trees.forStore(st)
	view := treeload.View(v.groups, lim)
	if tc != nil && v.trees.HasSnapshot(view) {
		if header != nil { // the snapshot's stamp is known: not asked again
			return treeload.Load(ctx, stamped{st, header.Stamp}, tc, name, v.groups, lim)
		}
		return treeload.Load(ctx, st, tc, name, v.groups, lim)
	}
	start := time.Now()
	doc, stamp, size, ok := c.decoded()
	if ok {
		var info chroma.TreeInfo
		if header != nil {
			info = *header
		} else {
			asked := time.Now()
			err := chroma.WhileBusy(ctx, func() (err error) { info, err = st.TreeInfo(ctx); return err })
			if errors.Is(err, chroma.ErrNoTree) {
				c.checked("", asked)
			}
			if err != nil {
				return treeload.Result{}, err
			}
			c.checked(info.Stamp, asked)
		}
		ok = info.Stamp == stamp
	}
	fetched := time.Now()
	if !ok {
		asked := fetched
		var raw []byte
		if err := chroma.WhileBusy(ctx, func() (err error) { raw, stamp, err = st.LoadTreeCached(ctx, tc); return err }); err != nil {
			return treeload.Result{}, err
		}
		fetched = time.Now()
		d, err := tree.Decode(raw, lim)
		if err != nil {
			return treeload.Result{}, fmt.Errorf("collection %q: %w", name, err)
		}
		doc, size = d, len(raw)
		c.keepDecoded(doc, stamp, size, asked)
	}
	// BuildVisible adds its warnings to the document: each build its own
	own := *doc
	own.Warnings = tree.Warnings{List: slices.Clone(doc.Warnings.List), Dropped: doc.Warnings.Dropped}
	t := tree.BuildVisible(&own, v.groups, lim)
	if tc != nil && stamp != "" {
		v.trees.KeepSnapshot(stamp, view, t)
	}
	return treeload.Result{Tree: t, Warnings: own.Warnings, Bytes: size, Stamp: stamp, Fetch: fetched.Sub(start), Build: time.Since(fetched)}, nil
}

// report logs what loading the tree cost and its warnings, and returns
// res.
func (v *View[S]) report(res treeload.Result, opened time.Duration) treeload.Result {
	if res.Tree == nil {
		return res
	}
	log := v.c.log
	log.Debug("tree loaded", "open", opened, "fetch", res.Fetch, "decode_build", res.Build, "bytes", res.Bytes)
	for _, w := range res.Warnings.List {
		log.Warn("path tree: " + w)
	}
	if res.Warnings.Dropped > 0 {
		log.Warn("path tree: more warnings not shown", "count", res.Warnings.Dropped)
	}
	return res
}

// Groups are the groups v was made for.
func (v *View[S]) Groups() []string { return v.groups }

// stamped is a tree source whose stamp its caller knows (the tree's
// header just read, or the collection's version it trusts): the snapshot
// path looks its snapshot up under it without asking the server again.
type stamped struct {
	treeload.Source
	stamp string
}

func (s stamped) TreeStamp(context.Context) (string, error) { return s.stamp, nil }
