package integration_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chromafs/chromafs/internal/corpus"
)

// docsRepo writes a docs repository as people have them: text pages,
// images and other binary files from one byte to several MiB, empty
// directories (nested too, and beside files), symbolic links to files and
// to directories (one through another), an executable script, dotfiles,
// a 255-byte file name and the longest path ingest can read there: the
// source directory's own absolute path and that path make 4,095 bytes
// (PATH_MAX less its NUL), a path of over 4,000 bytes below the root.
// The tree is then made read-only (files 0444, the script 0555,
// directories 0555), as the mount is, and given fixed mtimes with
// nanoseconds.
func docsRepo(t *testing.T, src string) {
	t.Helper()
	long := longestPath(t, src)
	writeSource(t, src, map[string]string{
		"v2/index.md":                               "# Version 2\n",
		"v2/guide/setup.mdx":                        "---\ntitle: Setup\n---\nRun it.\r\n",
		"scripts/build.sh":                          "#!/bin/sh\necho built\n",
		".nojekyll":                                 "",
		".config/settings.json":                     "{\"theme\": \"dark\"}\n",
		"docs/.hidden-note.md":                      "a dotfile page\n",
		"names/" + strings.Repeat("n", 252) + ".md": "a 255-byte name\n",
		long: "the deepest page\n",
	})
	_, err := corpus.Generate(filepath.Join(src, "docs/corpus"), corpus.Spec{Files: 40, Seed: 11})
	must(t, err)
	for name, size := range map[string]int{"images/pixel.gif": 1, "images/icon.png": 3 << 10, "images/logo.png": 100<<10 + 3,
		"fonts/inter.woff2": 700 << 10, "assets/manual.pdf": 3<<20 + 12345} {
		writeBinary(t, filepath.Join(src, name), size)
	}
	for _, d := range []string{"empty", "nested/empty/deeper", "images/unused"} {
		must(t, os.MkdirAll(filepath.Join(src, d), 0o755))
	}
	for link, target := range map[string]string{"latest": "v2", "docs/logo.png": "../images/logo.png",
		"start.md": "latest/guide/setup.mdx", "docs/all-images": "../images"} {
		must(t, os.Symlink(target, filepath.Join(src, link)))
	}
	readOnlyTree(t, src)
	must(t, os.Chmod(filepath.Join(src, "scripts/build.sh"), 0o555))
	fixMtimes(t, src)
}

// longestPath is a path below src (names of 249 bytes, then the rest,
// ending .md) whose absolute path is 4,095 bytes: the longest that
// chromafs-ingest, which reads a source by absolute paths, can read.
func longestPath(t *testing.T, src string) string {
	t.Helper()
	real, err := filepath.EvalSymlinks(filepath.Dir(src))
	must(t, err)
	n := 4095 - len(filepath.Join(real, filepath.Base(src))) - 1
	if n < 4000 {
		t.Fatalf("the test's directory %s is too deep for a path of over 4,000 bytes below it", src)
	}
	dirs := (n - 255 + 249) / 250 // ceil((n-255)/250): the last name at most 255 bytes
	long := strings.Repeat(strings.Repeat("p", 249)+"/", dirs)
	long += strings.Repeat("f", n-len(long)-3) + ".md"
	if len(long) != n {
		t.Fatalf("longestPath: %d bytes, want %d", len(long), n)
	}
	return long
}

// writeBinary writes size bytes that are not UTF-8 text.
func writeBinary(t *testing.T, p string, size int) {
	t.Helper()
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(0xff - i*7 - i/251)
	}
	must(t, os.MkdirAll(filepath.Dir(p), 0o755))
	must(t, os.WriteFile(p, b, 0o644))
}

// fixMtimes gives every path (links too) a distinct mtime with
// nanoseconds, deepest first, so that directories keep theirs.
func fixMtimes(t *testing.T, root string) {
	t.Helper()
	var all []string
	must(t, filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		all = append(all, p)
		return err
	}))
	for i := len(all) - 1; i >= 0; i-- {
		at := time.Unix(1790000000+int64(i)*3600, int64(i)*7654321%1e9)
		must(t, lchtimes(all[i], at))
	}
}

// TestEveryFileOfADocsRepo: a docs repository ingested through a proxy
// that refuses what Chroma Cloud refuses (no refusal may happen), then
// mounted: diff -r (with and without following links), find -printf of
// path, size, mode, type, link target and mtime, find -L, tar c | tar t -v
// and rsync -ancl give on the mount what they give on the source.
func TestEveryFileOfADocsRepo(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	src := filepath.Join(parent, "src")
	docsRepo(t, src)
	q := newQuotaProxy(t, env.url)
	name := collectionName(t)
	out, errOut, code := ingestCmd(t, nil, "--chroma-url", q.URL, "--collection", name, "--quiet", src)
	if code != 0 {
		t.Fatalf("ingest through the Cloud-limits proxy: exit %d: %s", code, errOut)
	}
	if n := q.BadWrites.Load(); n != 0 {
		t.Fatalf("%d requests broke Chroma Cloud's record limits", n)
	}
	dirs := 20 + strings.Count(longestPath(t, src), "/") // the root, 19 others, the long path's
	if !strings.Contains(out, fmt.Sprintf("%d directories, 4 symbolic links", dirs)) || strings.Contains(errOut, "skipped:") {
		t.Errorf("ingest summary: %s%s", out, errOut)
	}
	mnt := mountDir(t, parent)
	startMountEnv(t, nil, name, mnt, q.URL, "--prefetch", "dir")
	for _, cmd := range []string{"diff -r mnt src", "diff -r --no-dereference mnt src"} {
		if out, code := sh(t, parent, cmd, true); code != 0 || out != "" {
			t.Errorf("%s: exit %d: %.2000s", cmd, code, out)
		}
	}
	for _, script := range []string{
		// a directory's size is the file system's own business (ext4 4096,
		// tmpfs counts entries): compared for everything else
		`find . \( -type d -printf '%p - %m %y %T@\n' \) -o -printf '%p %s %m %y %l %T@\n' | sort`,
		`find -L . -printf '%p %m %y\n' | sort`,
		`tar cf - . | tar tvf - | sort`,
		`readlink latest docs/logo.png start.md; cat start.md docs/all-images/../v2/index.md; ./scripts/build.sh`,
		`ls -la images/unused nested/empty/deeper empty | grep -v '^total'`,
	} {
		sameOutput(t, mnt, src, script)
	}
	// the issue's own command, sizes of directories included: the
	// mount's are 4096 (ext4's), whatever the source's file system says
	// (tmpfs counts entries), so the source's are read as 4096 too
	if out, code := sh(t, mnt, "find . -type d -printf '%s\n' | sort -u", false); code != 0 || out != "4096\n" {
		t.Errorf("directory sizes on the mount: exit %d, %q; want 4096 each", code, out)
	}
	const issueCmd = `find . -printf '%p %s %m %y %l\n' | sort`
	got, code := sh(t, mnt, issueCmd, false)
	want, wantCode := sh(t, src, `find . \( -type d -printf '%p 4096 %m %y %l\n' \) -o -printf '%p %s %m %y %l\n' | sort`, false)
	if code != 0 || wantCode != 0 || got != want || want == "" {
		t.Errorf("%s: exit %d on the mount, %d on the source: %s", issueCmd, code, wantCode, firstDiff(got, want))
	}
	if out, code := sh(t, parent, "rsync -ancil --delete src/ mnt/", true); code != 0 || out != "" {
		t.Errorf("rsync -ancil src/ mnt/: exit %d, differences:\n%.2000s", code, out)
	}
	if n := q.BadWrites.Load() + q.TooBig.Load(); n != 0 {
		t.Errorf("%d requests broke Chroma Cloud's limits while reading", n)
	}
}

// TestLinksNeverNameHiddenPages: a public link to a private page, or
// into a private directory, does not exist for a mount that cannot see
// its target, and is a link for one that can.
func TestLinksNeverNameHiddenPages(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	src := filepath.Join(parent, "src")
	writeSource(t, src, map[string]string{
		"public.md":          "# public\n",
		"internal/secret.md": "---\npublic: false\ngroups: [admin]\n---\nthe secret\n",
	})
	must(t, os.Symlink("internal/secret.md", filepath.Join(src, "see-secret.md")))
	must(t, os.Symlink("internal", filepath.Join(src, "internal-link")))
	must(t, os.Symlink("public.md", filepath.Join(src, "see-public.md")))
	name := collectionName(t)
	if _, errOut, code := ingestCmd(t, nil, "--chroma-url", env.url, "--collection", name, "--quiet", src); code != 0 {
		t.Fatalf("ingest: %s", errOut)
	}
	pub := mountDir(t, t.TempDir())
	startMount(t, name, pub)
	for _, p := range []string{"see-secret.md", "internal-link", "internal"} {
		hiddenIsAbsent(t, pub, p)
	}
	if out, code := sh(t, pub, "ls -A; readlink see-public.md", false); code != 0 || out != "public.md\nsee-public.md\npublic.md\n" {
		t.Errorf("public view: exit %d:\n%s", code, out)
	}
	admin := mountDir(t, t.TempDir())
	startMount(t, name, admin, "--groups", "admin")
	out, code := sh(t, admin, "readlink see-secret.md internal-link; cat see-secret.md internal-link/secret.md | tail -n1", false)
	if want := "internal/secret.md\ninternal\nthe secret\n"; code != 0 || !strings.HasSuffix(out, want) {
		t.Errorf("admin view: exit %d: %q, want %q", code, out, want)
	}
}

// lchtimes sets the times of p itself, not of what a link names.
func lchtimes(p string, at time.Time) error {
	ts := []unix.Timespec{unix.NsecToTimespec(at.UnixNano()), unix.NsecToTimespec(at.UnixNano())}
	return unix.UtimesNanoAt(unix.AT_FDCWD, p, ts, unix.AT_SYMLINK_NOFOLLOW)
}
