package corpus

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCopy: directories, files and links are copied as they are, the
// skipped directories are left out, and the stats count what was copied.
func TestCopy(t *testing.T) {
	src, dst := t.TempDir(), filepath.Join(t.TempDir(), "copy")
	for name, body := range map[string]string{"a.md": "hello", "d/b.mdx": "world!", ".git/HEAD": "ref", "d/.git/x": "y"} {
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../a.md", filepath.Join(src, "d", "link.md")); err != nil {
		t.Fatal(err)
	}
	st, err := Copy(dst, src, func(name string) bool { return name == ".git" })
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 2 || st.Dirs != 1 || st.Bytes != 11 {
		t.Errorf("stats %+v, want 2 files, 1 directory, 11 bytes", st)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "d", "b.mdx")); err != nil || string(b) != "world!" {
		t.Errorf("d/b.mdx: %q %v", b, err)
	}
	if text, err := os.Readlink(filepath.Join(dst, "d", "link.md")); err != nil || text != "../a.md" {
		t.Errorf("the link: %q %v", text, err)
	}
	for _, gone := range []string{".git", "d/.git"} {
		if _, err := os.Lstat(filepath.Join(dst, gone)); !os.IsNotExist(err) {
			t.Errorf("%s was copied (%v)", gone, err)
		}
	}
	if _, err := Copy(filepath.Join(t.TempDir(), "x"), filepath.Join(src, "missing"), nil); err == nil {
		t.Error("copying a missing directory: no error")
	}
	via := filepath.Join(t.TempDir(), "via")
	if err := os.Symlink(src, via); err != nil {
		t.Fatal(err)
	}
	if st, err := Copy(filepath.Join(t.TempDir(), "y"), via, func(name string) bool { return name == ".git" }); err != nil || st.Files != 2 {
		t.Errorf("copying through a link to the tree: %+v %v", st, err)
	}
	if err := os.Symlink(filepath.Join(src, "a.md"), filepath.Join(src, "abs.md")); err != nil {
		t.Fatal(err)
	}
	if _, err := Copy(filepath.Join(t.TempDir(), "z"), src, nil); err == nil {
		t.Error("an absolute link was copied")
	}
}
