package tree

import (
	"sort"
	"strings"
)

// maxLinkHops bounds how many symbolic links one resolution follows, as
// Linux does (ELOOP after 40).
const maxLinkHops = 40

// addLinks places the symbolic links whose targets resolve, in the tree
// built so far, to a node the mount shows: a link to a hidden or missing
// path, one leaving the tree, and a loop are skipped. Links may name other
// links, so it places what resolves and tries the rest again until nothing
// more does. It reports whether it placed any.
func (b *builder) addLinks(links map[string]placed, warn *Warnings) bool {
	pending := make([]string, 0, len(links))
	for p := range links {
		pending = append(pending, p)
	}
	sort.Strings(pending)
	placedAny := false
	b.sorted = true // from now on b.dir keeps children sorted
	for progress := true; progress && len(pending) > 0; {
		progress = false
		rest := pending[:0]
		for _, p := range pending {
			if b.resolves(p, links[p].entry.Target) {
				b.addLink(p, links[p])
				progress, placedAny = true, true
			} else {
				rest = append(rest, p)
			}
		}
		pending = rest
	}
	for _, p := range pending {
		warn.add("%q: skipped: symbolic link does not resolve to a path this mount shows", links[p].slug)
	}
	return placedAny
}

// addLink inserts a link node, keeping its directory's children sorted so
// that later resolutions can look it up.
func (b *builder) addLink(p string, l placed) {
	dir, name := splitParent(p)
	parent := b.dir(dir)
	n := &Node{Name: name, Parent: parent, Mtime: l.entry.Mtime, Nsec: uint32(l.entry.MtimeNsec), Link: &Link{Target: l.entry.Target}}
	insertSorted(parent, n)
	b.t.Links++
}

// insertSorted adds n to parent's children, keeping them sorted.
func insertSorted(parent, n *Node) {
	i := sort.Search(len(parent.Children), func(i int) bool { return parent.Children[i].Name >= n.Name })
	parent.Children = append(parent.Children, nil)
	copy(parent.Children[i+1:], parent.Children[i:])
	parent.Children[i] = n
}

// resolves reports whether the link at p, with target, names a node of the
// tree (or a directory the link itself makes exist: its own ancestors).
func (b *builder) resolves(p, target string) bool {
	dir, _ := splitParent(p)
	r := resolver{b: b, self: p}
	_, ok := r.follow(components(dir), target, 0)
	return ok
}

func components(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// resolver follows link targets through the tree being built.
type resolver struct {
	b    *builder
	self string // the link being placed: its ancestors count as directories
}

// follow resolves target from the directory at from and returns the
// components of the path it names; ok is false when it leaves the tree,
// names nothing, passes through a file or loops.
func (r resolver) follow(from []string, target string, hops int) ([]string, bool) {
	if hops > maxLinkHops {
		return nil, false
	}
	cur := append([]string(nil), from...)
	parts := strings.Split(target, "/")
	for i, c := range parts {
		switch c {
		case "", ".":
			continue
		case "..":
			if len(cur) == 0 {
				return nil, false // above the mount root
			}
			cur = cur[:len(cur)-1]
			continue
		}
		cur = append(cur, c)
		last := i == len(parts)-1
		n, isDir := r.at(cur)
		switch {
		case n != nil && n.Link != nil:
			next, ok := r.follow(cur[:len(cur)-1], n.Link.Target, hops+1)
			if !ok {
				return nil, false
			}
			cur = next
			if _, isDir = r.at(cur); !isDir && !last {
				return nil, false
			}
		case !isDir && (n == nil || !last):
			return nil, false
		}
	}
	if strings.HasSuffix(target, "/") {
		if _, isDir := r.at(cur); !isDir {
			return nil, false
		}
	}
	return cur, true
}

// at returns the node at the path of components cs (nil for a directory
// that exists only as an ancestor of the link being placed) and whether
// it is a directory.
func (r resolver) at(cs []string) (*Node, bool) {
	p := strings.Join(cs, "/")
	if n, ok := r.b.dirs[p]; ok {
		return n, true
	}
	if p != r.self && strings.HasPrefix(r.self, p+"/") {
		return nil, true
	}
	parentPath, name := splitParent(p)
	parent, ok := r.b.dirs[parentPath]
	if !ok {
		return nil, false
	}
	n := parent.Child(name)
	return n, n != nil && n.IsDir()
}
