package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/chromafs/chromafs/accesslog"
	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/content"
	"github.com/chromafs/chromafs/fusefs"
	"github.com/chromafs/chromafs/hostcache"
	"github.com/chromafs/chromafs/refresh"
	"github.com/chromafs/chromafs/tree"
	"github.com/chromafs/chromafs/treeload"
)

// newRefresher wires live refresh: polls of the tree stamp every
// --refresh, loads through the same path as the mount (groups, limits,
// host-tier tree cache), and swaps into the file system and the engine.
func newRefresher(o *options, store *chroma.Store, host *hostcache.Cache, tc *treeCache, fsys *fusefs.FS, engine *content.Engine, loaded treeload.Result, access *accesslog.Log) *refresh.Refresher {
	return refresh.New(refresh.Config{
		Interval: o.refresh,
		Timeout:  4 * o.conn.Timeout,
		Stamp:    func(ctx context.Context) (string, error) { return stampNow(ctx, o, store) },
		Load: func(ctx context.Context) (treeload.Result, error) {
			res, err := loadLatest(ctx, o, store, host, tc)
			if err != nil {
				tc.discard() // nothing is swapped in: nothing to keep
			}
			return res, err
		},
		Apply: func(t *tree.Tree) int {
			start := time.Now()
			engine.SetTree(t)
			st := fsys.Swap(t)
			access.Write(accesslog.Event{Time: start, Op: "refresh", Micros: time.Since(start).Microseconds(),
				Detail: fmt.Sprintf("tree %.12s: %d files, %d names and %d inodes invalidated", t.Version, t.Files, st.Entries, st.Inodes)})
			return st.Entries + st.Inodes
		},
		Applied: tc.flush, // the tree and its snapshot to the host tier, once the mount shows it
		Log:     logger,
	}, loaded.Tree, loaded.Stamp)
}

// stampNow is a refresh poll: the tree's stamp; for a scanned collection,
// its record count; for a tree chromafs-ingest index wrote, its stamp and,
// once the collection holds another number of records than the index
// recorded, that number too (the other tool added or removed records).
func stampNow(ctx context.Context, o *options, store *chroma.Store) (string, error) {
	info, err := store.TreeInfo(ctx)
	if errors.Is(err, chroma.ErrNoTree) && o.layout.Scans() {
		n, cerr := store.Count(ctx)
		return treeload.ScanStamp(n), cerr
	}
	if err != nil || info.IndexRecords < 0 || !o.layout.Scans() {
		return info.Stamp, err
	}
	n, err := store.Count(ctx)
	return indexStamp(info, n), err
}

// indexStamp is the stamp of an index tree in a collection of n records.
func indexStamp(info chroma.TreeInfo, n int) string {
	if n == info.IndexRecords {
		return info.Stamp
	}
	return info.Stamp + "+" + treeload.ScanStamp(n)
}

// loadLatest is loadVisible for a refresh: an index older than its
// collection's records gives way to a scan of them (within --scan-limit;
// past it the index is served and a warning says to re-run index).
func loadLatest(ctx context.Context, o *options, store *chroma.Store, host *hostcache.Cache, tc *treeCache) (treeload.Result, error) {
	info, n, stale := staleIndex(ctx, o, store)
	if !stale {
		return loadVisible(ctx, o, store, host, tc)
	}
	scanned, rep, err := treeload.Scanned(ctx, store, o.layout, o.scanLimit, o.groupList(), tree.DefaultLimits)
	if errors.Is(err, treeload.ErrTooBig) {
		res, err := loadVisible(ctx, o, store, host, tc)
		if err == nil {
			logger.Warn("the collection's index is out of date: serving it as it is; re-run chromafs-ingest index",
				"indexed_records", info.IndexRecords, "records", n, "scan_limit", o.scanLimit)
			res.Stamp = indexStamp(info, n)
		}
		return res, err
	}
	if err != nil {
		return scanned, err
	}
	logger.Warn("the collection's index is out of date: serving its records as scanned now; re-run chromafs-ingest index",
		"indexed_records", info.IndexRecords, "records", n, "files", rep.Files, "not_exact", len(rep.Marked))
	scanned.Stamp = indexStamp(info, n)
	return scanned, nil
}

// staleIndex reports whether the collection's tree is an index that no
// longer counts the collection's records (n), with the tree's header.
func staleIndex(ctx context.Context, o *options, store *chroma.Store) (info chroma.TreeInfo, n int, stale bool) {
	if !o.layout.Scans() {
		return info, 0, false
	}
	info, err := store.TreeInfo(ctx)
	if err != nil || info.IndexRecords < 0 {
		return info, 0, false // not an index (or an error the load will meet)
	}
	n, err = store.Count(ctx)
	return info, n, err == nil && n != info.IndexRecords
}

// refreshOnSIGHUP asks for a refresh at every SIGHUP until stop closes.
func refreshOnSIGHUP(hups <-chan os.Signal, stop <-chan struct{}, r *refresh.Refresher) {
	for {
		select {
		case <-hups:
			logger.Info("SIGHUP: checking the tree now")
			r.Trigger()
		case <-stop:
			return
		}
	}
}
