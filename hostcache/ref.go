package hostcache

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
)

// maxRef bounds what a ref holds (a collection id is 36 bytes).
const maxRef = 256

// Refs are small named values the mounts of a host remember between runs,
// e.g. the id of the collection a name stood for, so that a restart can
// address it without asking. Unlike entries they are not content
// addressed: a ref is a hint that its user checks (a collection id that no
// longer exists answers 404), never bytes served to a reader. They live in
// refs/ (0600 files named by the SHA-256 of the name), written atomically,
// outside the size bound and eviction.

// Ref returns the value stored under name, or false.
func (c *Cache) Ref(name string) (string, bool) {
	b, err := os.ReadFile(c.refPath(name))
	if err != nil || len(b) == 0 || len(b) > maxRef {
		return "", false
	}
	return string(b), true
}

// SetRef stores value under name; a failure is a warning, never an error:
// the ref is only a shortcut.
func (c *Cache) SetRef(name, value string) {
	if len(value) == 0 || len(value) > maxRef || strings.ContainsAny(value, "\x00\n") {
		return
	}
	if old, ok := c.Ref(name); ok && old == value {
		return
	}
	p := c.refPath(name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		c.fail("write ref", err)
		return
	}
	if err := c.write(p, []byte(value)); err != nil {
		c.fail("write ref", err)
	}
}

func (c *Cache) refPath(name string) string {
	sum := sha256.Sum256([]byte(name))
	return filepath.Join(c.dir, "refs", hex.EncodeToString(sum[:]))
}
