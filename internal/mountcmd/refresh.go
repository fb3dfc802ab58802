package mountcmd

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/chromafs/chromafs/accesslog"
	"github.com/chromafs/chromafs/refresh"
	"github.com/chromafs/chromafs/tree"
)

// newRefresher wires live refresh: polls of the collection's stamp every
// --refresh, loads of the mount's view (package view: the same path as
// the mount), swapped into the file system and the engine. A mount that
// serves the version its host served last polls at once, whatever
// --refresh is, until a poll answers.
func newRefresher(o *options, m *mounted) *refresh.Refresher {
	return m.view.Refresher(refresh.Config{
		Interval:  o.refresh,
		Unchecked: m.remembered,
		Timeout:   4 * o.conn.Timeout,
		Apply: func(t *tree.Tree) int {
			start := time.Now()
			m.engine.SetTree(t)
			st := m.fsys.Swap(t)
			m.access.Write(accesslog.Event{Time: start, Op: "refresh", Micros: time.Since(start).Microseconds(),
				Detail: fmt.Sprintf("tree %.12s: %d files, %d names and %d inodes invalidated", t.Version, t.Files, st.Entries, st.Inodes)})
			return st.Entries + st.Inodes
		},
	}, m.res)
}

// refreshOnSIGHUP asks for a refresh at every SIGHUP until stop closes.
func refreshOnSIGHUP(log *slog.Logger, hups <-chan os.Signal, stop <-chan struct{}, r *refresh.Refresher) {
	for {
		select {
		case <-hups:
			log.Info("SIGHUP: checking the tree now")
			r.Trigger()
		case <-stop:
			return
		}
	}
}
