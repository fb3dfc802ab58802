// Package harness holds what the integration tests (integration_test/) and
// the benchmark (cmd/chromafs-bench) both need to drive the real commands:
// the repository's root, free ports, building the commands, a real Chroma
// server started by scripts/chroma-server.sh, mounts in the foreground (a
// child process whose output is kept in a Log) and as --daemon, scraping
// their /metrics, and walking a source tree to compare it with a mount.
//
// Nothing here fakes anything, and nothing here knows about testing.T:
// every function returns an error, which the tests turn into a failure
// and the benchmark into its exit status. Network traffic goes to
// 127.0.0.1 only.
package harness

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
)

// RepoRoot is the root of the chromafs source tree this package was
// compiled from.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// FreePort returns a TCP port of 127.0.0.1 that nothing listened on a
// moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("no free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Build runs `go build` in root for pkgs (e.g. "./cmd/..."), writing the
// commands into dir; race builds them with the race detector. The
// launcher chromafs-mount, when pkgs name it, is built as scripts/lib.sh
// builds it: without cgo (and so without -race, which needs it).
func Build(root, dir string, race bool, pkgs ...string) error {
	args := []string{"build", "-buildvcs=auto"}
	if race {
		args = append(args, "-race")
	}
	if err := goBuild(root, nil, append(append(args, "-o", dir+"/"), pkgs...)); err != nil {
		return err
	}
	if slices.Contains(pkgs, "./cmd/...") || slices.Contains(pkgs, launcherPkg) {
		return goBuild(root, []string{"CGO_ENABLED=0"}, []string{"build", "-buildvcs=auto", "-o", dir + "/", launcherPkg})
	}
	return nil
}

// launcherPkg is chromafs-mount's launcher.
const launcherPkg = "./cmd/chromafs-mount"

func goBuild(root string, env, args []string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %v: %w\n%s", args, err, out.Bytes())
	}
	return nil
}
