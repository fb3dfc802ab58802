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

// FileSets compares the regular files under mnt with those under src (as
// Files lists them): extra are mnt's files src lacks, missing src's files
// mnt lacks, both sorted; a path named in ignore (relative to mnt, e.g. a
// report the mount adds) is left out of mnt's list. EachFile reads src's
// files only, so it never sees a file the mount has beside them: a test
// that promises "every file, and nothing else" needs this too.
func FileSets(mnt, src string, ignore ...string) (extra, missing []string, err error) {
	got, err := Files(mnt)
	if err != nil {
		return nil, nil, err
	}
	want, err := Files(src)
	if err != nil {
		return nil, nil, err
	}
	skip := make(map[string]bool, len(ignore))
	for _, p := range ignore {
		skip[filepath.Clean(p)] = true
	}
	in := func(list []string) map[string]bool {
		m := make(map[string]bool, len(list))
		for _, p := range list {
			m[p] = true
		}
		return m
	}
	inGot, inWant := in(got), in(want)
	for _, p := range got {
		if !inWant[p] && !skip[p] {
			extra = append(extra, p)
		}
	}
	for _, p := range want {
		if !inGot[p] {
			missing = append(missing, p)
		}
	}
	return extra, missing, nil
}
