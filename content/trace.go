package content

import (
	"context"
	"sync/atomic"

	"github.com/chromafs/chromafs/tree"
)

// Tier names where the bytes of a read came from, nearest first; a read
// that spans several chunks reports the farthest one it needed.
type Tier int32

// The tiers, in order.
const (
	TierNone   Tier = iota // nothing was read (end of file, empty file)
	TierMemory             // the memory cache
	TierShared             // a load already in flight (prefetch, another reader)
	TierHost               // the host tier on disk
	TierRemote             // the remote tier (Redis)
	TierURI                // the URL of a lazy pointer
	TierSource             // the source (Chroma)
)

var tierNames = [...]string{"none", "memory", "shared", "host", "remote", "uri", "chroma"}

func (t Tier) String() string {
	if t < 0 || int(t) >= len(tierNames) {
		return "unknown"
	}
	return tierNames[t]
}

// trace collects the farthest tier one read needed. Loads may note into it
// after the reader left (a flight outlives an interrupted reader), hence
// the atomic.
type trace struct{ tier atomic.Int32 }

func (tr *trace) note(t Tier) {
	if tr == nil {
		return
	}
	for {
		cur := tr.tier.Load()
		if Tier(cur) >= t || tr.tier.CompareAndSwap(cur, int32(t)) {
			return
		}
	}
}

type traceKey struct{}

func withTrace(ctx context.Context, tr *trace) context.Context {
	if tr == nil {
		return ctx
	}
	return context.WithValue(ctx, traceKey{}, tr)
}

func traceFrom(ctx context.Context) *trace {
	tr, _ := ctx.Value(traceKey{}).(*trace)
	return tr
}

// ReadAtFrom is ReadAt that also names the farthest tier the bytes came
// from (Tier.String: memory, shared, host, remote, uri, chroma; none at
// end of file), for the access log.
func (e *Engine) ReadAtFrom(ctx context.Context, fl *tree.File, dest []byte, off int64) (int, string, error) {
	tr := &trace{}
	n, err := e.ReadAt(withTrace(ctx, tr), fl, dest, off)
	return n, Tier(tr.tier.Load()).String(), err
}
