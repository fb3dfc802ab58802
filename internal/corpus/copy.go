package corpus

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Copy copies the tree at src into dst (created): its directories, regular
// files and relative symbolic links (as links, their text unchanged),
// leaving out the directories skip names (nil: none). It is how a real
// docs repository becomes a bench's local copy; other kinds of files, and
// absolute links (the copy's would still point into src), are an error,
// since the copy and what is ingested from it must be the same.
func Copy(dst, src string, skip func(name string) bool) (Stats, error) {
	var st Stats
	src, err := filepath.EvalSymlinks(src) // src itself may be a link
	if err != nil {
		return st, err
	}
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir() && rel != "." && skip != nil && skip(d.Name()):
			return fs.SkipDir
		case d.IsDir():
			if rel != "." {
				st.Dirs++
			}
			return os.MkdirAll(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			text, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if filepath.IsAbs(text) {
				return fmt.Errorf("copy %s: an absolute symbolic link (to %s)", rel, text)
			}
			return os.Symlink(text, to)
		case d.Type().IsRegular():
			n, err := copyFile(to, p)
			st.Files++
			st.Bytes += n
			return err
		default:
			return fmt.Errorf("copy %s: not a directory, regular file or symbolic link", rel)
		}
	})
	return st, err
}

func copyFile(to, from string) (int64, error) {
	in, err := os.Open(from)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return n, err
}
