// Command chromafs-mount mounts a Chroma collection as a read-only file
// system (see --help). It is a small launcher (package mountstart): a
// --daemon mount is started from here, dialing Chroma while the mount's
// serving process starts; every other call runs chromafs-mount-serve,
// installed beside it, which is the command itself (package mountcmd).
package main

import (
	"os"

	"github.com/chromafs/chromafs/internal/mountstart"
)

func main() { os.Exit(mountstart.Launch(os.Args)) }
