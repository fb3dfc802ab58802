// Command chromafs is the client of chromafsd, the host daemon (package
// clientcmd; see --help).
package main

import (
	"os"

	"github.com/chromafs/chromafs/internal/clientcmd"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() { os.Exit(clientcmd.Main(version, os.Args[1:], os.Stdout, os.Stderr)) }
