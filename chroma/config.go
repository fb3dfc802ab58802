package chroma

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/chromafs/chromafs/chroma/name"
	"github.com/chromafs/chromafs/internal/cli"
)

// Config says how to reach a collection. Both commands register the same
// flags with RegisterFlags, so they are spelled the same everywhere.
type Config struct {
	URL        string
	Collection string
	Tenant     string
	Database   string
	TokenFile  string
	Timeout    time.Duration // per request
	// MaxBody caps a response body in bytes; larger answers are an error.
	MaxBody int64
	// Limiter, when set, bounds the requests in flight beyond this process
	// (hostcache.Budget: every mount of the host shares one budget per
	// collection). Every request holds one of its slots.
	Limiter Limiter
	// Pool, when set, holds the connections to the server, shared with
	// the other stores opened with it (a daemon's collections); nil gives
	// the store connections of its own.
	Pool *Pool
	// Dial, when set, opens the connections of a store made with this
	// Config and no Pool, and of a Pool made with it (the transport still
	// does TLS on them); nil dials with netdial.Dialer. A --daemon child of
	// chromafs-mount adopts through it the connection its parent opened
	// while the child started.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	token string
}

// Limiter hands out request slots; release frees one.
type Limiter interface {
	Acquire(ctx context.Context) (release func(), err error)
}

// Defaults for the connection flags.
const (
	DefaultURL      = "http://127.0.0.1:8000"
	DefaultTenant   = "default_tenant"
	DefaultDatabase = "default_database"
	DefaultTimeout  = 30 * time.Second
	DefaultMaxBody  = 32 << 20
)

// RegisterFlags adds the shared connection flags to fs, with defaults taken
// from the environment (CHROMA_URL, CHROMAFS_COLLECTION, CHROMA_TENANT,
// CHROMA_DATABASE, CHROMA_TOKEN_FILE) where set.
func (c *Config) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&c.URL, "chroma-url", envOr("CHROMA_URL", DefaultURL), "Chroma server URL (env CHROMA_URL)")
	fs.StringVar(&c.Collection, "collection", os.Getenv("CHROMAFS_COLLECTION"), "collection name (env CHROMAFS_COLLECTION; required)")
	fs.StringVar(&c.Tenant, "tenant", envOr("CHROMA_TENANT", DefaultTenant), "Chroma tenant (env CHROMA_TENANT)")
	fs.StringVar(&c.Database, "database", envOr("CHROMA_DATABASE", DefaultDatabase), "Chroma database (env CHROMA_DATABASE)")
	fs.StringVar(&c.TokenFile, "token-file", os.Getenv("CHROMA_TOKEN_FILE"), "file holding the API token, mode 0600 or stricter (env\nCHROMA_TOKEN_FILE; default: env CHROMA_TOKEN, else no token)")
	c.MaxBody = DefaultMaxBody
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// Validate checks the flags (the collection's, tenant's and database's
// names as Chroma would, before any request) and loads the token: from
// --token-file when given (refused unless only its owner can read it),
// else from CHROMA_TOKEN.
func (c *Config) Validate() error {
	if c.Collection == "" {
		return errors.New("no collection: pass --collection NAME or set CHROMAFS_COLLECTION")
	}
	if err := name.CheckCollection(c.Collection); err != nil {
		return err
	}
	return c.ValidateServer()
}

// ValidateServer is Validate without the collection: for a process that
// learns the names of its collections later (chromafsd), each checked
// with name.CheckCollection. Empty tenant and database names are the
// defaults.
func (c *Config) ValidateServer() error {
	if c.Tenant == "" {
		c.Tenant = DefaultTenant
	}
	if c.Database == "" {
		c.Database = DefaultDatabase
	}
	if err := name.CheckTenantOrDatabase("tenant", c.Tenant); err != nil {
		return fmt.Errorf("--tenant: %w", err)
	}
	if err := name.CheckTenantOrDatabase("database", c.Database); err != nil {
		return fmt.Errorf("--database: %w", err)
	}
	if !strings.HasPrefix(c.URL, "http://") && !strings.HasPrefix(c.URL, "https://") {
		return fmt.Errorf("--chroma-url %q: want http://HOST:PORT or https://HOST", c.URL)
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxBody <= 0 {
		c.MaxBody = DefaultMaxBody
	}
	tok, err := loadToken(c.TokenFile)
	if err != nil {
		return err
	}
	c.token = tok
	return nil
}

func loadToken(path string) (string, error) { return cli.Secret("token file", path, "CHROMA_TOKEN") }
