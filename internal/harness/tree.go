package harness

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Files lists the regular files under root (no symbolic links), as paths
// relative to root, sorted byte-wise.
func Files(root string) ([]string, error) {
	return list(root, func(string) bool { return true })
}

// Pages lists the pages of a corpus made by internal/corpus (files named
// page-*), as paths relative to root, sorted byte-wise.
func Pages(root string) ([]string, error) {
	return list(root, func(name string) bool { return strings.HasPrefix(name, "page-") })
}

func list(root string, keep func(name string) bool) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() && keep(d.Name()) {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("walk %s: %w", root, err)
	}
	sort.Strings(out)
	return out, nil
}

// EachFile calls fn with every regular file of src (relative path, its
// bytes) and the same path read under mnt; readErr is why the mount's copy
// could not be read (got is then nil). An error reading src ends the walk.
func EachFile(mnt, src string, fn func(rel string, got, want []byte, readErr error)) error {
	files, err := Files(src)
	if err != nil {
		return err
	}
	for _, rel := range files {
		want, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			return err
		}
		got, err := os.ReadFile(filepath.Join(mnt, rel))
		fn(rel, got, want, err)
	}
	return nil
}
