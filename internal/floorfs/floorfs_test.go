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
// do a second mount of the same tree and a passthrough mount, whose reads
// never reach the file system (as root: passthrough needs CAP_SYS_ADMIN).
func TestMountServesTheTree(t *testing.T) {
	requireFUSE(t)

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
	for i := range 3 {
		passthrough := i == 2
		if passthrough {
			testenv.Require(t, os.Geteuid() == 0, "FUSE passthrough needs root")
		}
		reads := tree.Reads()
		mnt := t.TempDir()
		mount := tree.Mount
		if passthrough {
			mount = tree.MountPassthrough
		}
		server, err := mount(mnt)
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
		n := tree.Reads() - reads
		if passthrough {
			testenv.Require(t, n == 0, "the passthrough mount answered %d READs: FUSE passthrough is not in use (Linux 6.9+ with CAP_SYS_ADMIN needed)", n)
		} else if n == 0 {
			t.Errorf("mount %d answered no READ: the count measures nothing", i)
		}
	}
}

// TestMountChromafs: chromafs's FUSE layer over the tree in memory serves
// every file byte for byte, pushes on or off; with pushes, a grep -r of a
// fresh mount is answered from pages its listings handed to the kernel:
// fewer than half the reads reach the file system.
func TestMountChromafs(t *testing.T) {
	requireFUSE(t)
	src := t.TempDir()
	files := map[string]string{}
	for i := range 40 {
		p := fmt.Sprintf("d%d/e%d/p%d.md", i%3, i%5, i)
		files[p] = string(bytes.Repeat([]byte(fmt.Sprintf("page %d\n", i)), 1+i*300))
		must(t, os.MkdirAll(filepath.Dir(filepath.Join(src, p)), 0o755))
		must(t, os.WriteFile(filepath.Join(src, p), []byte(files[p]), 0o644))
	}
	must(t, os.WriteFile(filepath.Join(src, "top.md"), []byte("top\n"), 0o644))
	files["top.md"] = "top\n"
	tree, err := Load(src)
	must(t, err)
	reads := map[bool]int64{}
	for _, push := range []bool{false, true} {
		before := tree.Reads()
		mnt := t.TempDir()
		server, f, err := tree.MountChromafs(mnt, push)
		if err != nil {
			t.Fatalf("push=%v: %v", push, err)
		}
		t.Cleanup(func() { _ = server.Unmount(); f.Close() })
		cmd := exec.Command("grep", "-rc", "page", ".")
		cmd.Dir = mnt
		if err := cmd.Run(); err != nil {
			t.Fatalf("push=%v: grep -r: %v", push, err)
		}
		for p, body := range files {
			b, err := os.ReadFile(filepath.Join(mnt, p))
			if err != nil || string(b) != body {
				t.Errorf("push=%v: %s: %d bytes, %v; want %d", push, p, len(b), err, len(body))
			}
		}
		listed := f.PushStats().Listed
		if push != (listed > 0) {
			t.Errorf("push=%v: listings pushed %d pages", push, listed)
		}
		reads[push] = tree.Reads() - before
	}
	if reads[false] == 0 || reads[true]*2 >= reads[false] {
		t.Errorf("reads reaching the file system: %d with pushes, %d without: want fewer than half", reads[true], reads[false])
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

// requireFUSE skips loudly (fails under CI=true) without /dev/fuse and
// fusermount3.
func requireFUSE(t *testing.T) {
	t.Helper()
	_, err := os.Stat("/dev/fuse")
	testenv.Require(t, err == nil, "no /dev/fuse: %v", err)
	_, err = exec.LookPath("fusermount3")
	testenv.Require(t, err == nil, "no fusermount3 (apt install fuse3)")
}
