package tree

import (
	"strings"
	"testing"
)

// TestPathBounds: a path of exactly 4,095 bytes (PATH_MAX less its NUL)
// and a name of 255 bytes (NAME_MAX) are taken, one byte more of either
// is refused, by SplitPath and the builder's validPath alike.
func TestPathBounds(t *testing.T) {
	deep := func(total int) string { // 16 names of 250 bytes, then one (under 255) that makes total
		p := strings.Repeat(strings.Repeat("d", 250)+"/", 16)
		return p + strings.Repeat("f", total-len(p))
	}
	for _, c := range []struct {
		name string
		path string
		ok   bool
	}{
		{"4,095 bytes", deep(4095), true},
		{"4,096 bytes", deep(4096), false},
		{"a 255-byte name", strings.Repeat("n", 255), true},
		{"a 256-byte name", strings.Repeat("n", 256), false},
	} {
		_, err := SplitPath(c.path, 0)
		verr := validPath(c.path, 0)
		if (err == nil) != c.ok || (verr == nil) != c.ok {
			t.Errorf("%s (%d bytes): SplitPath %v, validPath %v; want ok=%v", c.name, len(c.path), err, verr, c.ok)
		}
	}
}
