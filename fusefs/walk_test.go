package fusefs

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/internal/testenv"
)

// countingFS counts the LOOKUP and READDIR(PLUS) requests a mount serves.
type countingFS struct {
	fuse.RawFileSystem
	lookups, listings atomic.Int64
}

func (c *countingFS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	c.lookups.Add(1)
	return c.RawFileSystem.Lookup(cancel, h, name, out)
}

func (c *countingFS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.listings.Add(1)
	return c.RawFileSystem.ReadDir(cancel, in, out)
}

func (c *countingFS) ReadDirPlus(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	c.listings.Add(1)
	return c.RawFileSystem.ReadDirPlus(cancel, in, out)
}

// TestColdWalkRequests counts what a metadata walk of a new mount asks of
// the FUSE server: find -name through every directory costs at most two
// listing requests a directory (its entries, then the empty answer that
// ends the listing, which the kernel needs before it caches it) and no
// LOOKUP (READDIRPLUS gave the entries); a second find costs nothing.
// This is the protocol's part of a next conversation's first walks
// (docs/BENCHMARKS.md, "Over a network"): each request is a round trip to
// this process that a local disk does not make.
func TestColdWalkRequests(t *testing.T) {
	_, err := os.Stat("/dev/fuse")
	testenv.Require(t, err == nil, "no /dev/fuse: %v", err)
	doc := map[string]any{}
	dirs := 1 // the root
	for sec := 0; sec < 6; sec++ {
		dirs++
		for part := 0; part < 8; part++ {
			dirs++
			for f := 0; f < 9; f++ {
				p := fmt.Sprintf("sec-%d/part-%d/page-%d.md", sec, part, f)
				doc[strings.TrimSuffix(p, ".md")] = map[string]any{"isPublic": true, "path": p, "sha256": fmt.Sprintf("%064x", len(doc)), "size": 100, "chunks": []int{100}}
			}
		}
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	tr := build(t, string(raw))
	f := New(tr, sized{}, Config{NoKernelPush: true})
	defer f.Close()
	opts := f.Options(fuse.MountOptions{})
	counts := &countingFS{RawFileSystem: &noOpendir{RawFileSystem: fs.NewNodeFS(f.Root(), opts)}}
	mnt := t.TempDir()
	server, err := fuse.NewServer(counts, mnt, &opts.MountOptions)
	if err != nil {
		testenv.Missing(t, "cannot mount: %v", err)
		return
	}
	go server.Serve()
	defer func() { _ = server.Unmount() }()
	if err := server.WaitMount(); err != nil {
		t.Fatal(err)
	}
	find := func() string {
		t.Helper()
		cmd := exec.Command("find", ".", "-name", "*.md")
		cmd.Dir = mnt
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("find: %v", err)
		}
		return string(out)
	}
	if n := strings.Count(find(), "\n"); n != len(doc) {
		t.Fatalf("find listed %d pages, want %d", n, len(doc))
	}
	if l, d := counts.lookups.Load(), counts.listings.Load(); l != 0 || d < int64(dirs) || d > int64(2*dirs) {
		t.Errorf("a cold find -name through %d directories: %d LOOKUPs, %d listing requests; want none, and one or two a directory", dirs, l, d)
	}
	before := counts.lookups.Load() + counts.listings.Load()
	find()
	if n := counts.lookups.Load() + counts.listings.Load() - before; n != 0 {
		t.Errorf("a second find made %d requests, want none", n)
	}
}
