// Package accesslog writes the session trace of a mount: one JSON line per
// operation that reaches the daemon, so that an agent platform can keep,
// per conversation, what the agent looked for and read.
//
// Only what reaches the daemon can be logged. The kernel answers repeated
// lookups, attributes, listings and reads of cached pages itself, and pages
// pushed into its page cache (--push-pages) are read without a request: a
// file read twice appears once, a file read only from a pushed page does
// not appear, and a listing appears the first time the kernel asks for it.
// The log is a trace of requests, not an audit of every byte seen.
//
// Each line has the time, the operation, the path below the mount root,
// for reads the offset, bytes and the tier that served them (memory,
// shared, host, remote, uri, chroma), the latency, the error if any, and
// the calling process: pid, uid and command name (from /proc/PID/comm,
// read once per pid and kept a short while).
package accesslog

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"
)

// Event is one operation.
type Event struct {
	Time    time.Time `json:"time"`
	Op      string    `json:"op"` // lookup, readdir, read, readlink, refresh
	Path    string    `json:"path"`
	Offset  *int64    `json:"offset,omitempty"`
	Bytes   *int64    `json:"bytes,omitempty"`
	Entries *int      `json:"entries,omitempty"`
	Tier    string    `json:"tier,omitempty"`
	Micros  int64     `json:"latency_us"`
	Error   string    `json:"error,omitempty"`
	PID     uint32    `json:"pid,omitempty"`
	UID     uint32    `json:"uid"`
	Command string    `json:"comm,omitempty"`
	Cgroup  string    `json:"cgroup,omitempty"` // the calling process's cgroup (v2 path): which sandbox read
	Detail  string    `json:"detail,omitempty"`
}

// Log writes events as JSON lines, one write per line, so that a reader
// (tail -f, a log shipper) never sees half a line.
type Log struct {
	mu    sync.Mutex // protects the following
	w     io.Writer
	comms map[uint32]comm
	q     *queue // NewQueued's: lines go to its writer, not to w
}

type comm struct {
	name, cgroup string
	at           time.Time
}

// commTTL is how long a pid's command name is trusted (pids are reused).
const commTTL = 2 * time.Second

// New writes to w.
func New(w io.Writer) *Log { return &Log{w: w, comms: map[uint32]comm{}} }

// Close closes a queued log (Open, NewQueued): it waits, at most
// closeWait, for its queue to reach the file; a file that does not take
// it by then is closed by the writer once its write returns. A log of New
// has nothing to close.
func (l *Log) Close() error {
	if l != nil && l.q != nil {
		l.q.close(closeWait)
	}
	return nil
}

// Dropped is how many events a queued log dropped because its file did
// not keep up.
func (l *Log) Dropped() int64 {
	if l == nil || l.q == nil {
		return 0
	}
	return l.q.droppedTotal.Load()
}

// Write logs e, filling in the command name of its pid.
func (l *Log) Write(e Event) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e.PID != 0 {
		c := l.command(e.PID, e.Time)
		e.Command, e.Cgroup = c.name, c.cgroup
	}
	line, err := json.Marshal(e)
	if err != nil {
		return
	}
	line = append(line, '\n')
	if l.q != nil {
		l.q.push(line)
		return
	}
	_, _ = l.w.Write(line)
}

// command returns the name and cgroup of process pid, from a cache.
func (l *Log) command(pid uint32, now time.Time) comm {
	if c, ok := l.comms[pid]; ok && now.Sub(c.at) < commTTL {
		return c
	}
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	c := comm{name: strings.TrimSpace(string(b)), at: now}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid)); err == nil {
		c.cgroup = cgroupOf(string(b))
	}
	if len(l.comms) > 4096 {
		clear(l.comms)
	}
	l.comms[pid] = c
	return c
}

// cgroupOf picks a process's cgroup from /proc/PID/cgroup: the unified
// (v2) one, "0::/path", unless it is the root; else the first controller
// whose path is not the root (a v1 or hybrid host: a container's shows
// there); "/" when every one is.
func cgroupOf(s string) string {
	out := ""
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || parts[2] == "/" {
			continue
		}
		if parts[0] == "0" && parts[1] == "" {
			return parts[2]
		}
		if out == "" {
			out = parts[2]
		}
	}
	if out == "" && s != "" {
		return "/"
	}
	return out
}
