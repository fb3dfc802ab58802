package mountpath

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/chromafs/chromafs/internal/testenv"
)

const nobody = 65534

// requireRoot skips (or fails under CI=true) the cases that take another
// user's identity.
func requireRoot(t *testing.T) {
	t.Helper()
	testenv.Require(t, os.Geteuid() == 0, "needs root (it checks paths as another user)")
}

// tree makes, under a 0755 directory: nobody's own empty directory, one
// that is not empty, one owned by root, one nobody may not write, a
// symbolic link to nobody's directory, nobody's directory below a link,
// and a directory nobody cannot reach.
func tree(t *testing.T) string {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	base, err := os.MkdirTemp("", "mountpath-") // t.TempDir's parent is 0700: nobody could not reach it
	must(err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	must(os.Chmod(base, 0o755))
	mk := func(name string, mode os.FileMode, uid int) string {
		p := filepath.Join(base, name)
		must(os.MkdirAll(p, 0o755))
		must(os.Chmod(p, mode))
		must(os.Chown(p, uid, uid))
		return p
	}
	mk("own", 0o755, nobody)
	mk("full", 0o755, nobody)
	must(os.WriteFile(filepath.Join(base, "full", "x"), nil, 0o644))
	mk("roots", 0o777, 0)
	mk("readonly", 0o555, nobody)
	must(os.Symlink(filepath.Join(base, "own"), filepath.Join(base, "link")))
	mk("real/inner", 0o755, nobody)
	must(os.Symlink(filepath.Join(base, "real"), filepath.Join(base, "via")))
	mk("closed", 0o700, 0)
	mk("closed/inner", 0o755, nobody)
	must(os.WriteFile(filepath.Join(base, "file"), nil, 0o644))
	return base
}

func TestOpenChecksAsTheUser(t *testing.T) {
	requireRoot(t)
	base := tree(t)
	u := User{UID: nobody, GID: nobody}
	for _, c := range []struct {
		path string
		want error
		says string
	}{
		{"own", nil, ""},
		{"full", ErrInUse, "not empty"},
		{"roots", ErrNotAllowed, "owned by uid 0"},
		{"readonly", ErrNotAllowed, "not writable"},
		{"link", ErrNotAllowed, "symbolic link"},
		{"via/inner", ErrNotAllowed, "symbolic link"},
		{"closed/inner", ErrNotAllowed, "permission denied"},
		{"file", ErrNotAllowed, "not a directory"},
		{"missing", ErrNotAllowed, "no such directory"},
	} {
		d, err := Open(filepath.Join(base, c.path), u)
		if c.want == nil {
			if err != nil {
				t.Errorf("%s: %v", c.path, err)
				continue
			}
			if !strings.HasPrefix(d.Target(), "/proc/self/fd/") || d.Path() != filepath.Join(base, c.path) {
				t.Errorf("%s: target %q path %q", c.path, d.Target(), d.Path())
			}
			d.Close()
			continue
		}
		if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %v saying %q", c.path, err, c.want, c.says)
		}
	}
	// root may use a directory it does not own, but not through a link
	if d, err := Open(filepath.Join(base, "readonly"), User{}); err != nil {
		t.Errorf("root, readonly: %v", err)
	} else {
		d.Close()
	}
	if _, err := Open(filepath.Join(base, "link"), User{}); !errors.Is(err, ErrNotAllowed) {
		t.Errorf("root through a link: %v", err)
	}
	if _, err := Open("relative/path", u); err == nil {
		t.Error("a relative path was taken")
	}
}

// TestTargetIsWhatWasChecked: a name swapped for a symbolic link after
// the check does not move the mount's target.
func TestTargetIsWhatWasChecked(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := Open(dir, User{UID: uint32(os.Geteuid()), GID: uint32(os.Getegid())})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	moved := filepath.Join(base, "moved")
	other := filepath.Join(base, "other")
	if err := os.Rename(dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(other, dir); err != nil {
		t.Fatal(err)
	}
	got, err := os.Readlink(d.Target())
	if err != nil || got != moved {
		t.Errorf("target resolves to %q (%v), want the directory that was checked, %q", got, err, moved)
	}
}

func TestCreateFile(t *testing.T) {
	requireRoot(t)
	base := tree(t)
	u := User{UID: nobody, GID: nobody}
	f, err := CreateFile(filepath.Join(base, "own", "access.log"), u)
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Uid != nobody || st.Mode&0o777 != 0o600 {
		t.Errorf("created file: uid %d mode %o (%v)", st.Uid, st.Mode&0o777, err)
	}
	f.Close()
	if err := os.Symlink("/etc/passwd", filepath.Join(base, "own", "evil.log")); err != nil {
		t.Fatal(err)
	}
	// root's file, which nobody may write (so only CreateFile's own check
	// of the owner refuses it), linked into nobody's directory
	shared := filepath.Join(base, "shared")
	if err := os.WriteFile(shared, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(shared, filepath.Join(base, "own", "hard.log")); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(base, "own", "fifo.log")
	if err := unix.Mkfifo(fifo, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(fifo, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	// a reader on the FIFO, so that opening it for writing succeeds and
	// only CreateFile's own check of the file's type refuses it
	reader, err := os.OpenFile(fifo, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	for _, c := range []struct{ name, says string }{
		{"own/evil.log", "symbolic link"},
		{"own/hard.log", "owned by uid 0"},
		{"own/fifo.log", "not a regular file"},
		{"roots/../file", "permission denied"},
		{"closed/x.log", "permission denied"},
		{"link/x.log", "symbolic link"},
	} {
		f, err := CreateFile(filepath.Join(base, c.name), u)
		if err == nil {
			f.Close()
		}
		if !errors.Is(err, ErrNotAllowed) || !strings.Contains(fmtErr(err), c.says) {
			t.Errorf("%s: %v, want refused saying %q", c.name, err, c.says)
		}
	}
}
