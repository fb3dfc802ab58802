package accesslog

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestLinesAndCommands(t *testing.T) {
	var buf bytes.Buffer
	l := New(&buf)
	n := int64(10)
	var wg sync.WaitGroup
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.Write(Event{Time: time.Now(), Op: "read", Path: "a/b.md", Bytes: &n, Tier: "chroma", PID: uint32(os.Getpid())})
		}()
	}
	wg.Wait()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 50 {
		t.Fatalf("%d lines, want 50", len(lines))
	}
	for _, line := range lines {
		var e Event
		if err := json.Unmarshal([]byte(line), &e); err != nil || e.Command == "" || e.Path != "a/b.md" || *e.Bytes != 10 {
			t.Fatalf("line %q: %+v %v", line, e, err)
		}
	}
	var nilLog *Log
	nilLog.Write(Event{}) // a mount without a log
}

func TestCgroupOf(t *testing.T) {
	for in, want := range map[string]string{
		"0::/system.slice/docker-abc.scope\n":                 "/system.slice/docker-abc.scope",
		"9:name=systemd:/\n4:memory:/docker/abc\n0::/\n":      "/docker/abc",
		"2:cpu:/\n1:pids:/user.slice\n0::/user.slice/bwrap\n": "/user.slice/bwrap",
		"0::/\n": "/",
		"":       "",
	} {
		if got := cgroupOf(in); got != want {
			t.Errorf("cgroupOf(%q) = %q, want %q", in, got, want)
		}
	}
}
