package pidfile

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteRemove(t *testing.T) {
	p := filepath.Join(t.TempDir(), "mount.pid")
	if err := Write(p, 1234); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "1234\n" {
		t.Errorf("pid file holds %q", b)
	}
	Remove(p, 999) // another process's: kept
	if _, err := os.Stat(p); err != nil {
		t.Error("Remove removed another pid's file")
	}
	Remove(p, 1234)
	if _, err := os.Stat(p); err == nil {
		t.Error("Remove left its own pid file")
	}
}

// TestFindChecksTheWorld: a record is believed only while the mount table
// and the process table agree with it. /proc stands in for a mount here
// (it is one); the FUSE case is in the integration tests.
func TestFindChecksTheWorld(t *testing.T) {
	dir := t.TempDir()
	if _, err := Find(dir, t.TempDir()); !errors.Is(err, ErrNotMounted) {
		t.Errorf("Find of a plain directory: %v", err)
	}
	if _, err := Find(dir, "/proc"); !errors.Is(err, ErrNotMounted) {
		t.Errorf("Find of a mount that is not chromafs's: %v", err)
	}
	unregister, err := Register(dir, "/proc")
	if err != nil {
		t.Fatal(err)
	}
	r, err := read(recordPath(dir, "/proc"))
	if err != nil || r.PID != os.Getpid() || r.Start == 0 || !strings.Contains(r.Device, ":") {
		t.Fatalf("record %+v, %v", r, err)
	}
	st, err := os.Stat(recordPath(dir, "/proc"))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("record mode %v, %v", st.Mode(), err)
	}
	unregister()
	if _, err := os.Stat(recordPath(dir, "/proc")); err == nil {
		t.Error("unregister left the record")
	}
	// a record whose process started at another time is stale
	r.Start++
	if err := checkRecord(r, r.Device); !errors.Is(err, ErrStale) {
		t.Errorf("a reused pid: %v", err)
	}
	r.Start--
	if err := checkRecord(r, "0:9999"); !errors.Is(err, ErrStale) {
		t.Errorf("another mount at the path: %v", err)
	}
	if err := checkRecord(r, r.Device); err != nil {
		t.Errorf("a record that holds: %v", err)
	}
}
