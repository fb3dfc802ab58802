package mountpath

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/chromafs/chromafs/internal/proc"
	"github.com/chromafs/chromafs/internal/testenv"
)

// tmpfs mounts a tmpfs holding one file named name at a new directory of
// base and returns the directory.
func tmpfs(t *testing.T, base, name string) string {
	t.Helper()
	dir, err := os.MkdirTemp(base, "src-")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		testenv.Missing(t, "cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestBindUnmountReopen: a copy of a mount goes on the checked directory
// as a shared mount; Unmount takes only the mount recorded; Reopen lets a
// restarted daemon stack on its own old mount, which Open refuses.
func TestBindUnmountReopen(t *testing.T) {
	requireRoot(t)
	base := tree(t)
	u := User{UID: nobody, GID: nobody}
	target := filepath.Join(base, "own")
	first := tmpfs(t, base, "first")
	d, err := Open(target, u)
	if err != nil {
		t.Fatal(err)
	}
	id, err := BindOnto(first, d, nil)
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
	if _, err := os.Stat(filepath.Join(target, "first")); err != nil {
		t.Fatalf("the bound mount's file: %v", err)
	}
	if !shared(t, target) {
		t.Error("the copy is not a shared mount")
	}
	if _, err := Open(target, u); !errors.Is(err, ErrInUse) {
		t.Errorf("Open of a mount point: %v, want in use", err)
	}
	// a restart: the old mount is recorded, a new one stacks on it
	d, err = Reopen(target, u, id, "")
	if err != nil {
		t.Fatal(err)
	}
	second := tmpfs(t, base, "second")
	id2, err := BindOnto(second, d, nil)
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(target, "second")); err != nil || id2 == id {
		t.Errorf("the stacked mount: %v (ids %d, %d)", err, id, id2)
	}
	if _, err := Reopen(target, u, id+id2, ""); !errors.Is(err, ErrInUse) {
		t.Errorf("Reopen with another id: %v, want Open's refusal", err)
	}
	// the device of a mount that is not a root-made FUSE mount does not
	// make it the daemon's (a copy in another namespace is told by it)
	if m, ok := proc.MountAt(target); !ok {
		t.Fatal("no mount at the target")
	} else if _, err := Reopen(target, u, 0, m.Device); !errors.Is(err, ErrInUse) {
		t.Errorf("Reopen by the device of a mount that is not FUSE: %v, want Open's refusal", err)
	}
	if err := Unmount(target, id); !errors.Is(err, ErrMoved) {
		t.Errorf("Unmount of the mount below: %v, want %v", err, ErrMoved)
	}
	if err := Unmount(target, id2); err != nil {
		t.Fatal(err)
	}
	if err := Unmount(target, id); err != nil {
		t.Fatal(err)
	}
	if _, ok := proc.MountAt(target); ok {
		t.Error("still mounted")
	}
}

// shared reports whether mountinfo's optional fields of the mount at dir
// name a peer group.
func shared(t *testing.T, dir string) bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 6 && f[4] == dir {
			found = strings.Contains(line, " shared:")
		}
	}
	return found
}

// TestUnmountIDAfterARename: a mount whose path was renamed and replaced
// by a symbolic link is still found, by its id, and taken away.
func TestUnmountIDAfterARename(t *testing.T) {
	requireRoot(t)
	base := tree(t)
	target := filepath.Join(base, "real", "inner")
	d, err := Open(target, User{UID: nobody, GID: nobody})
	if err != nil {
		t.Fatal(err)
	}
	id, err := BindOnto(tmpfs(t, base, "x"), d, nil)
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	// the directory above is renamed and a link put where it was
	moved := filepath.Join(base, "moved")
	if err := os.Rename(filepath.Join(base, "real"), moved); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(filepath.Join(moved, "inner"), unix.MNT_DETACH) })
	if err := os.Symlink(moved, filepath.Join(base, "real")); err != nil {
		t.Fatal(err)
	}
	if err := Unmount(target, id); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("Unmount through a link: %v, want refused", err)
	}
	// an id given to another mount since (its device is not the one
	// recorded) is left alone
	if err := UnmountID(id, "999:999"); err != nil {
		t.Fatal(err)
	}
	if _, ok := proc.MountAt(filepath.Join(moved, "inner")); !ok {
		t.Fatal("UnmountID took a mount whose device is not the one recorded")
	}
	if err := UnmountID(id, ""); err != nil {
		t.Fatal(err)
	}
	if _, ok := proc.MountAt(filepath.Join(moved, "inner")); ok {
		t.Error("the renamed mount is still there")
	}
	if err := UnmountID(id, ""); err != nil {
		t.Errorf("a mount gone already: %v", err)
	}
}

// TestIDMappedCopy: a copy made with an IDMap shows root's files as the
// owner's and lets the owner, not another user, into a 0500 root; the
// mount it copies still shows them as root's.
func TestIDMappedCopy(t *testing.T) {
	requireRoot(t)
	base := tree(t)
	src := tmpfs(t, base, "page")
	if err := os.Chmod(src, 0o500); err != nil {
		t.Fatal(err)
	}
	m, err := NewIDMap(nobody, nobody)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if err := ProbeIDMap(src, m); err != nil {
		testenv.Missing(t, "this kernel makes no idmapped copy of a tmpfs: %v", err)
	}
	target := filepath.Join(base, "own")
	d, err := Open(target, User{UID: nobody, GID: nobody})
	if err != nil {
		t.Fatal(err)
	}
	_, err = BindOnto(src, d, m)
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(target, unix.MNT_DETACH) })
	var st, orig unix.Stat_t
	if err := unix.Stat(filepath.Join(target, "page"), &st); err != nil {
		t.Fatal(err)
	}
	if err := unix.Stat(filepath.Join(src, "page"), &orig); err != nil {
		t.Fatal(err)
	}
	if st.Uid != nobody || st.Gid != nobody || orig.Uid != 0 {
		t.Errorf("owner in the copy %d:%d, in the mount %d: want %d:%d and 0", st.Uid, st.Gid, orig.Uid, nobody, nobody)
	}
	if st.Dev != orig.Dev || st.Ino != orig.Ino {
		t.Error("the copy shows another file than its mount's")
	}
	for _, c := range []struct {
		uid  int
		fail bool
	}{{nobody, false}, {nobody - 1, true}} {
		out, err := exec.Command("setpriv", fmt.Sprintf("--reuid=%d", c.uid), fmt.Sprintf("--regid=%d", c.uid), "--clear-groups", "cat", filepath.Join(target, "page")).CombinedOutput()
		if (err != nil) != c.fail || (!c.fail && string(out) != "page") {
			t.Errorf("uid %d reads the copy: %v %q (want it refused: %v)", c.uid, err, out, c.fail)
		}
	}
}
