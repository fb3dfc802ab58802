// Package tiers opens the cache tiers below memory the way every command
// does: the host tier on disk, which a process works without (a warning),
// and the Redis tier, whose bad configuration is an error but whose
// absence at run time is not (the tier skips it until it answers).
package tiers

import (
	"log/slog"
	"time"

	"github.com/chromafs/chromafs/hostcache"
	"github.com/chromafs/chromafs/internal/cli"
	"github.com/chromafs/chromafs/redistier"
)

// Host opens the host tier in dir bounded by bytes, or returns nil: when
// bytes is 0 (turned off), or with a warning when it cannot be used.
func Host(log *slog.Logger, dir string, bytes int64) *hostcache.Cache {
	if bytes == 0 {
		return nil
	}
	c, err := hostcache.Open(dir, bytes, log)
	if err != nil {
		log.Warn("running without the host cache", "err", err)
		return nil
	}
	return c
}

// RedisPasswordEnv holds the Redis password when no file is named.
const RedisPasswordEnv = "CHROMAFS_REDIS_PASSWORD"

// Redis opens the cross-host tier when url names one (nil, nil when it is
// ""), with entries kept for ttl and reads bounded by timeout (0: the
// tier's default). The password comes from pwFile (mode 0600 or stricter)
// or env CHROMAFS_REDIS_PASSWORD, never from the URL.
func Redis(log *slog.Logger, url, pwFile string, ttl, timeout time.Duration) (*redistier.Tier, error) {
	if url == "" {
		return nil, nil
	}
	pw, err := cli.Secret("redis password file", pwFile, RedisPasswordEnv)
	if err != nil {
		return nil, err
	}
	return redistier.Open(redistier.Config{URL: url, Password: pw, TTL: ttl, Timeout: timeout, Log: log})
}
