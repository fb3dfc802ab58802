// Command chromafs-mount-serve is chromafs-mount itself: it mounts a
// Chroma collection as a read-only file system and serves it (package
// mountcmd; see --help). The chromafs-mount installed beside it is a small
// launcher that runs it (package mountstart): call chromafs-mount.
package main

import (
	"os"

	"github.com/chromafs/chromafs/internal/mountcmd"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { os.Exit(mountcmd.Main(version, os.Args)) }
