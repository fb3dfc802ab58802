// Command chromafs-cache inspects, verifies and clears the host cache that
// chromafs-mount processes share on this host (see --cache-dir there).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/chromafs/chromafs/hostcache"
	"github.com/chromafs/chromafs/internal/cli"
)

const usage = `Usage: chromafs-cache [--cache-dir DIR] stats|verify|clear
       chromafs-cache --version

The host cache holds pages (and trees) that chromafs-mount fetched from
Chroma, shared by every mount of this user on this host, so the next mount
of a collection reads them from disk. Mounts verify every entry before they
serve it; this command does the same for all of them at once.

    stats    entries and bytes on disk
    verify   check every entry (header, decompression, size, SHA-256);
             remove the bad ones (a mount would drop them on read anyway)
    clear    remove every entry; mounts running meanwhile refetch what
             they need. Only files of the cache's own layout are removed.

A directory that holds no host cache (mistyped, or never used by a mount)
is an error, not an empty cache: nothing is created there.

Exit status: 0 done, 1 no cache in DIR, or it could not be opened or
cleared, 2 usage.

Flags:
`

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := cli.New("chromafs-cache", usage, stdout)
	dir := fs.String("cache-dir", hostcache.DefaultDir(), "the host cache directory (as given to chromafs-mount)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "chromafs-cache: %v\n", err)
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, cli.Version("chromafs-cache", version))
		return 0
	}
	if fs.NArg() != 1 || (fs.Arg(0) != "stats" && fs.Arg(0) != "verify" && fs.Arg(0) != "clear") {
		fmt.Fprintln(stderr, "chromafs-cache: want one of stats, verify, clear (see --help)")
		return 2
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "chromafs-cache: --cache-dir: no default (set HOME or XDG_CACHE_HOME); pass the directory the mounts use")
		return 2
	}
	if ok, err := hostcache.Present(*dir); err != nil || !ok {
		if err == nil {
			err = fmt.Errorf("no host cache in %s: is it the --cache-dir the mounts use? (default %s)", *dir, hostcache.DefaultDir())
		}
		fmt.Fprintf(stderr, "chromafs-cache: %v\n", err)
		return 1
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := hostcache.Open(*dir, 1<<62, log)
	if err != nil {
		fmt.Fprintf(stderr, "chromafs-cache: %v\n", err)
		return 1
	}
	defer c.Close()
	switch fs.Arg(0) {
	case "stats":
		u := c.Usage()
		fmt.Fprintf(stdout, "%s: %d entries, %d bytes on disk\n", c.Dir(), u.Entries, u.Bytes)
	case "verify":
		good, removed := c.Verify()
		fmt.Fprintf(stdout, "%s: %d good, %d bad (removed)\n", c.Dir(), good, removed)
	case "clear":
		n, err := c.Clear()
		fmt.Fprintf(stdout, "%s: %d entries removed\n", c.Dir(), n)
		if err != nil {
			fmt.Fprintf(stderr, "chromafs-cache: %v\n", err)
			return 1
		}
	}
	return 0
}
