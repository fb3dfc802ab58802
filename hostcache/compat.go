package hostcache

import "github.com/chromafs/chromafs/cache"

// Key is cache.PageKey, for the mount's tree cache until it moves to it.
type Key = cache.PageKey
