package mountcmd

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/chromafs/chromafs/internal/mountstart"
)

// startDaemon re-executes the command as the serving process of a
// --daemon mount and returns once the mount answers (mountstart.Start;
// chromafs-mount's launcher starts it the same way without this binary's
// start-up on the path).
func startDaemon(o *options, args []string) int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "chromafs-mount: %v\n", err)
		return 1
	}
	return mountstart.Start(self, args, o.conn.URL) // the translated arguments of a mount helper too
}

// daemonChild reports whether this process is the serving process of a
// --daemon mount.
func daemonChild() bool { return os.Getenv(mountstart.DaemonEnv) != "" }

func execQuiet(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return errors.New(strings.TrimSpace(string(out)))
	}
	return nil
}
