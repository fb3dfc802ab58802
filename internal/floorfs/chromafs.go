package floorfs

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/chromafs/chromafs/fusefs"
	"github.com/chromafs/chromafs/tree"
)

// chunkSize is the size the pages are cut in for MountChromafs, as
// chromafs-ingest cuts them by default.
const chunkSize = 8 << 10

// MountChromafs serves the tree through chromafs's own FUSE layer (a
// fusefs.FS over the content in memory, cut in chunks as an ingest cuts
// it), pushes to the kernel on or off: that layer's cost beside the
// floor's, and what its pushes save, with no engine, cache or network
// behind it. Close the FS after unmounting.
func (t *Tree) MountChromafs(dir string, push bool) (*fuse.Server, *fusefs.FS, error) {
	tr, err := t.chromafsTree()
	if err != nil {
		return nil, nil, err
	}
	f := fusefs.New(tr, memPages{t.pages, &t.reads}, fusefs.Config{Collection: "floorfs", NoKernelPush: !push})
	server, err := f.Mount(dir, fuse.MountOptions{})
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return server, f, nil
}

// chromafsTree is the tree as chromafs serves it: every file public, at
// its own path (built once).
func (t *Tree) chromafsTree() (*tree.Tree, error) {
	t.built.Do(func() { t.built.tree, t.built.err = t.buildChromafs() })
	return t.built.tree, t.built.err
}

func (t *Tree) buildChromafs() (*tree.Tree, error) {
	entries := make(map[string]tree.Entry, len(t.pages))
	for p, b := range t.pages {
		size := int64(len(b))
		var chunks []int64
		for left := size; left > 0; left -= chunkSize {
			chunks = append(chunks, min(left, chunkSize))
		}
		entries[p] = tree.Entry{IsPublic: true, Path: p, Size: &size, Chunks: chunks, SHA256: fmt.Sprintf("%064x", len(entries))}
	}
	doc, err := tree.Encode(entries)
	if err != nil {
		return nil, fmt.Errorf("floorfs: %w", err)
	}
	d, err := tree.Decode(doc, tree.DefaultLimits)
	if err != nil {
		return nil, fmt.Errorf("floorfs: %w", err)
	}
	return tree.BuildVisible(d, nil, tree.DefaultLimits), nil
}

// memPages reads pages from memory by slug (their paths), every page
// resident, in chunks; reads counts the reads.
type memPages struct {
	pages map[string][]byte
	reads *atomic.Int64
}

func (m memPages) ReadAt(ctx context.Context, fl *tree.File, dest []byte, off int64) (int, error) {
	m.reads.Add(1)
	b := m.pages[fl.Slug]
	if off >= int64(len(b)) {
		return 0, nil
	}
	return copy(dest, b[off:]), nil
}

func (m memPages) ReadAtFrom(ctx context.Context, fl *tree.File, dest []byte, off int64) (int, string, error) {
	n, err := m.ReadAt(ctx, fl, dest, off)
	return n, "memory", err
}

func (m memPages) Prefetch(dir *tree.Node, reading *tree.File) {}

func (m memPages) EnsureSize(ctx context.Context, n *tree.Node) error { return nil }

func (m memPages) Resident(fl *tree.File) ([][]byte, bool) {
	b, ok := m.pages[fl.Slug]
	if !ok {
		return nil, false
	}
	var chunks [][]byte
	for len(b) > chunkSize {
		chunks, b = append(chunks, b[:chunkSize]), b[chunkSize:]
	}
	return append(chunks, b), true
}
