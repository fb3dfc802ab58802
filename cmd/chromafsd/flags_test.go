package main

import (
	"io"
	"strings"
	"testing"
)

func TestFlags(t *testing.T) {
	dir := t.TempDir()
	o, err := parseFlags([]string{"--socket", dir + "/s.sock", "--state-dir", dir + "/state", "--memory-limit", "2GiB", "--socket-group", "0"}, io.Discard)
	if err != nil || o.memoryBytes != 2<<30 || o.socketGID != 0 || o.cacheBytes != 256<<20 {
		t.Fatalf("%+v %v", o, err)
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--memory-limit", "lots"}, "--memory-limit"},
		{[]string{"--prefetch", "x"}, "--prefetch"},
		{[]string{"--socket-group", "no-such-group-xyz"}, "--socket-group"},
		{[]string{"--max-mounts", "0"}, "--max-mounts"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"--chroma-url", "ftp://x"}, "--chroma-url"},
	} {
		args := append([]string{"--socket", dir + "/s.sock", "--state-dir", dir + "/state"}, c.args...)
		if _, err := parseFlags(args, io.Discard); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%q: %v, want %q", c.args, err, c.says)
		}
	}
}
