package harness

import (
	"bytes"
	"sync"
)

// Log keeps everything written to it and is safe for concurrent use: a
// child process's output is written by exec's copying goroutine while the
// caller reads it. Its String is what fmt prints for a *Log.
type Log struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// String returns everything written so far.
func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
