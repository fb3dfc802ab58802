package proc

import (
	"os"
	"strings"
	"testing"
)

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{`/mnt/a\040b`: "/mnt/a b", `/plain`: "/plain", `/t\011x`: "/t\tx", `/bad\09`: `/bad\09`} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRSSAndMounts(t *testing.T) {
	if rss, err := RSS(os.Getpid()); err != nil || rss <= 0 {
		t.Errorf("RSS of this process: %d, %v", rss, err)
	}
	if fstype, ok := MountedAt("/proc"); !ok || fstype != "proc" {
		t.Errorf("MountedAt(/proc) = %q, %v", fstype, ok)
	}
	if m, ok := MountAt("/proc"); !ok || m.FSType != "proc" || !strings.Contains(m.Device, ":") {
		t.Errorf("MountAt(/proc) = %+v, %v", m, ok)
	}
	if st, err := StartTime(os.Getpid()); err != nil || st == 0 {
		t.Errorf("StartTime of this process: %d, %v", st, err)
	}
	if st, err := StartTime(1); err != nil || st > 1<<40 {
		t.Errorf("StartTime of pid 1: %d, %v", st, err)
	}
	if m, err := Memory(); err != nil || m < 64<<20 {
		t.Errorf("Memory = %d, %v", m, err)
	}
	if _, ok := MountedAt(t.TempDir()); ok {
		t.Error("a fresh directory reported as a mount point")
	}
}

func TestMountPointIs(t *testing.T) {
	const line = `36 35 98:0 /mnt1 /mnt/a\040b rw,noatime master:1 - fuse.chromafs chromafs rw,user_id=0`
	for _, c := range []struct {
		line, abs string
		want      bool
	}{
		{line, "/mnt/a b", true},
		{line, `/mnt/a\040b`, false}, // the escaped form is not the path
		{line, "/mnt1", false},       // the root within the file system, not the point
		{line, "/mnt/a", false},
		{"25 1 0:22 / /proc rw - proc proc rw", "/proc", true},
		{"25 1 0:22 / /proc", "/proc", true}, // a point that ends the line
		{"25 1 0:22 /", "/", false},          // too few fields
		{"", "", false},
	} {
		if got := mountPointIs([]byte(c.line), c.abs); got != c.want {
			t.Errorf("mountPointIs(%q, %q) = %v, want %v", c.line, c.abs, got, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { mountPointIs([]byte("25 1 0:22 / /proc rw - proc proc rw"), "/mnt/other") }); n != 0 {
		t.Errorf("a line of another mount point allocated %.0f times, want 0", n)
	}
}
