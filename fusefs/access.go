package fusefs

import (
	"context"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/accesslog"
	"github.com/chromafs/chromafs/tree"
)

// access logs one operation, when the mount keeps an access log: the
// caller comes from the request's header (pid, uid).
func (f *FS) access(ctx context.Context, e accesslog.Event, start time.Time, errno syscall.Errno) {
	if f.cfg.Access == nil {
		return
	}
	e.Time, e.Micros = start, time.Since(start).Microseconds()
	if caller, ok := fuse.FromContext(ctx); ok {
		e.PID, e.UID = caller.Pid, caller.Uid
	}
	if errno != 0 {
		e.Error = errno.Error()
	}
	f.cfg.Access.Write(e)
}

// logging reports whether operations are logged (so that handlers build
// an event only then).
func (f *FS) logging() bool { return f.cfg.Access != nil }

// childPath is the path of name in directory n.
func childPath(n *tree.Node, name string) string {
	if p := n.Path(); p != "" {
		return p + "/" + name
	}
	return name
}

func int64p(v int64) *int64 { return &v }
