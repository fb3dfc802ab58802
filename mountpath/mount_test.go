package mountpath

import (
	"errors"
	"os"
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
	id, err := BindOnto(first, d)
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
	d, err = Reopen(target, u, id)
	if err != nil {
		t.Fatal(err)
	}
	second := tmpfs(t, base, "second")
	id2, err := BindOnto(second, d)
	d.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(target, "second")); err != nil || id2 == id {
		t.Errorf("the stacked mount: %v (ids %d, %d)", err, id, id2)
	}
	if _, err := Reopen(target, u, id+id2); !errors.Is(err, ErrInUse) {
		t.Errorf("Reopen with another id: %v, want Open's refusal", err)
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
	id, err := BindOnto(tmpfs(t, base, "x"), d)
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
	if err := UnmountID(id); err != nil {
		t.Fatal(err)
	}
	if _, ok := proc.MountAt(filepath.Join(moved, "inner")); ok {
		t.Error("the renamed mount is still there")
	}
	if err := UnmountID(id); err != nil {
		t.Errorf("a mount gone already: %v", err)
	}
}
