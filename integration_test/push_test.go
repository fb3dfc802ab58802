package integration_test

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/corpus"
)

// TestKernelPush: pages a prefetch loaded are handed to the kernel's page
// cache (notify-store) for the inodes a walk made known, so that the first
// grep -r and cat of every file is answered by the kernel: every byte
// equals the source's, and of the chunk reads that reach the daemon without
// pushes (its read path counts a hit or miss for each), at most 5% still do
// with them. Not 0: on this kernel (6.18) a pushed range is now and then
// left not up to date in the page cache (1-4 chunk reads of ~2,000 seen);
// the kernel then reads those pages through FUSE, as without pushes.
func TestKernelPush(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	spec := corpus.Spec{Files: 120, Large: []int64{1<<20 + 12345, 3 << 20}, Seed: 97}
	name, src := ingestCorpus(t, parent, spec, "--chunk-size", "4096")
	readOnlyTree(t, src)
	const script = `grep -rc the . | sort | md5sum
find . -type f | sort | xargs cat | md5sum
tail -c 5000 large/big-1.md | md5sum`
	var without int64
	for _, push := range []bool{false, true} {
		t.Run(fmt.Sprintf("push=%v", push), func(t *testing.T) {
			mnt := mountDir(t, t.TempDir())
			m := startMount(t, name, mnt, "--prefetch", "all", fmt.Sprintf("--push-pages=%v", push))
			sh(t, mnt, "find . -type f | wc -l", false) // the kernel learns every inode
			files := int64(spec.Files + len(spec.Large))
			waitMetric(t, m, "chromafs_prefetched_pages_total", files)
			if push {
				waitMetric(t, m, "chromafs_kernel_cache_pushed_total", files)
			}
			before := m.metric(t, "chromafs_cache_hits_total") + m.metric(t, "chromafs_cache_misses_total")
			sameOutput(t, mnt, src, script)
			reads := m.metric(t, "chromafs_cache_hits_total") + m.metric(t, "chromafs_cache_misses_total") - before
			fmt.Printf("BENCH kernel push: push=%v, %d chunk reads reached the daemon\n", push, reads)
			switch {
			case !push:
				without = reads
				if reads == 0 {
					t.Errorf("no read reached the daemon without pushes: the test measures nothing")
				}
			case !fromKernelCache(reads, without):
				t.Errorf("%d chunk reads reached the daemon after every page was pushed to the kernel, %d without pushes: want at most 5%% of them", reads, without)
			case m.metric(t, "chromafs_kernel_cache_pushed_total") != files:
				t.Errorf("pushed %d pages, want %d (each once)", m.metric(t, "chromafs_kernel_cache_pushed_total"), files)
			}
		})
	}
}

// TestListingPush: a first grep -r of a fresh mount whose engine holds
// every page (--prefetch all) is answered from pages the listings hand to
// the kernel (pushListed): a directory's next listing request, which the
// kernel sends once it has linked the entries, carries the pages of its
// files before grep opens them. Its output is the local copy's; at most a
// fifth of the chunk reads that reach the daemon without pushes still do
// (those of the first directory grep reads, where no scan is seen yet; 16
// of 459 here), and three quarters of the pages at least reach the kernel
// by push (232 of 240 by listing here). A find reads nothing, so its
// listings push nothing; nor do they a second after a cat (a read marks a
// scan for that long).
func TestListingPush(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	spec := corpus.Spec{Files: 240, PerDir: 8, MaxDepth: 3, Seed: 41}
	name, src := ingestCorpus(t, parent, spec)
	readOnlyTree(t, src)
	files := int64(spec.Files + len(spec.Large))
	prefetched := func(t *testing.T, push bool) (string, *mount) {
		mnt := mountDir(t, t.TempDir())
		m := startMount(t, name, mnt, "--prefetch", "all", fmt.Sprintf("--push-pages=%v", push))
		waitMetric(t, m, "chromafs_prefetched_pages_total", files)
		return mnt, m
	}
	t.Run("find", func(t *testing.T) {
		mnt, m := prefetched(t, true)
		sameOutput(t, mnt, src, "find . | sort")
		if n := m.metric(t, "chromafs_kernel_cache_listed_total"); n != 0 {
			t.Errorf("a find's listings pushed %d pages: want none (nothing was read)", n)
		}
	})
	t.Run("find after cat", func(t *testing.T) {
		mnt, m := prefetched(t, true)
		// a page read after a listing of its directory: that directory
		// and its ancestors are marked
		page, err := firstPage(src)
		must(t, err)
		sameOutput(t, mnt, src, fmt.Sprintf("ls %s && cat %s | md5sum", filepath.Dir(page), page))
		time.Sleep(1500 * time.Millisecond) // the scan window (a second) passes: the time measured, not a state
		sameOutput(t, mnt, src, "find . | sort")
		if n := m.metric(t, "chromafs_kernel_cache_listed_total"); n != 0 {
			t.Errorf("a find 1.5 s after a cat pushed %d pages by listing: want none", n)
		}
	})
	const script = `grep -rc the . | sort | md5sum
find . -type f | sort | xargs cat | md5sum`
	// chunk reads that reach the daemon for the script on a fresh mount,
	// and the pages pushed by listing and by the pusher
	run := func(push bool) (reads, listed, pushed int64) {
		mnt, m := prefetched(t, push)
		before := m.metric(t, "chromafs_cache_hits_total") + m.metric(t, "chromafs_cache_misses_total")
		sameOutput(t, mnt, src, script)
		reads = m.metric(t, "chromafs_cache_hits_total") + m.metric(t, "chromafs_cache_misses_total") - before
		listed, pushed = m.metric(t, "chromafs_kernel_cache_listed_total"), m.metric(t, "chromafs_kernel_cache_pushed_total")
		fmt.Printf("BENCH listing push: push=%v, %d chunk reads reached the daemon, %d pages pushed by listings, %d by the pusher\n", push, reads, listed, pushed)
		return reads, listed, pushed
	}
	without, _, _ := run(false)
	if without < files {
		t.Fatalf("%d chunk reads reached the daemon for %d files without pushes: the test measures nothing", without, files)
	}
	reads, listed, pushed := run(true)
	if reads*5 > without {
		t.Errorf("%d chunk reads reached the daemon with listing pushes, %d without: want at most a fifth", reads, without)
	}
	if listed == 0 || (listed+pushed)*4 < files*3 {
		t.Errorf("%d pages of %d pushed by listings, %d by the pusher: want three quarters at least, some by listing", listed, files, pushed)
	}
}

// firstPage is the path, relative to root, of the first regular file
// under a directory of root.
func firstPage(root string) (string, error) {
	var page string
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || page != "" {
			return err
		}
		if rel, _ := filepath.Rel(root, p); e.Type().IsRegular() && filepath.Dir(rel) != "." {
			page = rel
			return filepath.SkipAll
		}
		return nil
	})
	if err == nil && page == "" {
		err = fmt.Errorf("no page in a directory of %s", root)
	}
	return page, err
}
