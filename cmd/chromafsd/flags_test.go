package main

import (
	"io"
	"strings"
	"testing"
)

func TestFlags(t *testing.T) {
	dir := t.TempDir()
	o, err := parseFlags([]string{"--socket", dir + "/s.sock", "--state-dir", dir + "/state", "--memory", "1GiB", "--memory-limit", "2GiB", "--socket-group", "0"}, io.Discard)
	if err != nil || o.memoryBytes != 2<<30 || o.budgetBytes != 1<<30 || o.socketGID != 0 || o.cacheBytes != 0 {
		t.Fatalf("%+v %v", o, err)
	}
	o, err = parseFlags([]string{"--socket", dir + "/s.sock", "--state-dir", dir + "/state", "--memory", "512MiB"}, io.Discard)
	if err != nil || o.memoryBytes != 512<<20+512<<20*15/100+64<<20 {
		t.Fatalf("--memory-limit auto over --memory 512MiB: %d, %v", o.memoryBytes, err)
	}
	// an explicit limit with --memory auto: the budget fits below it
	o, err = parseFlags([]string{"--socket", dir + "/s.sock", "--state-dir", dir + "/state", "--memory-limit", "256MiB"}, io.Discard)
	if err != nil || o.budgetBytes != (256<<20-64<<20)*100/115 {
		t.Fatalf("--memory auto under --memory-limit 256MiB: budget %d, %v", o.budgetBytes, err)
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"--memory-limit", "lots"}, "--memory-limit"},
		{[]string{"--memory", "1GiB", "--memory-limit", "512MiB"}, "below --memory"},
		{[]string{"--memory", "1MiB"}, "at least 4MiB"},
		{[]string{"--cache-size", "10"}, "at least 1MiB"},
		{[]string{"--memory", "some"}, "--memory"},
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

func TestMemoryBudgetAuto(t *testing.T) {
	for _, c := range []struct {
		machine, want int64
	}{{8 << 30, 2 << 30}, {128 << 20, 64 << 20}} {
		got, err := memoryBudget("auto", func() (int64, error) { return c.machine, nil })
		if err != nil || got != c.want {
			t.Errorf("auto on %d bytes: %d, %v; want %d", c.machine, got, err, c.want)
		}
	}
	if _, err := memoryBudget("auto", func() (int64, error) { return 0, io.ErrUnexpectedEOF }); err == nil || !strings.Contains(err.Error(), "give a size") {
		t.Errorf("auto without the host's memory: %v", err)
	}
}
