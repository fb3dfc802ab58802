// Command chromafs-mount mounts a Chroma collection as a read-only file
// system. Not yet implemented: see the mount issue.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "chromafs-mount: not yet implemented; the mount lands with the mount issue")
	os.Exit(2)
}
