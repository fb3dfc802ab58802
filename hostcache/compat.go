package hostcache

import "github.com/chromafs/chromafs/cache"

// Key is cache.PageKey, for code not yet moved to it.
type Key = cache.PageKey

// Layout is FormatDir, for code not yet moved to it.
const Layout = FormatDir
