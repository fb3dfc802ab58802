package ingest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/chromafs/chromafs/tree"
)

// SourceFile is a regular file, a directory or a symbolic link found
// under the source directory.
type SourceFile struct {
	Rel   string // slash-separated path below the source directory; "." is the root
	Abs   string
	Mtime int64
	Nsec  int64 // nanoseconds of Mtime
	Exec  bool  // an executable bit is set
	// Type is tree.TypeFile, tree.TypeDir or tree.TypeSymlink.
	Type string
	// Target is a symbolic link's target, exactly as readlink gives it.
	Target string
}

// Skipped is a path that was not ingested, and why.
type Skipped struct {
	Rel    string
	Reason string
}

// vcsDirs are never descended into.
var vcsDirs = map[string]bool{".git": true, ".hg": true, ".svn": true}

// VCSDir reports whether a directory of this name is a version-control
// directory, which Scan never descends into.
func VCSDir(name string) bool { return vcsDirs[name] }

// Scan lists the regular files, directories (the root as ".") and
// symbolic links below root in path order. A relative symbolic link whose
// target stays inside root, to a file or a directory, is kept as a link;
// an absolute one, or one that leaves root by name and comes back, is
// followed when it ends at a regular file inside root (its content is
// stored at the link's path, as a file). Sockets, devices, FIFOs, broken
// links, links leaving root and names the tree cannot hold are skipped and
// listed: those are decisions. A file or directory that exists but cannot
// be read is an error (ErrUnreadable), never a skip, so that a transient
// failure on the source side never deletes pages.
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
		return s.addDir(p, rel)
	}
	switch {
	case d.IsDir() && vcsDirs[d.Name()]:
		s.skip(rel+"/", "version-control directory")
		return fs.SkipDir
	case d.IsDir():
		if !s.valid(rel) {
			return fs.SkipDir
		}
		return s.addDir(p, rel)
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
	text, err := os.Readlink(p)
	if err != nil {
		return unreadable(rel, err)
	}
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
	if staysInside(rel, text) && (st.Mode().IsRegular() || st.IsDir()) {
		return s.addLink(p, rel, text)
	}
	if !st.Mode().IsRegular() {
		s.skip(rel, "symlink to something other than a regular file, by an absolute path or from outside")
		return nil
	}
	return s.add(target, rel)
}

// staysInside reports whether a link at rel whose target is text names,
// by its path alone, something below the source directory: then the same
// link text resolves the same way on the mount.
func staysInside(rel, text string) bool {
	if text == "" || filepath.IsAbs(text) || !utf8.ValidString(text) || len(text) > tree.MaxPathLen {
		return false
	}
	joined := path.Join(path.Dir(rel), filepath.ToSlash(text))
	return joined != ".." && !strings.HasPrefix(joined, "../")
}

// valid reports whether rel is a path the tree can hold; if not, it is
// skipped and listed.
func (s *scanner) valid(rel string) bool {
	if !utf8.ValidString(rel) {
		s.skip(rel, "name is not valid UTF-8")
		return false
	}
	if _, err := tree.SplitPath(rel, tree.DefaultLimits.MaxDepth); err != nil {
		s.skip(rel, err.Error())
		return false
	}
	return true
}

func (s *scanner) addDir(abs, rel string) error {
	_, err := s.record(abs, SourceFile{Rel: rel, Type: tree.TypeDir}, os.Stat)
	return err
}

func (s *scanner) addLink(abs, rel, text string) error {
	if !s.valid(rel) {
		return nil
	}
	_, err := s.record(abs, SourceFile{Rel: rel, Type: tree.TypeSymlink, Target: text}, os.Lstat)
	return err
}

func (s *scanner) add(abs, rel string) error {
	if !s.valid(rel) {
		return nil
	}
	st, err := s.record(abs, SourceFile{Rel: rel}, os.Stat)
	if err == nil && st.Mode()&0o111 != 0 {
		s.files[len(s.files)-1].Exec = true
	}
	return err
}

// record adds f, found at abs, with the mtime stat gives it.
func (s *scanner) record(abs string, f SourceFile, stat func(string) (fs.FileInfo, error)) (fs.FileInfo, error) {
	st, err := stat(abs)
	if err != nil {
		return nil, unreadable(f.Rel, err)
	}
	mt := st.ModTime()
	f.Abs, f.Mtime, f.Nsec = abs, mt.Unix(), int64(mt.Nanosecond())
	s.files = append(s.files, f)
	return st, nil
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
		if f.Type == tree.TypeDir { // directories: "a/b/", the root "/"; no page slug ends in "/"
			out[i] = f.Rel + "/"
			if f.Rel == "." {
				out[i] = "/"
			}
			continue
		}
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
