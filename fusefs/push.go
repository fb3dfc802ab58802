package fusefs

import (
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/chromafs/chromafs/internal/idle"
	"github.com/chromafs/chromafs/tree"
)

// pusher hands whole pages to the kernel's page cache with FUSE's
// notify-store (go-fuse's Inode.WriteCache), so that the first read of a
// page that was prefetched is answered by the kernel without a request
// crossing FUSE: a grep -r of a warmed mount then runs at page-cache speed.
//
// Pages go two ways. The pusher's goroutine pushes a page when both are
// true, whichever happens last: the kernel knows its inode (a LOOKUP or
// READDIRPLUS created the node: Lookup calls known) and the page is whole
// in the read engine's memory (a prefetch batch loaded it: Loaded); it
// waits for the mount to be idle. And a listing under a directory being
// read hands the kernel the pages of the entries it already gave, in the
// handler of its next request, before a reader such as grep -r opens them
// (dirNode.pushListed). Either way a page is pushed once per inode
// lifetime, and not at all once the kernel read it itself
// (fileNode.cached).
//
// The traps of notifications, and what this does about them:
//   - A notify-store locks the page-cache pages it fills; a READ of those
//     pages in flight holds their lock until its reply. The pusher's
//     goroutine is one no handler ever waits for; a listing's push may
//     wait for such a READ, which another of go-fuse's readers answers
//     (one is always left reading), and no READ waits on a listing.
//     Neither pushes under a lock.
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
	bufs   sync.Pool // *[]byte of maxPush bytes (write)
	done   chan struct{}
	wg     sync.WaitGroup

	pushed, listed, dropped, refused atomic.Int64
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
	p.bufs.New = func() any { b := make([]byte, maxPush); return &b }
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
	if !n.pushing.CompareAndSwap(false, true) {
		return // a listing is pushing it
	}
	defer n.pushing.Store(false)
	if n.cached.Load() {
		return
	}
	errno := p.write(n, chunks)
	if errno == syscall.ENOENT && p.isKnown(n) {
		n.knownAt.Store(time.Now().UnixNano()) // once more, after settle
		p.wait(n)
		errno = p.write(n, chunks)
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
	idle.Until(p.done, func(now int64) time.Duration {
		return max(settle-time.Duration(now-n.knownAt.Load()), quiet-time.Duration(now-p.lastOp.Load()))
	})
}

func (p *pusher) isKnown(n *fileNode) bool {
	v, ok := p.known.Load(pageKey(n.node().File))
	return ok && v == n
}

// write stores the page of chunks as n's content from offset 0, in
// pieces of maxPush bytes: a page of one chunk as it is, others joined in
// one of the pusher's buffers (a buffer per push made the daemon's heap
// grow and the kernel's copy fault on fresh memory: pushes took 4x as
// long in the daemon as in a small process).
func (p *pusher) write(n *fileNode, chunks [][]byte) syscall.Errno {
	if len(chunks) == 1 && len(chunks[0]) <= maxPush {
		return n.WriteCache(0, chunks[0])
	}
	bp := p.bufs.Get().(*[]byte)
	defer p.bufs.Put(bp)
	return pieces(chunks, *bp, n.WriteCache)
}

// pieces hands emit the bytes of chunks in order, at most len(buf) at a
// time and at offsets that are multiples of it, joined in buf; it stops
// at emit's first error.
func pieces(chunks [][]byte, buf []byte, emit func(off int64, b []byte) syscall.Errno) syscall.Errno {
	size := len(buf)
	buf, off := buf[:0], int64(0)
	for _, c := range chunks {
		for len(c) > 0 {
			k := min(len(c), size-len(buf))
			buf, c = append(buf, c[:k]...), c[k:]
			if len(buf) == size {
				if errno := emit(off, buf); errno != 0 {
					return errno
				}
				buf, off = buf[:0], off+int64(size)
			}
		}
	}
	if len(buf) > 0 {
		return emit(off, buf)
	}
	return 0
}

// stats returns a snapshot of the counters.
func (p *pusher) stats() PushStats {
	return PushStats{Pushed: p.pushed.Load(), Listed: p.listed.Load(), Dropped: p.dropped.Load(), Refused: p.refused.Load()}
}

// PushStats are the pusher's counters.
type PushStats struct {
	Pushed  int64 // pages handed to the kernel's page cache once loaded
	Listed  int64 // pages handed to it by a listing (pushListed)
	Dropped int64 // pages not pushed because the queue was full
	Refused int64 // pushes the kernel refused (mostly: inode forgotten)
}

// listPushMax bounds the bytes one listing request hands to the kernel
// itself (pushListed); the rest go to the pusher's queue.
const listPushMax = 16 << 20

// pushListed hands the kernel, before answering a READDIR(PLUS) that
// continues a listing at position upTo, the pages of the files listed
// before it: the kernel took in those parts' entries (it asks for the next
// part only after linking the last one's), and a reader of the listing,
// such as grep -r, opens them next. A request answered one by one costs a
// round trip between processes (on the bench's 2-core VM ~0.1 ms, most
// of it waking the other side), a push only the copy: a new view's first
// grep -r then sends almost no READ for the pages the daemon holds, and
// takes well under the protocol's floor (0.64x in docs/BENCHMARKS.md).
//
// It is done only under a directory being scanned, in the last
// scanWindow: a file in it or its parent (or, after a listing, below
// them) was read through this mount, or a listing under it pushed
// (scanning, markRead). A find or ls -R that reads nothing pushes nothing
// (unless it follows a read within the window): its listings would
// otherwise wait for pages it never reads (a new mount's find of a
// 127 MiB tree took 30% longer). Only pages whole in the engine's memory
// are pushed (Resident: never a network wait in a handler), only to a
// kernel that asked for no READ of them yet (fileNode.cached), and never
// for directories past plusDirMax, whose later parts list names only.
//
// The push runs in the handler, so that it is done before the reader
// opens the first file: the pusher's goroutine, started at the same
// moment, lost that race once per directory. A notify-store waits for the
// page locks of a READ of the same file in flight; that READ is answered
// by another of go-fuse's readers (one is always left reading), and no
// READ handler waits on a listing, so the wait ends.
func (d *dirNode) pushListed(v *dirVersion, upTo int) {
	p := d.fsys.push
	n := v.n
	if p == nil || len(n.Children) > plusDirMax || !d.scanning(n) {
		return
	}
	// The walk reads what it lists, but its reads of pushed pages never
	// reach the mount: its listing moves the prefetch on instead.
	d.fsys.rd.Prefetch(n, nil)
	from := int(v.pushedTo.Load())
	if from >= upTo || !v.pushedTo.CompareAndSwap(int64(from), int64(upTo)) {
		return // pushed by an earlier request, or one in flight
	}
	budget := listPushMax
	for pos := max(from, 2); pos < upTo && pos-2 < len(n.Children); pos++ {
		c := n.Children[pos-2]
		if c.File == nil {
			continue
		}
		ch := d.GetChild(c.Name)
		if ch == nil {
			continue
		}
		if f, ok := ch.Operations().(*fileNode); ok && f.node().Ino == c.Ino {
			p.pushNow(f, &budget)
		}
	}
}

// scanWindow is how long a sign of a reader walking a directory lasts: a
// grep -r gives one every few milliseconds (each listing it makes under
// it), an agent's next command comes seconds later, so that a find after
// a cat pushes nothing.
const scanWindow = time.Second

// scanning reports whether d's listing pushes its files (see pushListed):
// its own mark, or its parent's, is recent. A listing that pushes renews
// the marks of d and its ancestors, so that a walk going on through them
// keeps pushing.
func (d *dirNode) scanning(n *tree.Node) bool {
	now := time.Now().UnixNano()
	recent := func(x *dirNode) bool { return x != nil && now-x.scannedAt.Load() < int64(scanWindow) }
	if !recent(d) && !recent(d.fsys.dirNode(n.Parent)) {
		return false
	}
	d.fsys.markScanned(n, now)
	return true
}

// markRead is told that a file of the directory dir was read through the
// mount: the listings under it push their files for a while. When dir
// was listed through the mount too, something walks the tree (grep -r
// lists, then reads): its ancestors are marked as well, so that the
// walk's next directories, wherever they are, push theirs. A cat of a
// path read without a listing marks its directory only.
func (f *FS) markRead(dir *tree.Node) {
	d := f.dirNode(dir)
	if d == nil {
		return
	}
	now := time.Now().UnixNano()
	if !d.listed.Load() {
		d.scannedAt.Store(now)
		return
	}
	f.markScanned(dir, now)
}

// markScanned marks dir and its ancestors the kernel knows as scanned at
// now. It stops at the first ancestor marked lately (within an eighth of
// the window): the ones above were marked with it. A READ or listing in a
// directory being walked then costs one or two map lookups, no writes.
func (f *FS) markScanned(dir *tree.Node, now int64) {
	for n := dir; n != nil; n = n.Parent {
		a := f.dirNode(n)
		if a == nil {
			return
		}
		if a.scannedAt.Load() >= now-int64(scanWindow)/8 {
			if n != dir {
				return
			}
			continue
		}
		a.scannedAt.Store(now)
	}
}

// dirNode is the node of directory n the kernel knows, or nil.
func (f *FS) dirNode(n *tree.Node) *dirNode {
	if n == nil {
		return nil
	}
	v, _ := f.live.Load(n.Ino)
	d, _ := v.(*dirNode)
	return d
}

// pushNow pushes n's page now, when the engine holds it whole, the
// kernel has not read it and no push of it is being written; a page past
// the budget left is queued for the pusher's goroutine instead. (Copying
// a listing's pages with a goroutine per core was measured too: no faster
// on two cores; the copy into new page cache is what costs, see
// memoryFill in the bench.)
func (p *pusher) pushNow(n *fileNode, budget *int) {
	if n.cached.Load() || !n.pushing.CompareAndSwap(false, true) {
		return // the kernel has it, or the pusher is pushing it
	}
	defer n.pushing.Store(false)
	chunks, ok := p.rd.Resident(n.node().File)
	if !ok || n.cached.Load() {
		return
	}
	size := 0
	for _, c := range chunks {
		size += len(c)
	}
	if size > *budget {
		p.enqueue(n)
		return
	}
	*budget -= size
	if errno := p.write(n, chunks); errno != 0 {
		p.refused.Add(1)
		return
	}
	n.cached.Store(true)
	p.listed.Add(1)
}
