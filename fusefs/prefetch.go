package fusefs

import (
	"context"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/tree"
)

// batchPages is how many pages one prefetch request asks for.
const batchPages = 100

// prefetchDir is called on a content read in dir. The first read in a
// group of directories (see planWalk) starts background loads of that group
// and of the next Lookahead groups, one batched request each, so a process
// walking the tree in grep -r order finds files cached and the requests are
// pipelined. The file being read is left out: its reader fetches it alone,
// which is faster than waiting for a batch. It is not called on opendir, so
// metadata walks (find, ls -lR) cost no request. Each group loads once, and
// the batches claim their keys before returning: a read of one of their
// pages waits for it instead of asking again. It never blocks the caller.
func (f *FS) prefetchDir(dir *tree.Node, reading *tree.File) {
	if f.cfg.Prefetch == PrefetchNone || dir == nil {
		return
	}
	if _, seen := f.visited.LoadOrStore(dir, struct{}{}); seen {
		return
	}
	g, ok := f.groupOf[dir]
	if !ok {
		return
	}
	for h := g; h < len(f.groups) && h <= g+f.cfg.Lookahead; h++ {
		f.prefetchGroup(h, reading)
	}
}

// prefetchGroup starts the load of one group's files, once.
func (f *FS) prefetchGroup(g int, skip *tree.File) {
	if _, done := f.prefetched.LoadOrStore(g, struct{}{}); done {
		return
	}
	budget := f.cache.Room() / 2
	var files []*tree.File
	for _, dir := range f.groups[g] {
		for _, fl := range f.prefetchable(dir, &budget) {
			if fl != skip {
				files = append(files, fl)
			}
		}
	}
	f.loadFiles(f.ctx, files)
}

// prefetchable lists the files of dir worth loading: not cached, not
// empty, small enough to arrive in one window, within the byte budget.
func (f *FS) prefetchable(dir *tree.Node, budget *int64) []*tree.File {
	var out []*tree.File
	for _, c := range dir.Children {
		fl := c.File
		if fl == nil || (fl.Chunks != nil && len(fl.Chunks) == 0) || f.cached(fl) {
			continue
		}
		size, known := fl.Size()
		if !known {
			size = 0
		} else if size == 0 {
			continue
		}
		if size > f.cfg.WindowBytes || size > *budget {
			continue
		}
		*budget -= size
		out = append(out, fl)
	}
	return out
}

func (f *FS) cached(fl *tree.File) bool {
	if fl.Chunks == nil {
		return f.cache.Contains(f.key(fl, wholePage))
	}
	return f.cache.Contains(f.key(fl, 0))
}

// loadFiles starts loads of whole pages in batches, sharing flight keys
// with reads so a reader of a page in a running batch waits for it.
func (f *FS) loadFiles(ctx context.Context, files []*tree.File) {
	for start := 0; start < len(files) && ctx.Err() == nil; start += batchPages {
		batch := files[start:min(start+batchPages, len(files))]
		byKey := make(map[string]*tree.File, len(batch))
		keys := make([]string, 0, len(batch))
		for _, fl := range batch {
			k := flightKeyWhole(fl)
			byKey[k] = fl
			keys = append(keys, k)
		}
		f.flights.DoBatch(keys, func(ctx context.Context, claimed []string) (map[string]any, error) {
			return f.loadBatch(ctx, claimed, byKey)
		})
	}
}

// flightKeyWhole is the key under which a whole page is loaded: window 0
// for chunked pages (prefetch only takes pages that fit one window), the
// whole-page key otherwise.
func flightKeyWhole(fl *tree.File) string {
	if fl.Chunks == nil {
		return wholeKey(fl)
	}
	return windowKey(fl, 0)
}

func (f *FS) loadBatch(ctx context.Context, keys []string, byKey map[string]*tree.File) (map[string]any, error) {
	refs := make([]chroma.PageRef, len(keys))
	for i, k := range keys {
		refs[i] = pageRef(byKey[k])
	}
	var pages map[string]chroma.Page
	err := f.fetch(ctx, func(ctx context.Context) (err error) {
		pages, err = f.src.FetchPages(ctx, refs)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(keys))
	for _, k := range keys {
		fl := byKey[k]
		p, ok := pages[fl.Slug]
		if !ok || p.Err != nil {
			continue // the reader will fetch it alone and report the error
		}
		f.prefetchPages.Add(1)
		if fl.Chunks == nil {
			out[k] = f.storeWhole(fl, p.Chunks)
		} else {
			out[k] = f.storeChunks(fl, 0, p.Chunks)
		}
	}
	return out, nil
}

// ensureSize makes a file's size known before it is reported: the unknown
// sizes of its whole directory are loaded in one batch first.
func (f *FS) ensureSize(ctx context.Context, n *tree.Node) error {
	if _, ok := n.File.Size(); ok {
		return nil
	}
	var unknown []*tree.File
	for _, c := range n.Parent.Children {
		if c.File != nil {
			if _, ok := c.File.Size(); !ok {
				unknown = append(unknown, c.File)
			}
		}
	}
	f.loadFiles(f.ctx, unknown)    // detached: the batch serves other callers too
	_, err := f.whole(ctx, n.File) // waits for the batch, or loads alone
	return err
}
