package tree

import (
	"sort"
	"strings"
)

// BuildVisible validates the entries of d that a mount holding groups may
// see and builds the tree. Hidden entries are never placed; entries that
// cannot be placed are skipped with a warning added to d.Warnings.
// BuildVisible never fails.
//
// Files come first, then directory entries (empty directories, and the
// recorded mtimes of directories), then symbolic links, each placed only
// once its target resolves inside the tree built so far: a link never
// names a path the mount does not show.
func BuildVisible(d *Doc, groups []string, lim Limits) *Tree {
	if d.Warnings.max == 0 {
		d.Warnings.max = lim.MaxWarnings
	}
	pl := placeEntries(d, GroupSet(groups), lim)
	b := &builder{t: &Tree{Version: d.Version, Root: &Node{Ino: RootIno}}, dirs: map[string]*Node{}}
	b.dirs[""] = b.t.Root
	for p, f := range pl.files {
		b.addFile(p, f)
	}
	for p, e := range pl.dirs {
		b.addDir(p, e, pl.hiddenUnder[p])
	}
	b.finish(b.t.Root)
	if len(pl.links) > 0 && b.addLinks(pl.links, &d.Warnings) {
		b.finish(b.t.Root) // the links' directories and mtimes
	}
	assignInodes(b.t.Root, len(pl.files)+len(b.dirs)+len(pl.links))
	return b.t
}

type placed struct {
	slug  string
	entry Entry
}

// placement is what placeEntries decided: the visible files, symbolic
// links and directory entries by display path ("" is the root), and the
// directories below which something is hidden (their recorded mtime would
// tell when a hidden entry changed, so they take the newest mtime of what
// is shown instead).
type placement struct {
	files, links map[string]placed
	dirs         map[string]Entry
	hiddenUnder  map[string]bool
}

// placeEntries maps the valid display paths of the visible entries to
// them, resolving clashes: of two entries at one path the smaller slug
// wins (d's slugs are sorted), and a directory wins over a file or a link.
func placeEntries(d *Doc, groups map[string]bool, lim Limits) placement {
	pl := placement{files: make(map[string]placed, len(d.slugs)), links: map[string]placed{}, dirs: map[string]Entry{}}
	if d.kinds {
		pl.hiddenUnder = map[string]bool{}
	}
	dirs := map[string]bool{}
	warn := &d.Warnings
	for _, slug := range d.slugs {
		e := d.Entries[slug]
		p := e.DisplayPath(slug)
		if !e.Visible(groups) {
			if pl.hiddenUnder != nil {
				markAncestors(pl.hiddenUnder, p)
			}
			continue
		}
		if e.Type == TypeDir && p == "." {
			pl.dirs[""] = e
			continue
		}
		if err := validPath(p, lim.MaxDepth); err != nil {
			warn.add("%q: skipped: %v", slug, err)
			continue
		}
		if e.Type == TypeDir {
			if _, dup := pl.dirs[p]; !dup {
				pl.dirs[p] = e
			}
			dirs[p] = true
			markAncestors(dirs, p)
			continue
		}
		if prev, dup := pl.files[p]; dup {
			warn.add("%q: skipped: path %q is already used by %q", slug, p, prev.slug)
			continue
		}
		if prev, dup := pl.links[p]; dup {
			warn.add("%q: skipped: path %q is already used by %q", slug, p, prev.slug)
			continue
		}
		if e.Type == TypeSymlink {
			pl.links[p] = placed{slug, e}
		} else {
			pl.files[p] = placed{slug, e}
		}
		markAncestors(dirs, p)
	}
	for _, m := range []map[string]placed{pl.files, pl.links} {
		for p, f := range m {
			if dirs[p] {
				warn.add("%q: skipped: %q is also a directory", f.slug, p)
				delete(m, p)
			}
		}
	}
	return pl
}

// markAncestors sets set[a] for every directory a above p, the root ("")
// included. It climbs from p's own directory and stops at the first one
// already set (whoever set it set those above it): one map operation for
// most pages of a deep tree instead of one per level.
func markAncestors(set map[string]bool, p string) {
	for i := strings.LastIndexByte(p, '/'); i >= 0; i = strings.LastIndexByte(p[:i], '/') {
		if set[p[:i]] {
			return
		}
		set[p[:i]] = true
	}
	set[""] = true
}

type builder struct {
	t      *Tree
	dirs   map[string]*Node
	sorted bool // children are sorted (after finish): dir inserts in order
}

func splitParent(p string) (dir, name string) {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i], p[i+1:]
	}
	return "", p
}

func (b *builder) addFile(p string, f placed) {
	dir, name := splitParent(p)
	parent := b.dir(dir)
	file := &File{Slug: f.slug, Chunks: f.entry.Chunks, SHA256: f.entry.SHA256, URI: f.entry.URI,
		ChunkSHA256: f.entry.ChunkSHA256, Records: f.entry.Records, Version: f.entry.SHA256, Exec: f.entry.Exec}
	if file.Version == "" {
		file.Version = b.t.Version // no digest: only the tree version says what this content is
	}
	file.size.Store(-1)
	if f.entry.Size != nil {
		file.size.Store(*f.entry.Size)
	}
	n := &Node{Name: name, Parent: parent, Mtime: f.entry.Mtime, Nsec: uint32(f.entry.MtimeNsec), File: file}
	parent.Children = append(parent.Children, n)
	b.t.Files++
}

// addDir places a directory entry: the directory exists even when empty,
// and takes the recorded mtime unless something hidden lies below it.
func (b *builder) addDir(p string, e Entry, hiddenBelow bool) {
	n := b.dir(p)
	if hiddenBelow {
		return
	}
	n.Mtime, n.Nsec = e.Mtime, uint32(e.MtimeNsec)
	if b.t.recorded == nil {
		b.t.recorded = map[*Node]bool{}
	}
	b.t.recorded[n] = true
}

// dir returns the directory node at p, creating it and its parents.
func (b *builder) dir(p string) *Node {
	if n, ok := b.dirs[p]; ok {
		return n
	}
	parentPath, name := splitParent(p)
	parent := b.dir(parentPath)
	n := &Node{Name: name, Parent: parent}
	if b.sorted {
		insertSorted(parent, n)
	} else {
		parent.Children = append(parent.Children, n)
	}
	parent.subdirs++
	b.dirs[p] = n
	b.t.Dirs++
	return n
}

// finish sorts children and gives each directory without a recorded mtime
// the newest mtime below it.
func (b *builder) finish(n *Node) {
	sort.Slice(n.Children, func(i, j int) bool { return n.Children[i].Name < n.Children[j].Name })
	derive := !b.t.recorded[n]
	for _, c := range n.Children {
		if c.IsDir() {
			b.finish(c)
		}
		if derive && (c.Mtime > n.Mtime || c.Mtime == n.Mtime && c.Nsec > n.Nsec) {
			n.Mtime, n.Nsec = c.Mtime, c.Nsec
		}
	}
}

// assignInodes numbers the nodes from their paths — and, for files, their
// content version, for links their target: a file whose content changes
// in a new tree version gets a new inode, as a file atomically replaced on
// a local disk does, while an unchanged one keeps its number (and the
// kernel's cache of it). It walks in sorted order so that the rare hash
// collision resolves the same way every time.
func assignInodes(root *Node, n int) {
	inos := make(inoAllocator, n)
	var walk func(n *Node, path string)
	walk = func(n *Node, path string) {
		for _, c := range n.Children {
			p := path + c.Name
			switch {
			case c.IsDir():
				c.Ino = inos.alloc(p + "/")
				walk(c, p+"/")
			case c.Link != nil:
				c.Ino = inos.alloc(p + "\x00->" + c.Link.Target)
			default:
				c.Ino = inos.alloc(p + "\x00" + c.File.Version)
			}
		}
	}
	walk(root, "")
}
