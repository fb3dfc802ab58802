package mountcmd

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
)

// logSink is where log lines meant for stderr go: file descriptor 2,
// except while captureStderr holds it for fusermount3, when they go to
// where descriptor 2 pointed before (so a log line is never taken for
// fusermount3's words).
type logSink struct {
	mu sync.Mutex
	f  *os.File
}

func newLogSink() *logSink { return &logSink{f: os.Stderr} }

func (s *logSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.f.Write(p)
}

func (s *logSink) set(f *os.File) {
	if s != nil {
		s.mu.Lock()
		s.f = f
		s.mu.Unlock()
	}
}

// captureStderr runs fn with file descriptor 2 pointing into a pipe and
// returns what was written there. go-fuse runs fusermount3 with this
// process's stderr: its reason for refusing a mount ("option allow_other
// only allowed if 'user_allow_other' is set in /etc/fuse.conf") is only
// there, and a daemon's stderr leads nowhere. Meanwhile sink (nil: logs
// go to a file) writes to the saved descriptor. If the descriptor cannot
// be redirected, fn runs as it is.
func captureStderr(sink *logSink, fn func() error) (string, error) {
	saved, err := syscall.Dup(2)
	if err != nil {
		return "", fn()
	}
	r, w, err := os.Pipe()
	if err != nil {
		syscall.Close(saved)
		return "", fn()
	}
	var buf bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _, _ = io.Copy(&buf, r) }() // never let a full pipe block the writer
	savedFile := os.NewFile(uintptr(saved), "stderr")
	sink.set(savedFile)
	_ = syscall.Dup2(int(w.Fd()), 2)
	ferr := fn()
	_ = syscall.Dup2(saved, 2)
	sink.set(os.Stderr)
	savedFile.Close()
	w.Close()
	wg.Wait()
	r.Close()
	return strings.TrimSpace(buf.String()), ferr
}
