package accesslog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/testenv"
)

// stallWriter is a file whose writes block until released (a hung file
// system).
type stallWriter struct {
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
	closed  bool
}

func (w *stallWriter) Write(p []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *stallWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	return nil
}

func (w *stallWriter) text() (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String(), w.closed
}

// TestQueuedNeverWaits: with the file stalled, Write returns at once and
// drops what passes the bound, Close returns within its bound; once the
// file answers, every queued line reaches it, then one line counting the
// events dropped, and the file is closed. The file stays stalled until
// Write and Close have returned: one that waited on it would never return.
func TestQueuedNeverWaits(t *testing.T) {
	w := &stallWriter{release: make(chan struct{})}
	l := New(nil)
	l.q = newQueue(w, 2000, nil)
	go l.q.run()
	testenv.Returns(t, "200 writes to a stalled file", func() {
		for i := range 200 {
			l.Write(Event{Time: time.Now(), Op: "read", Path: strings.Repeat("p", i%7+1)})
		}
	})
	if l.Dropped() == 0 {
		t.Fatal("nothing dropped past the queue's bound")
	}
	// the file never answers while Close runs: Close returning at all is
	// its bound at work, after it waited closeWait for the queue (it
	// cannot have returned sooner: nothing reached the file)
	start := time.Now()
	testenv.Returns(t, "Close of a stalled log", func() { _ = l.Close() })
	if took := time.Since(start); took < closeWait {
		t.Errorf("Close of a stalled log returned after %v, before its wait of %v for the queue", took, closeWait)
	}
	l.Write(Event{Op: "read", Path: "after-close"}) // dropped, no panic
	close(w.release)
	select {
	case <-l.q.done:
	case <-time.After(5 * time.Second):
		t.Fatal("the writer did not end once the file answered")
	}
	text, closed := w.text()
	if !closed {
		t.Error("the file was not closed")
	}
	// every event is a line, or counted in a "dropped" line written where
	// the hole is
	reads, dropped := 0, int64(0)
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		var e Event
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("a line that is not JSON: %q", line)
		}
		switch e.Op {
		case "read":
			reads++
		case "dropped":
			var n int64
			if _, err := fmt.Sscanf(e.Detail, "%d events dropped", &n); err != nil || n <= 0 {
				t.Errorf("dropped line %q", line)
			}
			dropped += n
		default:
			t.Errorf("line %q", line)
		}
	}
	if dropped != l.Dropped() || int64(reads)+dropped != 200 || strings.Contains(text, "after-close") {
		t.Errorf("%d lines written + %d dropped (counted %d), want 200 events (and none after Close)", reads, dropped, l.Dropped())
	}
}

// TestQueuedKeepsEverythingItCan: a file that keeps up loses nothing, in
// order.
func TestQueuedKeepsEverythingItCan(t *testing.T) {
	w := &stallWriter{release: make(chan struct{})}
	close(w.release)
	l := New(nil)
	l.q = newQueue(w, 1<<20, nil)
	go l.q.run()
	for i := range 500 {
		l.Write(Event{Op: "read", Path: "f", Entries: &i})
	}
	_ = l.Close()
	text, closed := w.text()
	lines := strings.Split(strings.TrimSpace(text), "\n")
	if !closed || len(lines) != 500 || l.Dropped() != 0 {
		t.Fatalf("%d lines, closed %v, dropped %d: want 500, true, 0", len(lines), closed, l.Dropped())
	}
	for i, line := range lines {
		var e Event
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Entries == nil || *e.Entries != i {
			t.Fatalf("line %d: %q", i, line)
		}
	}
}

// TestQueuedBounded: a log holds at most its bound of bytes not written,
// the lines being written included, and logs sharing a budget hold at
// most the budget together; what they held is given back once written.
func TestQueuedBounded(t *testing.T) {
	b := NewBudget(3000)
	var ws []*stallWriter
	var logs []*Log
	for range 3 {
		w := &stallWriter{release: make(chan struct{})}
		l := New(nil)
		l.q = newQueue(w, 2000, b)
		go l.q.run()
		ws, logs = append(ws, w), append(logs, l)
	}
	for range 100 {
		for _, l := range logs {
			l.Write(Event{Op: "read", Path: strings.Repeat("p", 40)})
		}
	}
	for _, l := range logs {
		l.q.mu.Lock()
		held := l.q.bytes
		l.q.mu.Unlock()
		if held > 2000 {
			t.Errorf("a log holds %d bytes, past its bound 2000", held)
		}
	}
	if used := b.Used(); used > 3000 || used < 2000 {
		t.Errorf("the budget holds %d bytes, want close to and at most 3000", used)
	}
	for i, l := range logs {
		close(ws[i].release)
		_ = l.Close()
	}
	if used := b.Used(); used != 0 {
		t.Errorf("%d bytes still held once every log was written and closed", used)
	}
}
