package ingest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/chromafs/chromafs/tree"
)

// SourceFile is a regular file found under the source directory.
type SourceFile struct {
	Rel   string // slash-separated path below the source directory
	Abs   string
	Mtime int64
	Nsec  int64 // nanoseconds of Mtime
	Exec  bool  // an executable bit is set
}

// Skipped is a path that was not ingested, and why.
type Skipped struct {
	Rel    string
	Reason string
}

// vcsDirs are never descended into.
var vcsDirs = map[string]bool{".git": true, ".hg": true, ".svn": true}

// Scan lists the regular files below root in path order. Symlinks are
// followed only to regular files inside root; sockets, devices, FIFOs,
// broken links, links leaving root and names the tree cannot hold are
// skipped and listed: those are decisions. A file or directory that exists
// but cannot be read is an error (ErrUnreadable), never a skip, so that a
// transient failure on the source side never deletes pages.
func Scan(root string) ([]SourceFile, []Skipped, error) {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, nil, fmt.Errorf("source directory: %w", err)
	}
	if st, err := os.Stat(realRoot); err != nil || !st.IsDir() {
		return nil, nil, fmt.Errorf("source directory %s is not a directory", root)
	}
	s := &scanner{root: realRoot}
	if err := filepath.WalkDir(realRoot, s.visit); err != nil {
		return nil, nil, err
	}
	sort.Slice(s.files, func(i, j int) bool { return s.files[i].Rel < s.files[j].Rel })
	return s.files, s.skipped, nil
}

type scanner struct {
	root    string
	files   []SourceFile
	skipped []Skipped
}

func (s *scanner) visit(p string, d fs.DirEntry, err error) error {
	rel, _ := filepath.Rel(s.root, p)
	rel = filepath.ToSlash(rel)
	if err != nil {
		return unreadable(rel, err)
	}
	if rel == "." {
		return nil
	}
	switch {
	case d.IsDir() && vcsDirs[d.Name()]:
		s.skip(rel+"/", "version-control directory")
		return fs.SkipDir
	case d.IsDir():
		return nil
	case d.Type()&fs.ModeSymlink != 0:
		return s.symlink(p, rel)
	case d.Type().IsRegular():
		return s.add(p, rel)
	default:
		s.skip(rel, "not a regular file")
	}
	return nil
}

func (s *scanner) symlink(p, rel string) error {
	target, err := filepath.EvalSymlinks(p)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EIO) {
			return unreadable(rel, err)
		}
		s.skip(rel, "broken symlink")
		return nil
	}
	if target != s.root && !strings.HasPrefix(target, s.root+string(filepath.Separator)) {
		s.skip(rel, "symlink leaves the source directory")
		return nil
	}
	st, err := os.Stat(target)
	if err != nil {
		return unreadable(rel, err)
	}
	if !st.Mode().IsRegular() {
		s.skip(rel, "symlink to something other than a regular file")
		return nil
	}
	return s.add(target, rel)
}

func (s *scanner) add(abs, rel string) error {
	if !utf8.ValidString(rel) {
		s.skip(rel, "name is not valid UTF-8")
		return nil
	}
	if _, err := tree.SplitPath(rel, tree.DefaultLimits.MaxDepth); err != nil {
		s.skip(rel, err.Error())
		return nil
	}
	st, err := os.Stat(abs)
	if err != nil {
		return unreadable(rel, err)
	}
	mt := st.ModTime()
	s.files = append(s.files, SourceFile{Rel: rel, Abs: abs, Mtime: mt.Unix(), Nsec: int64(mt.Nanosecond()), Exec: st.Mode()&0o111 != 0})
	return nil
}

func (s *scanner) skip(rel, reason string) {
	s.skipped = append(s.skipped, Skipped{Rel: rel, Reason: reason})
}

// Slugs assigns each file its page slug: its path without the extension,
// or its full path when that is taken, or a numbered variant. Files are
// taken in path order, so the assignment is deterministic.
func Slugs(files []SourceFile) []string {
	taken := make(map[string]bool, len(files))
	out := make([]string, len(files))
	for i, f := range files {
		slug := strings.TrimSuffix(f.Rel, filepath.Ext(f.Rel))
		if slug == "" || strings.HasSuffix(slug, "/") || taken[slug] {
			slug = f.Rel
		}
		for n := 2; taken[slug]; n++ {
			slug = fmt.Sprintf("%s~%d", f.Rel, n)
		}
		taken[slug] = true
		out[i] = slug
	}
	return out
}
