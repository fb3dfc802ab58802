package tree

import (
	"fmt"
	"strings"
)

const (
	// MaxNameLen is the longest path component Linux accepts (NAME_MAX).
	MaxNameLen = 255
	// MaxPathLen is the longest path, in bytes, below the mount root: what
	// Linux accepts as one path (PATH_MAX, 4096, less its NUL). Tools reach
	// deeper paths relative to a directory (find, tar, rsync and diff -r do).
	MaxPathLen = 4095
)

// SplitPath validates a display path and returns its components. Paths are
// relative, '/'-separated, and must not contain empty, "." or ".."
// components, NUL bytes, components longer than MaxNameLen, or more than
// maxDepth components.
func SplitPath(p string, maxDepth int) ([]string, error) {
	switch {
	case p == "":
		return nil, fmt.Errorf("empty path")
	case strings.HasPrefix(p, "/"):
		return nil, fmt.Errorf("absolute path")
	case len(p) > MaxPathLen:
		return nil, fmt.Errorf("path of %d bytes exceeds %d", len(p), MaxPathLen)
	case strings.IndexByte(p, 0) >= 0:
		return nil, fmt.Errorf("NUL byte in path")
	}
	parts := strings.Split(p, "/")
	if maxDepth > 0 && len(parts) > maxDepth {
		return nil, fmt.Errorf("%d components exceed the depth limit of %d", len(parts), maxDepth)
	}
	for _, c := range parts {
		if err := checkName(c); err != nil {
			return nil, err
		}
	}
	return parts, nil
}

func checkName(c string) error {
	switch {
	case c == "":
		return fmt.Errorf("empty path component")
	case c == "." || c == "..":
		return fmt.Errorf("%q path component", c)
	case len(c) > MaxNameLen:
		return fmt.Errorf("component of %d bytes exceeds %d", len(c), MaxNameLen)
	}
	return nil
}

// validPath is SplitPath without building the list of components: what
// the tree builder checks for every entry.
func validPath(p string, maxDepth int) error {
	switch {
	case p == "":
		return fmt.Errorf("empty path")
	case p[0] == '/':
		return fmt.Errorf("absolute path")
	case len(p) > MaxPathLen:
		return fmt.Errorf("path of %d bytes exceeds %d", len(p), MaxPathLen)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("NUL byte in path")
	}
	depth := 0
	for rest := p; ; {
		depth++
		i := strings.IndexByte(rest, '/')
		c := rest
		if i >= 0 {
			c = rest[:i]
		}
		if err := checkName(c); err != nil {
			return err
		}
		if i < 0 {
			break
		}
		rest = rest[i+1:]
	}
	if maxDepth > 0 && depth > maxDepth {
		return fmt.Errorf("%d components exceed the depth limit of %d", depth, maxDepth)
	}
	return nil
}
