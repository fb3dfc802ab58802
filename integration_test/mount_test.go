package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/internal/corpus"
	"github.com/chromafs/chromafs/internal/testenv"
	"github.com/chromafs/chromafs/tree"
)

// ingestCorpus generates a corpus in parent/src, ingests it and returns
// the collection name and the source directory.
func ingestCorpus(t *testing.T, parent string, spec corpus.Spec, args ...string) (string, string) {
	t.Helper()
	src := filepath.Join(parent, "src")
	must(t, os.MkdirAll(src, 0o755))
	_, err := corpus.Generate(src, spec)
	must(t, err)
	name := collectionName(t)
	all := append([]string{"--chroma-url", env.url, "--collection", name, "--quiet"}, args...)
	if _, errOut, code := ingestCmd(t, nil, append(all, src)...); code != 0 {
		t.Fatalf("ingest exit %d: %s", code, errOut)
	}
	return name, src
}

func TestMountEquivalence(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 2000, PerDir: 10, Large: []int64{20 << 20}, Edge: true, Seed: 7})
	readOnlyTree(t, src)
	mnt := mountDir(t, parent)
	m := startMount(t, name, mnt, "--prefetch", "dir") // auto would warm this small collection in the background
	t.Run("metadata-walk-costs-no-request-on-a-fresh-mount", func(t *testing.T) {
		// each step's output is compared with the local copy's: a walk
		// that failed early would make no request too
		const walk = "find . | wc -l && ls -lR | wc -l && du -sb . | cut -f1 && stat -c '%s %h' large/big-0.md"
		before := m.metric(t, "chromafs_chroma_requests_total")
		got, code := sh(t, mnt, walk, true)
		after := m.metric(t, "chromafs_chroma_requests_total")
		want, wantCode := sh(t, src, walk, true)
		if code != 0 || wantCode != 0 || got != want || len(strings.Fields(want)) != 5 {
			t.Fatalf("metadata walk: exit %d, %q on the mount; exit %d, %q on the local copy", code, got, wantCode, want)
		}
		if after != before {
			t.Errorf("metadata walk made %d Chroma requests, want 0", after-before)
		}
	})
	t.Run("mounted-ro-nosuid-nodev", func(t *testing.T) { readOnlyMount(t, mnt, "the defaults") })

	// the first read of everything, with --prefetch dir: about one
	// request per directory at most (README, --prefetch), and one per
	// 1 MiB window of the 20 MiB page
	before := m.metric(t, "chromafs_chroma_requests_total")
	if out, code := sh(t, parent, "diff -r mnt src", true); code != 0 || out != "" {
		t.Fatalf("diff -r: exit %d\n%.2000s", code, out)
	}
	dirs, _ := sh(t, src, "find . -type d | wc -l", false)
	if n, most := m.metric(t, "chromafs_chroma_requests_total")-before, int64(atoi(strings.TrimSpace(dirs))+20); n > most || most <= 20 {
		t.Errorf("a cold diff -r with --prefetch dir made %d requests, want at most %d (one per directory, one per window of the large page)", n, most)
	} else {
		t.Logf("a cold diff -r of %s directories with --prefetch dir: %d requests", strings.TrimSpace(dirs), n)
	}
	scripts := []struct{ name, script string }{
		{"ls-laR", "ls -lanR --time-style=+TS ."},
		{"find-files", "find . -type f | sort"},
		{"find-count", "find . | wc -l"},
		{"find-name", "find . -name '*.md' | sort"},
		{"find-size", "find . -size +12k | sort"},
		{"find-dirs", "find . -type d | sort"},
		{"grep-rn", "grep -rn 'kernel page' . | sort"},
		{"grep-rli", "grep -rli 'CAFÉ' . | sort"},
		{"grep-rc", "grep -rc chunk . | sort"},
		{"grep-rw", "grep -rw the . | sort | md5sum"},
		{"grep-unicode", "grep -rn 'こんにちは' ."},
		{"cat", "cat guides/page-0000.mdx edge/crlf.md edge/bom.md 'edge/with space/file name.md' edge/no-final-newline.md"},
		{"head-c", "head -c 1000 large/big-0.md; head -c 5 edge/empty.md; head -c 3 edge/multibyte-run.md"},
		{"tail-n", "tail -n 5 large/big-0.md; tail -c 7 edge/no-final-newline.md"},
		{"wc", "find . -type f -print0 | sort -z | xargs -0 wc"},
		{"du-ab", "du -ab . | sort"},
		{"du-blocks", "du -a . | sort"},
		{"stat", "find . -print0 | sort -z | xargs -0 stat -c '%n %s %F %a %h'"},
		{"md5sum", "find . -type f -print0 | sort -z | xargs -0 md5sum"},
		{"tar", "tar cf - . | tar tvf - --numeric-owner | sed -E 's/[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}/TS/' | sort"},
		{"rg-n", "rg -n --hidden --sort path 'webhook client' ."},
		{"rg-c", "rg -c --hidden --sort path 'chromafs' ."},
	}
	for _, s := range scripts {
		t.Run(s.name, func(t *testing.T) { sameOutput(t, mnt, src, s.script) })
	}
	t.Run("mmap", func(t *testing.T) { sameMmap(t, mnt, src) })
	t.Run("stat-mtime", func(t *testing.T) { sameFileMtimes(t, mnt, src) })
	t.Run("write-paths-EROFS", func(t *testing.T) { writesFail(t, mnt) })
	t.Run("no-extended-attributes", func(t *testing.T) { noXattrs(t, mnt) })
	t.Run("SIGTERM-unmounts", func(t *testing.T) {
		must(t, m.cmd.Process.Signal(syscall.SIGTERM))
		select {
		case err := <-m.exited:
			if err != nil {
				t.Errorf("exit after SIGTERM: %v\n%s", err, m.logs)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("no exit 15s after SIGTERM")
		}
		if isMounted(mnt) {
			t.Error("still mounted after SIGTERM")
		}
	})
}

// noXattrs: the root, a directory and files of every kind have no
// extended attribute: listing them is EOPNOTSUPP (the kernel was told the
// file system has none, once, and answers itself), as is asking for the
// names tools ask for; asked twice; getfattr prints no attribute.
func noXattrs(t *testing.T, mnt string) {
	for _, rel := range []string{".", "guides", "guides/page-0000.mdx", "large/big-0.md", "edge/empty.md"} {
		p := filepath.Join(mnt, rel)
		for round := 0; round < 2; round++ {
			if n, err := unix.Listxattr(p, make([]byte, 1024)); err != unix.EOPNOTSUPP {
				t.Errorf("listxattr %s: %d bytes of names, %v; want EOPNOTSUPP", rel, n, err)
			}
			// (trusted.* and security.* are the kernel's, and the security
			// module's, to answer before FUSE is asked: not this test's)
			for _, name := range []string{"user.mime_type", "user.xdg.origin.url", "system.posix_acl_access"} {
				want := unix.EOPNOTSUPP
				if strings.HasPrefix(name, "system.posix_acl_") {
					want = unix.ENODATA // the kernel's own answer: no ACL
				}
				if _, err := unix.Getxattr(p, name, make([]byte, 64)); err != want {
					t.Errorf("getxattr %s %s: %v, want %v", rel, name, err, want)
				}
			}
		}
	}
	// exit 1: getfattr reports "Operation not supported" for each file
	if out, code := sh(t, mnt, "getfattr -R -d -m - . 2>/dev/null | wc -c", false); code > 1 || strings.TrimSpace(out) != "0" {
		t.Errorf("getfattr -R -d -m - .: exit %d, %s bytes of attributes, want none", code, strings.TrimSpace(out))
	}
}

// fuseWaiting is the number of requests of the FUSE mount at mnt that
// its server has not answered yet (fusectl's "waiting").
func fuseWaiting(t *testing.T, mnt string) int {
	t.Helper()
	const ctl = "/sys/fs/fuse/connections"
	if _, err := os.Stat(ctl); err == nil && !isMounted(ctl) {
		if out, err := exec.Command("mount", "-t", "fusectl", "fusectl", ctl).CombinedOutput(); err != nil {
			testenv.Missing(t, "fusectl is not mounted and cannot be: %v %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("umount", ctl).Run() }) // as it was
	}
	var st syscall.Stat_t
	must(t, syscall.Stat(mnt, &st))
	b, err := os.ReadFile(fmt.Sprintf("/sys/fs/fuse/connections/%d/waiting", unix.Minor(st.Dev)))
	if err != nil {
		testenv.Missing(t, "fusectl's waiting count: %v", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	must(t, err)
	return n
}

// sameMmap reads files through mmap(2) on both sides.
func sameMmap(t *testing.T, mnt, src string) {
	for _, rel := range []string{"large/big-0.md", "edge/crlf.md", "guides/page-0000.mdx", "edge/ünïcödé/日本語のページ.mdx"} {
		a, b := mmapRead(t, filepath.Join(mnt, rel)), mmapRead(t, filepath.Join(src, rel))
		if !bytes.Equal(a, b) {
			t.Errorf("%s: mmap contents differ (%d vs %d bytes)", rel, len(a), len(b))
		}
	}
}

func mmapRead(t *testing.T, p string) []byte {
	t.Helper()
	f, err := os.Open(p)
	must(t, err)
	defer f.Close()
	st, err := f.Stat()
	must(t, err)
	data, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	must(t, err)
	defer syscall.Munmap(data)
	return append([]byte(nil), data...)
}

func sameFileMtimes(t *testing.T, mnt, src string) {
	must(t, filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		st, err := os.Stat(filepath.Join(mnt, rel))
		if err != nil {
			return err
		}
		if st.ModTime().Unix() != info.ModTime().Unix() {
			t.Errorf("%s: mtime %v on the mount, %v locally", rel, st.ModTime(), info.ModTime())
		}
		return nil
	}))
}

func writesFail(t *testing.T, mnt string) {
	for _, s := range []string{
		"touch new.md", "touch guides/page-0000.mdx", "mkdir newdir", "rm guides/page-0000.mdx", "rmdir edge",
		"mv guides/page-0000.mdx guides/x.md", "echo x >> guides/page-0000.mdx", "echo x > new.md",
		"truncate -s 0 guides/page-0000.mdx", "chmod 777 guides/page-0000.mdx", "chown 1:1 guides/page-0000.mdx",
		"ln -s guides link", "ln guides/page-0000.mdx hard", "setfattr -n user.k -v v guides/page-0000.mdx",
		"mkfifo fifo", "cp edge/crlf.md edge/copy.md",
	} {
		out, code := sh(t, mnt, s, true)
		if code == 0 || !strings.Contains(out, "Read-only file system") {
			t.Errorf("%s: exit %d, %q; want EROFS", s, code, out)
		}
	}
}

func TestMountRequestCounts(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, _ := ingestCorpus(t, parent, corpus.Spec{Files: 20, MinSize: 60 << 10, MaxSize: 90 << 10, Large: []int64{20 << 20}, Seed: 8})
	mnt := mountDir(t, parent)
	m := startMount(t, name, mnt, "--prefetch", "none")

	t.Run("64-parallel-cats-one-request", func(t *testing.T) {
		// the kernel lets one READ of a page through and holds the other
		// cats on its page lock: one request, whatever the daemon does
		page := filepath.Join(mnt, "guides/page-0004.md")
		before := m.metric(t, "chromafs_chroma_requests_total")
		var wg sync.WaitGroup
		outs := make([][]byte, 64)
		start := make(chan struct{})
		for i := range outs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				outs[i], _ = exec.Command("cat", page).Output()
			}()
		}
		close(start)
		wg.Wait()
		if n := m.metric(t, "chromafs_chroma_requests_total") - before; n != 1 {
			t.Errorf("64 parallel cats of one uncached page made %d requests, want 1", n)
		}
		want, err := os.ReadFile(filepath.Join(parent, "src/guides/page-0004.md"))
		must(t, err)
		for i, o := range outs {
			if !bytes.Equal(o, want) {
				t.Fatalf("cat %d read %d bytes, want %d", i, len(o), len(want))
			}
		}
	})
	t.Run("64-direct-readers-share-one-load", func(t *testing.T) {
		// O_DIRECT bypasses the page cache: each reader's READ of its own
		// 4 KiB of an uncached page reaches the daemon, whose one get is
		// held (a proxy's gate) until all 64 READs wait in it (the
		// kernel's count, fusectl's "waiting"): the daemon must load the
		// page once and hand it to the other 63
		p := newFaultProxy(t, env.url)
		gated := mountDir(t, t.TempDir())
		g := startMountEnv(t, nil, name, gated, p.URL, "--prefetch", "none")
		rel := "guides/page-0005.mdx"
		want, err := os.ReadFile(filepath.Join(parent, "src", rel))
		must(t, err)
		pages := len(want) / 4096
		// opened (and looked up) first, and fusectl asked once: while the
		// gate is shut, the only requests waiting are the 64 READs
		files := make([]*os.File, 64)
		for i := range files {
			f, err := os.OpenFile(filepath.Join(gated, rel), os.O_RDONLY|syscall.O_DIRECT, 0)
			must(t, err)
			t.Cleanup(func() { f.Close() })
			files[i] = f
		}
		if n := fuseWaiting(t, gated); n != 0 {
			t.Fatalf("%d FUSE requests waiting before the readers start", n)
		}
		gets, shared := p.gets.Load(), g.metric(t, "chromafs_loads_shared_total")
		p.set("gate")
		var once sync.Once
		open := func() { once.Do(func() { close(p.gate) }) }
		t.Cleanup(open) // a failure below must not leave the readers held
		var wg sync.WaitGroup
		errs := make([]error, 64)
		for i, f := range files {
			wg.Add(1)
			go func() {
				defer wg.Done()
				off := int64(i%pages) * 4096
				buf := make([]byte, 4096)
				n, err := f.ReadAt(buf, off)
				if err != nil || !bytes.Equal(buf[:n], want[off:off+4096]) {
					errs[i] = fmt.Errorf("reader %d at %d: %d bytes, %v, want its 4096 bytes", i, off, n, err)
				}
			}()
		}
		waiting := 0
		waitFor(t, 10*time.Second, func() bool { waiting = fuseWaiting(t, gated); return waiting >= 64 && p.inflight.Load() >= 1 },
			func() string {
				return fmt.Sprintf("%d FUSE requests waiting, %d gets held", waiting, p.inflight.Load())
			})
		open()
		wg.Wait()
		p.set("")
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if n := p.gets.Load() - gets; n != 1 {
			t.Errorf("64 direct readers of one uncached page made %d gets, want 1", n)
		}
		if n := g.metric(t, "chromafs_loads_shared_total") - shared; n != 63 {
			t.Errorf("64 direct readers: %d reads served by another's load, want 63", n)
		}
	})
	t.Run("ranged-read-fetches-only-its-chunks", func(t *testing.T) {
		before := m.metric(t, "chromafs_cache_bytes")
		reqs := m.metric(t, "chromafs_chroma_requests_total")
		out, code := sh(t, mnt, "head -c 1024 large/big-0.md | wc -c", false)
		if code != 0 || strings.TrimSpace(out) != "1024" {
			t.Fatalf("head -c 1024: %q exit %d", out, code)
		}
		fetched := m.metric(t, "chromafs_cache_bytes") - before
		// one window (1 MiB: the whole chunks within it)
		if fetched > 1<<20 || fetched <= 0 {
			t.Errorf("reading the first KiB of a 20 MiB page cached %d bytes, want one window of at most 1 MiB", fetched)
		}
		if n := m.metric(t, "chromafs_chroma_requests_total") - reqs; n != 1 {
			t.Errorf("reading the first KiB made %d requests, want 1 (one window)", n)
		}
	})
	t.Run("warm-read-from-page-cache", func(t *testing.T) {
		if _, code := sh(t, mnt, "cat guides/page-0007.md >/dev/null", false); code != 0 {
			t.Fatal("cat failed")
		}
		before := m.metric(t, "chromafs_chroma_requests_total")
		hits := m.metric(t, "chromafs_cache_hits_total")
		sh(t, mnt, "cat guides/page-0007.md >/dev/null && cat guides/page-0007.md >/dev/null", false)
		if m.metric(t, "chromafs_chroma_requests_total") != before || m.metric(t, "chromafs_cache_hits_total") != hits {
			t.Errorf("a warm re-read reached the daemon; the kernel page cache should serve it")
		}
	})
}

// TestMountForeignLayout mounts a collection in Mintlify's layout, written
// directly: flat tree without sizes, /<slug>.mdx paths, chunk_index as int
// or string, no chunk lengths, ids of its own.
func TestMountForeignLayout(t *testing.T) {
	requireFUSE(t)
	name := collectionName(t)
	ctx := context.Background()
	st, err := chroma.OpenOrCreate(ctx, conn(t, name), nil)
	must(t, err)
	defer st.Close()
	pages := map[string]string{
		"introduction":            "# Intro\nWelcome to the docs.\n",
		"guides/setup":            "Setup steps:\r\n1. install\r\n2. run",
		"guides/advanced/tuning":  strings.Repeat("tune the cache; ", 400),
		"api/reference/endpoints": "GET /v1/things — returns things ✓\n",
		"internal/billing":        "secret pricing\n",
		"guides/empty":            "",
	}
	access := map[string]string{"internal/billing": `{"isPublic": false, "groups": ["admin"]}`}
	var recs []chroma.Record
	var treeJSON []string
	n := 0
	for slug, content := range pages {
		for i, rest := 0, content; rest != ""; i++ {
			k := min(37, len(rest))
			idx := v2Index(i)
			recs = append(recs, chroma.Record{ID: fmt.Sprintf("mint-%d", n), Text: rest[:k], Metadata: foreignMeta(slug, idx)})
			rest = rest[k:]
			n++
		}
		a := access[slug]
		if a == "" {
			a = `{"isPublic": true, "groups": []}`
		}
		treeJSON = append(treeJSON, fmt.Sprintf("%q: %s", slug, a))
	}
	wrapped, err := tree.Wrap([]byte("{" + strings.Join(treeJSON, ",") + "}"))
	must(t, err)
	recs = append(recs, chroma.Record{ID: chroma.TreeID, Text: wrapped, Metadata: foreignMeta("", nil)})
	must(t, st.Upsert(ctx, recs))

	parent := t.TempDir()
	local := filepath.Join(parent, "local")
	for slug, content := range pages {
		if slug != "internal/billing" {
			copyFile(t, filepath.Join(local, slug+".mdx"), strings.NewReader(content))
		}
	}
	readOnlyTree(t, local)
	mnt := mountDir(t, parent)
	m := startMount(t, name, mnt, "--prefetch", "none") // nothing read ahead: the sizes are stat's work
	// sizes the layout does not record are computed before stat reports
	// them, one batched request for each directory holding pages (the
	// root, guides, guides/advanced, api/reference)
	before := m.metric(t, "chromafs_chroma_requests_total")
	if out, code := sh(t, mnt, "ls -lR . | wc -l", false); code != 0 || strings.TrimSpace(out) == "0" {
		t.Fatalf("ls -lR: exit %d, %q", code, out)
	}
	if n := m.metric(t, "chromafs_chroma_requests_total") - before; n != 4 {
		t.Errorf("ls -lR of 4 directories holding pages made %d requests, want 4 (one batch each)", n)
	}
	if out, code := sh(t, parent, "diff -r mnt local", true); code != 0 {
		t.Fatalf("diff -r: %s", out)
	}
	for _, s := range []string{"ls -lanR --time-style=+TS . | grep -v '^total'", "find . -type f | sort", "find . -type f -print0 | sort -z | xargs -0 md5sum", "du -ab . | sort", "grep -rn cache . | sort | md5sum"} {
		sameOutput(t, mnt, local, s)
	}
	if _, err := os.Stat(filepath.Join(mnt, "internal")); !os.IsNotExist(err) {
		t.Errorf("private page's directory visible: %v", err)
	}
	admin := filepath.Join(parent, "admin")
	must(t, os.Mkdir(admin, 0o755))
	startMount(t, name, admin, "--groups", "admin")
	if b, err := os.ReadFile(filepath.Join(admin, "internal/billing.mdx")); err != nil || string(b) != pages["internal/billing"] {
		t.Errorf("admin mount: %q, %v", b, err)
	}
}

func v2Index(i int) any {
	if i%2 == 1 {
		return fmt.Sprint(i) // Mintlify collections may store it as a string
	}
	return i
}

func foreignMeta(slug string, idx any) chromaMeta {
	md := map[string]any{"source": "mintlify"}
	if slug != "" {
		md["page"] = slug
		md["chunk_index"] = idx
	}
	return newMeta(md)
}

// TestPrefetchAll warms the whole collection after mounting; a grep -r
// afterwards makes no request.
func TestPrefetchAll(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 150, Seed: 13})
	mnt := mountDir(t, parent)
	m := startMount(t, name, mnt, "--prefetch", "all")
	waitMetric(t, m, "chromafs_prefetched_pages_total", 150)
	before := m.metric(t, "chromafs_chroma_requests_total")
	sameOutput(t, mnt, src, "grep -rc chunk . | sort")
	if n := m.metric(t, "chromafs_chroma_requests_total") - before; n != 0 {
		t.Errorf("grep -r after --prefetch all made %d requests, want 0", n)
	}
}
