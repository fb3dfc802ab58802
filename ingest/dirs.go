package ingest

import (
	"path"
	"sort"

	"github.com/chromafs/chromafs/tree"
)

// access is what the entries below a directory allow, together.
type access struct {
	any, public bool
	groups      map[string]bool
}

// addDirs gives every directory of the source an entry: the directory
// exists on the mount even when empty, with its own mtime. A directory is
// as visible as the union of what lies below it (public if anything below
// is public, else the groups below), so that its entry never shows a
// directory to a mount that sees nothing in it; a directory with nothing
// below it at all follows --default-public, like a binary file.
func (r *run) addDirs() {
	below := map[string]*access{}
	for _, e := range r.entries {
		for d := path.Dir(e.Path); ; d = path.Dir(d) {
			a := below[d]
			if a == nil {
				a = &access{groups: map[string]bool{}}
				below[d] = a
			}
			a.any, a.public = true, a.public || e.IsPublic
			for _, g := range e.Groups {
				a.groups[g] = true
			}
			if d == "." {
				break
			}
		}
	}
	for _, d := range r.dirs {
		e := tree.Entry{Type: tree.TypeDir, Path: d.f.Rel, Mtime: d.f.Mtime, MtimeNsec: d.f.Nsec, IsPublic: r.opt.DefaultPublic}
		if a := below[d.f.Rel]; a != nil {
			e.IsPublic, e.Groups = a.public, sortedSet(a.groups)
		}
		r.entries[d.slug] = e
		r.sum.Dirs++
	}
}

func sortedSet(set map[string]bool) []string {
	out := make([]string, 0, len(set))
	for g := range set {
		out = append(out, g)
	}
	sort.Strings(out)
	return out
}
