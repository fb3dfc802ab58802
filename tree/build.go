package tree

import (
	"sort"
	"strings"
)

// Build validates the given entries (normally Doc.Visible's result) and
// builds the tree. Entries that cannot be placed are skipped with a warning
// added to warn; Build never fails.
func Build(entries map[string]Entry, version string, lim Limits, warn *Warnings) *Tree {
	if warn.max == 0 {
		warn.max = lim.MaxWarnings
	}
	files := placeFiles(entries, lim, warn)
	b := &builder{
		t:    &Tree{Version: version, Root: &Node{Ino: RootIno}},
		dirs: map[string]*Node{},
		inos: inoAllocator{},
	}
	b.dirs[""] = b.t.Root
	for _, p := range sortedKeys(files) {
		b.addFile(p, files[p])
	}
	finish(b.t.Root)
	return b.t
}

type placed struct {
	slug  string
	entry Entry
}

// placeFiles maps valid display paths to their entries, resolving clashes:
// of two files at one path the smaller slug wins, and a directory wins over
// a file.
func placeFiles(entries map[string]Entry, lim Limits, warn *Warnings) map[string]placed {
	files := make(map[string]placed, len(entries))
	dirs := map[string]bool{}
	for _, slug := range sortedKeys(entries) {
		e := entries[slug]
		p := e.DisplayPath(slug)
		parts, err := SplitPath(p, lim.MaxDepth)
		if err != nil {
			warn.add("%q: skipped: %v", slug, err)
			continue
		}
		if prev, dup := files[p]; dup {
			warn.add("%q: skipped: path %q is already used by %q", slug, p, prev.slug)
			continue
		}
		files[p] = placed{slug, e}
		for i := 1; i < len(parts); i++ {
			dirs[strings.Join(parts[:i], "/")] = true
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

type builder struct {
	t    *Tree
	dirs map[string]*Node
	inos inoAllocator
}

func (b *builder) addFile(p string, f placed) {
	dir, name := "", p
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		dir, name = p[:i], p[i+1:]
	}
	parent := b.dir(dir)
	file := &File{Slug: f.slug, Chunks: f.entry.Chunks, SHA256: f.entry.SHA256, URI: f.entry.URI}
	file.size.Store(-1)
	if f.entry.Size != nil {
		file.size.Store(*f.entry.Size)
	}
	n := &Node{Name: name, Ino: b.inos.alloc(p), Parent: parent, Mtime: f.entry.Mtime, File: file}
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
	n := &Node{Name: name, Ino: b.inos.alloc(p + "/"), Parent: parent}
	parent.Children = append(parent.Children, n)
	parent.subdirs++
	b.dirs[p] = n
	b.t.Dirs++
	return n
}

// finish sorts children and gives each directory the newest mtime below it.
func finish(n *Node) int64 {
	sort.Slice(n.Children, func(i, j int) bool { return n.Children[i].Name < n.Children[j].Name })
	for _, c := range n.Children {
		if m := c.Mtime; c.IsDir() {
			m = finish(c)
			if m > n.Mtime {
				n.Mtime = m
			}
		} else if m > n.Mtime {
			n.Mtime = m
		}
	}
	return n.Mtime
}
