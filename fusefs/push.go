package fusefs

import (
	"bytes"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/chromafs/chromafs/tree"
)

// pusher hands whole pages to the kernel's page cache with FUSE's
// notify-store (go-fuse's Inode.WriteCache), so that the first read of a
// page that was prefetched is answered by the kernel without a request
// crossing FUSE: a grep -r of a warmed mount then runs at page-cache speed.
//
// A page is pushed when both are true, whichever happens last: the kernel
// knows its inode (a LOOKUP or READDIRPLUS created the node: Lookup calls
// known) and the page is whole in the read engine's memory (a prefetch
// batch loaded it: Loaded). It is pushed once per inode lifetime, and not
// at all once the kernel read it itself (fileNode.cached).
//
// The traps of notifications, and what this does about them:
//   - A notify-store locks the page-cache pages it fills; a READ of those
//     pages in flight holds their lock until its reply. Pushes are
//     therefore sent from one goroutine of their own that no handler ever
//     waits for, never from a handler and never under a lock.
//   - The kernel may not know the inode yet: Lookup runs before its reply
//     reaches the kernel. A push waits until settle has passed since the
//     lookup, and is tried once more after an ENOENT while the node is
//     still known. An inode the kernel forgot answers ENOENT too: counted,
//     not an error. Node ids are never reused by go-fuse (a 64-bit
//     counter), so a push can never land on another file.
//   - A push must not block reads: the queue is bounded and a page that
//     does not fit is dropped (the kernel then asks for it with READ, as
//     without pushes).
//
// The bytes pushed are the engine's verified cache entries, exactly what a
// READ would answer; the inode's size is the page's, so the kernel marks
// the last page up to date too.
type pusher struct {
	queue chan *fileNode
	known nodeMap[pageID, *fileNode] // the file nodes the kernel knows, by page version
	rd    Reader
	// lastOp is the unix nanoseconds of the last request the mount served
	// (FS.busy sets it).
	lastOp *atomic.Int64
	done   chan struct{}
	wg     sync.WaitGroup

	pushed, dropped, refused atomic.Int64
}

// maxPush is the most one notification carries; longer pages are sent in
// pieces (page-aligned: 1 MiB is a multiple of every page size).
const maxPush = 1 << 20

// settle is how long after a lookup a push waits for the kernel to have
// taken in the lookup's reply; quiet is how long the mount must have been
// idle (no lookup, listing or read) before a push is sent.
const (
	settle = 5 * time.Millisecond
	quiet  = 10 * time.Millisecond
)

func newPusher(rd Reader, depth int, lastOp *atomic.Int64) *pusher {
	p := &pusher{queue: make(chan *fileNode, depth), rd: rd, lastOp: lastOp, done: make(chan struct{})}
	p.wg.Add(1)
	go p.run()
	return p
}

// close stops the goroutine; pages still queued are dropped.
func (p *pusher) close() {
	close(p.done)
	p.wg.Wait()
}

// knownNode is told that the kernel knows n: its page is pushed if the
// engine already holds it.
func (p *pusher) knownNode(n *fileNode) {
	n.knownAt.Store(time.Now().UnixNano())
	p.known.Store(pageKey(n.node().File), n)
	if _, ok := p.rd.Resident(n.node().File); ok {
		p.enqueue(n)
	}
}

// forgotten is told that the kernel forgot n.
func (p *pusher) forgotten(n *fileNode) { p.known.CompareAndDelete(pageKey(n.node().File), n) }

// pageID names a page version: the same for the nodes of an unchanged
// page in two tree versions.
type pageID struct{ version, slug string }

func pageKey(fl *tree.File) pageID { return pageID{fl.Version, fl.Slug} }

// loaded is told that the engine holds fl whole; the goroutine takes its
// bytes from the engine (Resident) when it gets to the page.
func (p *pusher) loaded(fl *tree.File) {
	if n, ok := p.known.Load(pageKey(fl)); ok {
		p.enqueue(n)
	}
}

func (p *pusher) enqueue(n *fileNode) {
	if n.cached.Load() {
		return
	}
	select {
	case p.queue <- n:
	default:
		p.dropped.Add(1)
	}
}

func (p *pusher) run() {
	defer p.wg.Done()
	for {
		select {
		case <-p.done:
			return
		case n := <-p.queue:
			p.push(n)
		}
	}
}

// push sends n's page to the kernel, unless the kernel has it already or
// the engine no longer holds it.
func (p *pusher) push(n *fileNode) {
	if n.cached.Load() {
		return
	}
	chunks, ok := p.rd.Resident(n.node().File)
	if !ok {
		return
	}
	p.wait(n)
	data := bytes.Join(chunks, nil)
	errno := p.write(n, data)
	if errno == syscall.ENOENT && p.isKnown(n) {
		n.knownAt.Store(time.Now().UnixNano()) // once more, after settle
		p.wait(n)
		errno = p.write(n, data)
	}
	if errno != 0 {
		p.refused.Add(1) // forgotten, or a kernel without notify-store: nothing cached, nothing wrong served
		return
	}
	n.cached.Store(true)
	p.pushed.Add(1)
}

// wait lets settle pass since n was looked up, and quiet pass since the
// mount last served a request, unless the pusher closes: pushes use the
// time between an agent's commands, never compete with a walk or a read
// in progress (on two cores they slowed a cold find twofold).
func (p *pusher) wait(n *fileNode) {
	for {
		now := time.Now().UnixNano()
		d := max(settle-time.Duration(now-n.knownAt.Load()), quiet-time.Duration(now-p.lastOp.Load()))
		if d <= 0 {
			return
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-p.done:
			t.Stop()
			return
		}
	}
}

func (p *pusher) isKnown(n *fileNode) bool {
	v, ok := p.known.Load(pageKey(n.node().File))
	return ok && v == n
}

// write stores data as n's content from offset 0, in pieces.
func (p *pusher) write(n *fileNode, data []byte) syscall.Errno {
	for off := 0; off < len(data); off += maxPush {
		if errno := n.WriteCache(int64(off), data[off:min(off+maxPush, len(data))]); errno != 0 {
			return errno
		}
	}
	return 0
}

// stats returns a snapshot of the counters.
func (p *pusher) stats() PushStats {
	return PushStats{Pushed: p.pushed.Load(), Dropped: p.dropped.Load(), Refused: p.refused.Load()}
}

// PushStats are the pusher's counters.
type PushStats struct {
	Pushed  int64 // pages handed to the kernel's page cache
	Dropped int64 // pages not pushed because the queue was full
	Refused int64 // pushes the kernel refused (mostly: inode forgotten)
}
