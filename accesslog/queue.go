package accesslog

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// A queued log (NewQueued) is for a process that must never wait on a
// log's file: chromafsd writes the access logs of its users' attachments
// to files those users chose, chromafs-mount its --access-log, and a file
// system that stalls (a hung NFS server, a full disk, a pipe nobody
// reads) must stall neither the FUSE request that logged nor the daemon. Write only appends the line to a queue bounded in
// bytes; one goroutine per log writes the queue to the file. Past the
// bound, events are dropped and counted, and once the file has taken
// the queue, a line says how many were lost ("op": "dropped"), so the
// log shows where it has a hole.

// closeWait bounds how long Close waits for the queue to reach the file.
const closeWait = time.Second

// NewQueued writes to f from a goroutine of its own, holding at most
// maxBytes of lines not yet written, and, with a budget (nil: none), at
// most what the budget has left for every log that shares it; Close
// closes f.
func NewQueued(f *os.File, maxBytes int, budget *Budget) *Log {
	l := New(f)
	l.q = newQueue(f, maxBytes, budget)
	go l.q.run()
	return l
}

// Open opens the log at path ("-" is stdout), appending, as a queued log
// (NewQueued) holding at most maxBytes of lines not yet written: a
// mount's FUSE requests then never wait on the log's file.
func Open(path string, maxBytes int) (*Log, error) {
	if path == "-" {
		return NewQueued(os.Stdout, maxBytes, nil), nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, fmt.Errorf("access log: %w", err)
	}
	return NewQueued(f, maxBytes, nil), nil
}

// Budget bounds the bytes every queued log sharing it holds, not yet
// written: a process with many logs on slow files holds at most this.
type Budget struct {
	max  int64
	used atomic.Int64
}

// NewBudget is a budget of max bytes.
func NewBudget(max int64) *Budget { return &Budget{max: max} }

func (b *Budget) take(n int) bool {
	if b == nil {
		return true
	}
	if b.used.Add(int64(n)) > b.max {
		b.used.Add(-int64(n))
		return false
	}
	return true
}

func (b *Budget) give(n int) {
	if b != nil {
		b.used.Add(-int64(n))
	}
}

// Used is what the logs sharing b hold now, in bytes.
func (b *Budget) Used() int64 { return b.used.Load() }

type queue struct {
	w      io.WriteCloser
	max    int
	budget *Budget

	mu      sync.Mutex // protects the following
	lines   [][]byte
	bytes   int   // of the lines queued and of those being written
	dropped int64 // since the last "dropped" line
	closed  bool

	droppedTotal atomic.Int64
	wake         chan struct{} // a push or close happened (capacity 1)
	done         chan struct{} // closed once the writer has closed w
}

func newQueue(w io.WriteCloser, max int, budget *Budget) *queue {
	return &queue{w: w, max: max, budget: budget, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// push queues line, or drops it when the queue is full or closed.
func (q *queue) push(line []byte) {
	q.mu.Lock()
	switch {
	case q.closed:
	case q.bytes+len(line) > q.max || !q.budget.take(len(line)):
		q.dropped++
		q.droppedTotal.Add(1)
	default:
		q.lines = append(q.lines, line)
		q.bytes += len(line)
	}
	q.mu.Unlock()
	q.signal()
}

func (q *queue) signal() {
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run writes the queue to the file until the queue is closed and empty.
func (q *queue) run() {
	defer close(q.done)
	defer q.w.Close()
	for {
		q.mu.Lock()
		lines, dropped, closed := q.lines, q.dropped, q.closed
		q.lines, q.dropped = nil, 0
		q.mu.Unlock()
		for _, line := range lines {
			_, _ = q.w.Write(line) // one write per line: a reader never sees half of one
			q.mu.Lock()
			q.bytes -= len(line) // held until written
			q.mu.Unlock()
			q.budget.give(len(line))
		}
		if dropped > 0 {
			_, _ = q.w.Write(droppedLine(dropped))
		}
		if len(lines) == 0 && dropped == 0 {
			if closed {
				return
			}
			<-q.wake
		}
	}
}

// close stops taking lines and waits, at most wait, for the writer to
// write what is queued and close the file.
func (q *queue) close(wait time.Duration) {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	q.signal()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-q.done:
	case <-t.C:
	}
}

// droppedLine is the line that says n events were lost here.
func droppedLine(n int64) []byte {
	line, _ := json.Marshal(Event{Time: time.Now().UTC(), Op: "dropped", Detail: fmt.Sprintf("%d events dropped: the log's file did not keep up", n)})
	return append(line, '\n')
}
