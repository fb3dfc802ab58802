// Command chromafs-mount mounts a Chroma collection as a read-only file
// system (package mountcmd; see --help).
package main

import (
	"os"

	"github.com/chromafs/chromafs/internal/mountcmd"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { os.Exit(mountcmd.Main(version, os.Args)) }
