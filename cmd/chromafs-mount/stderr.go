package main

import (
	"bytes"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
)

// captureStderr runs fn with file descriptor 2 pointing into a pipe and
// returns what was written there. go-fuse runs fusermount3 with this
// process's stderr: its reason for refusing a mount ("option allow_other
// only allowed if 'user_allow_other' is set in /etc/fuse.conf") is only
// there, and a daemon's stderr leads nowhere. If the descriptor cannot be
// redirected, fn runs as it is.
func captureStderr(fn func() error) (string, error) {
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
	_ = syscall.Dup2(int(w.Fd()), 2)
	ferr := fn()
	_ = syscall.Dup2(saved, 2)
	syscall.Close(saved)
	w.Close()
	wg.Wait()
	r.Close()
	return strings.TrimSpace(buf.String()), ferr
}
