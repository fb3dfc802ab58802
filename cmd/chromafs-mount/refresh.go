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
		Stamp: func(ctx context.Context) (string, error) {
			stamp, err := store.TreeStamp(ctx)
			if errors.Is(err, chroma.ErrNoTree) && o.layout.Scans() { // a scanned collection: its record count
				n, cerr := store.Count(ctx)
				return treeload.ScanStamp(n), cerr
			}
			return stamp, err
		},
		Load: func(ctx context.Context) (treeload.Result, error) {
			res, err := loadVisible(ctx, o, store, host, tc)
			tc.flush()
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
		Log: logger,
	}, loaded.Tree, loaded.Stamp)
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
