package floorfs

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/chromafs/chromafs/internal/testenv"
)

// TestMountServesTheTree: a mount holds every directory and file of the
// tree loaded, byte for byte, and lists them as the local tree does; so
// does a second mount of the same tree.
func TestMountServesTheTree(t *testing.T) {
	_, err := os.Stat("/dev/fuse")
	testenv.Require(t, err == nil, "no /dev/fuse: %v", err)
	_, err = exec.LookPath("fusermount3")
	testenv.Require(t, err == nil, "no fusermount3 (apt install fuse3)")

	src := t.TempDir()
	files := map[string]string{"a.md": "alpha\n", "d/b.md": "beta beta\n", "d/e/c.md": "", "d/e/f/g.md": string(bytes.Repeat([]byte("x"), 300000))}
	for p, body := range files {
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(src, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(src, p), []byte(body), 0o644))
	}
	must(t, os.Mkdir(filepath.Join(src, "empty"), 0o755))
	tree, err := Load(src)
	must(t, err)
	if tree.Files() != len(files) || tree.Bytes() != 6+10+300000 {
		t.Fatalf("loaded %d files, %d bytes", tree.Files(), tree.Bytes())
	}
	for i := range 2 {
		mnt := t.TempDir()
		server, err := tree.Mount(mnt)
		if err != nil {
			t.Fatalf("mount %d: %v", i, err)
		}
		t.Cleanup(func() { _ = server.Unmount() })
		if got, want := walk(t, mnt), walk(t, src); got != want {
			t.Errorf("mount %d lists\n%s\nwant\n%s", i, got, want)
		}
		for p, body := range files {
			b, err := os.ReadFile(filepath.Join(mnt, p))
			if err != nil || string(b) != body {
				t.Errorf("mount %d: %s: %d bytes, %v; want %d", i, p, len(b), err, len(body))
			}
		}
	}
}

// walk lists a tree's paths, kinds and sizes of files.
func walk(t *testing.T, root string) string {
	t.Helper()
	var out bytes.Buffer
	must(t, filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		size := info.Size()
		if e.IsDir() {
			size = 0
		}
		fmt.Fprintf(&out, "%s %s %d\n", rel, e.Type(), size)
		return nil
	}))
	return out.String()
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
