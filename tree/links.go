package tree

import (
	"sort"
	"strings"
)

// maxLinkHops bounds how many symbolic links one resolution follows, as
// Linux does (ELOOP after 40), and how deeply link placements nest.
const maxLinkHops = 40

// linkState is where a link is in its placement.
type linkState int8

const (
	linkPending linkState = iota
	linkResolving
	linkPlaced
	linkFailed
)

// linker places the symbolic links whose targets resolve, in the tree
// being built, to a node the mount shows: a link to a hidden or missing
// path, one leaving the tree, and a loop are skipped. A target may pass
// through other links; those are placed first, once each (memoised), so
// the cost is linear in the links whatever order or chains a hostile tree
// holds.
type linker struct {
	b     *builder
	links map[string]placed
	paths []string // the links' paths, sorted: those below a directory are contiguous
	state map[string]linkState
	noDir map[string]bool // directories no link below could make exist
}

// addLinks places links and reports whether it placed any.
func (b *builder) addLinks(links map[string]placed, warn *Warnings) bool {
	b.sorted = true // from now on b.dir keeps children sorted
	l := &linker{b: b, links: links, state: make(map[string]linkState, len(links)), noDir: map[string]bool{}}
	for p := range links {
		l.paths = append(l.paths, p)
	}
	sort.Strings(l.paths)
	placedAny := false
	for _, p := range l.paths {
		if l.place(p, 0) {
			placedAny = true
		} else {
			warn.add("%q: skipped: symbolic link does not resolve to a path this mount shows", links[p].slug)
		}
	}
	return placedAny
}

// place resolves the link at p and inserts it when it resolves. depth is
// how many placements are under way around this one.
func (l *linker) place(p string, depth int) bool {
	switch l.state[p] {
	case linkPlaced:
		return true
	case linkFailed, linkResolving: // a loop through p
		return false
	}
	if depth > maxLinkHops {
		return false // not remembered: from fewer links away p may resolve
	}
	l.state[p] = linkResolving
	dir, _ := splitParent(p)
	r := resolver{l: l, self: p, depth: depth}
	if _, ok := r.follow(components(dir), l.links[p].e.Target, 0); !ok {
		l.state[p] = linkPending
		if !r.deep {
			l.state[p] = linkFailed
		}
		return false
	}
	l.b.addLink(p, l.links[p])
	l.state[p] = linkPlaced
	return true
}

// ensureDir makes the directory at p exist if a link below it resolves
// (placing it creates the directory), and reports whether it exists.
func (l *linker) ensureDir(p string, depth int) bool {
	if _, ok := l.b.dirs[p]; ok {
		return true
	}
	if l.noDir[p] {
		return false
	}
	prefix := p + "/"
	for i := sort.SearchStrings(l.paths, prefix); i < len(l.paths) && strings.HasPrefix(l.paths[i], prefix); i++ {
		if l.place(l.paths[i], depth) {
			return true
		}
	}
	l.noDir[p] = true
	return false
}

// addLink inserts a link node, keeping its directory's children sorted so
// that later resolutions can look it up.
func (b *builder) addLink(p string, l placed) {
	dir, name := splitParent(p)
	parent := b.dir(dir)
	n := &Node{Name: name, Parent: parent, Mtime: l.e.Mtime, Nsec: uint32(l.e.MtimeNsec), Link: &Link{Target: l.e.Target}}
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

func components(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// resolver follows one link's target through the tree being built.
type resolver struct {
	l     *linker
	self  string // the link being placed: its ancestors count as directories
	depth int
	deep  bool // a failure came from nesting too deep, not from the tree
}

// follow resolves target from the directory at from and returns the
// components of the path it names; ok is false when it leaves the tree,
// names nothing, passes through a file or loops.
func (r *resolver) follow(from []string, target string, hops int) ([]string, bool) {
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

// at returns the node at the path of components cs, placing a link there
// first if one waits to be placed (nil for a directory that exists only as
// an ancestor of the link being placed), and whether it is a directory.
func (r *resolver) at(cs []string) (*Node, bool) {
	b := r.l.b
	b.linkSteps++
	p := strings.Join(cs, "/")
	if n, ok := b.dirs[p]; ok {
		return n, true
	}
	if p != r.self && strings.HasPrefix(r.self, p+"/") {
		return nil, true
	}
	if _, ok := r.l.links[p]; ok && r.l.state[p] != linkPlaced {
		if !r.l.place(p, r.depth+1) {
			r.deep = r.deep || r.depth+1 > maxLinkHops || r.l.state[p] == linkPending
			return nil, false
		}
	}
	parentPath, name := splitParent(p)
	if r.l.ensureDir(p, r.depth+1) {
		return b.dirs[p], true
	}
	parent, ok := b.dirs[parentPath]
	if !ok {
		return nil, false
	}
	n := parent.Child(name)
	return n, n != nil && n.IsDir()
}
