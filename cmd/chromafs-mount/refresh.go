package main

import (
	"context"
	"os"

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
func newRefresher(o *options, store *chroma.Store, host *hostcache.Cache, tc *treeCache, fsys *fusefs.FS, engine *content.Engine, loaded treeload.Result) *refresh.Refresher {
	return refresh.New(refresh.Config{
		Interval: o.refresh,
		Timeout:  4 * o.conn.Timeout,
		Stamp:    store.TreeStamp,
		Load: func(ctx context.Context) (treeload.Result, error) {
			res, err := loadVisible(ctx, o, store, host, tc)
			tc.flush()
			return res, err
		},
		Apply: func(t *tree.Tree) int {
			engine.SetTree(t)
			st := fsys.Swap(t)
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
