package cache

import (
	"crypto/sha256"
	"encoding/hex"
)

// PageKey names one page version in the tiers below memory — the host's
// disk (package hostcache) and a shared Redis (package redistier) — by
// content identity: the collection's identity and the page's hex SHA-256,
// or, with Part set, one part of it (a range of chunks of a page too large
// to be read whole). Both tiers name an entry by its [PageKey.Name], so an
// entry one of them holds is the entry the other would hold.
type PageKey struct {
	Collection string
	SHA256     string
	Part       string // "" for the whole page
}

// Name is k as a fixed-length string: the hex SHA-256 of its fields.
func (k PageKey) Name() string {
	var room [256]byte // the fields on the stack, when they fit (a host tier's every read names its entry)
	b := append(append(append(append(append(room[:0], k.Collection...), 0), k.SHA256...), 0), k.Part...)
	sum := sha256.Sum256(b)
	var name [2 * sha256.Size]byte
	hex.Encode(name[:], sum[:])
	return string(name[:])
}

// Unlock releases a host-wide lock of a PageKey (hostcache's Lock and
// TryLock).
type Unlock func()
