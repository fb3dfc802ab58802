package tree

import (
	"sort"
	"strings"
)

// BuildVisible validates the entries of d that a mount holding groups may
// see and builds the tree. Hidden entries are never placed; entries that
// cannot be placed are skipped with a warning added to d.Warnings.
// BuildVisible never fails.
func BuildVisible(d *Doc, groups []string, lim Limits) *Tree {
	if d.Warnings.max == 0 {
		d.Warnings.max = lim.MaxWarnings
	}
	files := placeFiles(d, GroupSet(groups), lim)
	b := &builder{t: &Tree{Version: d.Version, Root: &Node{Ino: RootIno}}, dirs: map[string]*Node{}}
	b.dirs[""] = b.t.Root
	for p, f := range files {
		b.addFile(p, f)
	}
	finish(b.t.Root)
	assignInodes(b.t.Root, len(files)+len(b.dirs))
	return b.t
}

type placed struct {
	slug  string
	entry Entry
}

// placeFiles maps the valid display paths of the visible entries to them,
// resolving clashes: of two files at one path the smaller slug wins (d's
// slugs are sorted), and a directory wins over a file.
func placeFiles(d *Doc, groups map[string]bool, lim Limits) map[string]placed {
	files := make(map[string]placed, len(d.slugs))
	dirs := map[string]bool{}
	warn := &d.Warnings
	for _, slug := range d.slugs {
		e := d.Entries[slug]
		if !e.Visible(groups) {
			continue
		}
		p := e.DisplayPath(slug)
		if _, err := SplitPath(p, lim.MaxDepth); err != nil {
			warn.add("%q: skipped: %v", slug, err)
			continue
		}
		if prev, dup := files[p]; dup {
			warn.add("%q: skipped: path %q is already used by %q", slug, p, prev.slug)
			continue
		}
		files[p] = placed{slug, e}
		for i := strings.IndexByte(p, '/'); i >= 0; i = nextSlash(p, i) {
			dirs[p[:i]] = true
		}
	}
	for p, f := range files {
		if dirs[p] {
			warn.add("%q: skipped: %q is also a directory", f.slug, p)
			delete(files, p)
		}
	}
	return files
}

func nextSlash(p string, i int) int {
	j := strings.IndexByte(p[i+1:], '/')
	if j < 0 {
		return -1
	}
	return i + 1 + j
}

type builder struct {
	t    *Tree
	dirs map[string]*Node
}

func (b *builder) addFile(p string, f placed) {
	dir, name := "", p
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		dir, name = p[:i], p[i+1:]
	}
	parent := b.dir(dir)
	file := &File{Slug: f.slug, Chunks: f.entry.Chunks, SHA256: f.entry.SHA256, URI: f.entry.URI, Version: f.entry.SHA256, Exec: f.entry.Exec}
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

// dir returns the directory node at p, creating it and its parents.
func (b *builder) dir(p string) *Node {
	if n, ok := b.dirs[p]; ok {
		return n
	}
	parentPath, name := "", p
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		parentPath, name = p[:i], p[i+1:]
	}
	parent := b.dir(parentPath)
	n := &Node{Name: name, Parent: parent}
	parent.Children = append(parent.Children, n)
	parent.subdirs++
	b.dirs[p] = n
	b.t.Dirs++
	return n
}

// finish sorts children and gives each directory the newest mtime below it.
func finish(n *Node) {
	sort.Slice(n.Children, func(i, j int) bool { return n.Children[i].Name < n.Children[j].Name })
	for _, c := range n.Children {
		if c.IsDir() {
			finish(c)
		}
		if c.Mtime > n.Mtime || c.Mtime == n.Mtime && c.Nsec > n.Nsec {
			n.Mtime, n.Nsec = c.Mtime, c.Nsec
		}
	}
}

// assignInodes numbers the nodes from their paths — and, for files, their
// content version: a file whose content changes in a new tree version gets
// a new inode, as a file atomically replaced on a local disk does, while an
// unchanged one keeps its number (and the kernel's cache of it). It walks
// in sorted order so that the rare hash collision resolves the same way
// every time.
func assignInodes(root *Node, n int) {
	inos := make(inoAllocator, n)
	var walk func(n *Node, path string)
	walk = func(n *Node, path string) {
		for _, c := range n.Children {
			p := path + c.Name
			if c.IsDir() {
				c.Ino = inos.alloc(p + "/")
				walk(c, p+"/")
			} else {
				c.Ino = inos.alloc(p + "\x00" + c.File.Version)
			}
		}
	}
	walk(root, "")
}
