package tree

import (
	"slices"
	"strings"
)

// BuildVisible validates the entries of d that a mount holding groups may
// see and builds the tree. Hidden entries are never placed; entries that
// cannot be placed are skipped with a warning added to d.Warnings.
// BuildVisible never fails.
//
// Files come first, then the view's report of the files among them that
// are not reassembled exactly (ReportPath; only when one is marked), then
// directory entries (empty directories, and the recorded mtimes of
// directories), then symbolic links, each placed only once its target
// resolves inside the tree built so far: a link never names a path the
// mount does not show.
func BuildVisible(d *Doc, groups []string, lim Limits) *Tree {
	t, _ := build(d, groups, lim)
	return t
}

// build is BuildVisible, returning its builder too (what it counted).
func build(d *Doc, groups []string, lim Limits) (*Tree, *builder) {
	if d.Warnings.max == 0 {
		d.Warnings.max = lim.MaxWarnings
	}
	pl := placeEntries(d, GroupSet(groups), lim)
	b := &builder{t: &Tree{Version: d.Version, Root: &Node{Ino: RootIno}}, dirs: map[string]*Node{}}
	b.dirs[""] = b.t.Root
	for _, p := range pl.order {
		if f, ok := pl.files[p]; ok { // in slug order: pages of one directory come together
			b.addFile(p, f)
		}
	}
	if text := pl.report(); text != "" {
		b.addReport(text)
	}
	for p, e := range pl.dirs {
		b.addDir(p, e, pl.hiddenUnder[p])
	}
	b.finish(b.t.Root)
	if len(pl.links) > 0 && b.addLinks(pl.links, &d.Warnings) {
		b.finish(b.t.Root) // the links' directories and mtimes
	}
	assignInodes(b.t, len(pl.files)+len(b.dirs)+len(pl.links)+1)
	b.t.Hidden, b.t.HiddenKnown = pl.hidden, true
	return b.t, b
}

// placed is an entry of the document at the path it takes.
type placed = *item

// placement is what placeEntries decided: the visible files, symbolic
// links and directory entries by display path ("" is the root), and the
// directories below which something is hidden (their recorded mtime would
// tell when a hidden entry changed, so they take the newest mtime of what
// is shown instead).
type placement struct {
	files, links map[string]placed
	order        []string // the paths of files, in the order of their slugs
	hidden       []string // the slugs of the hidden pages, sorted
	dirs         map[string]Entry
	hiddenUnder  map[string]bool
}

// placeEntries maps the valid display paths of the visible entries to
// them, resolving clashes: of two entries at one path the smaller slug
// wins (d's slugs are sorted), and a directory wins over a file or a link.
// An entry at the report's place (ReportPath) is skipped: the report is
// the view's own.
func placeEntries(d *Doc, groups map[string]bool, lim Limits) placement {
	pl := placement{files: make(map[string]placed, len(d.list)), links: map[string]placed{}, dirs: map[string]Entry{}}
	if d.kinds {
		pl.hiddenUnder = map[string]bool{}
	}
	dirs := map[string]bool{}
	warn := &d.Warnings
	for i := range d.list {
		it := &d.list[i]
		slug, e := it.slug, &it.e
		p := e.DisplayPath(slug)
		if !e.Visible(groups) {
			if e.Type == TypeFile {
				pl.hidden = append(pl.hidden, slug)
			}
			if pl.hiddenUnder != nil {
				markAncestors(pl.hiddenUnder, p)
			}
			continue
		}
		if e.Type == TypeDir && p == "." {
			pl.dirs[""] = *e
			continue
		}
		if reserved(slug, p) {
			warn.add("%q: skipped: %s is the view's own report (an older chromafs-ingest index stored one for every view); re-run chromafs-ingest index", slug, ReportPath)
			continue
		}
		if err := validPath(p, lim.MaxDepth); err != nil {
			warn.add("%q: skipped: %v", slug, err)
			continue
		}
		if e.Type == TypeDir {
			if _, dup := pl.dirs[p]; !dup {
				pl.dirs[p] = *e
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
			pl.links[p] = it
		} else {
			pl.files[p] = it
			pl.order = append(pl.order, p)
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
	// last is the directory dir returned last, at lastPath.
	last     *Node
	lastPath string
	// linkSteps counts the lookups of the links' placements (resolver.at):
	// the work links cost, which a test bounds by counting, not timing
	linkSteps int64
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
	slug := f.slug
	if strings.HasPrefix(f.e.Path, slug) {
		slug = f.e.Path[:len(slug)] // one string for both: most paths are the slug and an extension
	}
	file := &File{Slug: slug, Chunks: f.e.Chunks, SHA256: f.e.SHA256, Version: f.e.SHA256, Exec: f.e.Exec}
	file.setElsewhere(Elsewhere{URI: f.e.URI, ChunkSHA256: f.e.ChunkSHA256, Records: f.e.Records})
	if file.Version == "" {
		file.Version = b.t.Version // no digest: only the tree version says what this content is
	}
	file.size.Store(-1)
	if f.e.Size != nil {
		file.size.Store(*f.e.Size)
	}
	n := &Node{Name: name, Parent: parent, Mtime: f.e.Mtime, Nsec: uint32(f.e.MtimeNsec), File: file}
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
	if b.last != nil && b.lastPath == p { // files come by directory: most ask for the one before
		return b.last
	}
	n := b.lookupDir(p)
	b.last, b.lastPath = n, p
	return n
}

func (b *builder) lookupDir(p string) *Node {
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
	slices.SortFunc(n.Children, func(a, b *Node) int { return strings.Compare(a.Name, b.Name) })
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
func assignInodes(t *Tree, n int) {
	inos := make(inoAllocator, n)
	var walk func(n *Node, h uint64)
	walk = func(n *Node, h uint64) {
		for _, c := range n.Children {
			hc := fnvString(h, c.Name)
			switch {
			case c.IsDir():
				hc = fnvString(hc, "/")
				c.Ino = inos.take(hc)
				walk(c, hc)
			case c.Link != nil:
				c.Ino = inos.take(fnvString(fnvString(hc, "\x00->"), c.Link.Target))
			default:
				c.Ino = inos.take(fnvString(fnvString(hc, "\x00"), c.File.Version))
			}
		}
	}
	walk(t.Root, fnvOffset)
	if r := t.Report; r != nil { // named like a file at the root
		r.Ino = inos.take(fnvString(fnvString(fnvString(fnvOffset, r.Name), "\x00"), r.File.Version))
	}
}
