// Package integration_test drives the real commands against a real Chroma
// server (started by scripts/chroma-server.sh on a free port, or the one at
// CHROMAFS_TEST_URL) and compares what comes back with the source files on
// local disk. Nothing here is faked. When the server cannot be started the
// tests skip loudly, except under CI=true, where that is a failure.
package integration_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/internal/harness"
	"github.com/chromafs/chromafs/internal/testenv"
)

var env struct {
	server   *harness.Server // this run's own Chroma server; nil when external
	script   string          // scripts/chroma-server.sh, when this run owns the server
	url      string          // Chroma server under test
	bin      string          // directory holding the built commands (chromafs-mount with -race unless CHROMAFS_TEST_RACE=0)
	raceBin  string          // a directory holding a -race build of chromafs-mount
	plainBin string          // a directory holding chromafs-mount built without -race
	missing  string          // why the server is unavailable
}

func TestMain(m *testing.M) {
	if role := os.Getenv(helperEnv); role != "" {
		os.Exit(runHelper(role)) // a copy of this binary run as another user
	}
	if os.Getenv(nsTestEnv) != "" {
		os.Exit(runInMountNS(m)) // one test, in a mount namespace of its own
	}
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	root := repoRoot()
	tmp, err := os.MkdirTemp("", "chromafs-it-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	env.bin = filepath.Join(tmp, "bin")
	env.raceBin, env.plainBin = env.bin, filepath.Join(tmp, "bin-plain")
	if err := buildCommands(root); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if stop := startServer(root, tmp); stop != nil {
		defer stop()
	}
	return m.Run()
}

// buildCommands builds the commands into env.bin, chromafs-mount (and the
// chromafs-mount-serve it launches) with the race detector: a race it reports fails the test whose mount it was
// (mount.stop). Tests that measure the mount's memory use env.plainBin
// (the race detector's shadow memory is several times the heap).
// CHROMAFS_TEST_RACE=0 builds env.bin without -race (the bench's fleet
// figures); env.raceBin then holds a -race build of its own.
func buildCommands(root string) error {
	if err := harness.Build(root, env.bin, false, "./cmd/..."); err != nil {
		return err
	}
	// chromafs-mount is a launcher of chromafs-mount-serve: the two together
	if err := harness.Build(root, env.plainBin, false, "./cmd/chromafs-mount", "./cmd/chromafs-mount-serve"); err != nil {
		return err
	}
	if os.Getenv("CHROMAFS_TEST_RACE") == "0" {
		env.raceBin = env.bin + "-race"
	}
	return harness.Build(root, env.raceBin, true, "./cmd/chromafs-mount", "./cmd/chromafs-mount-serve")
}

// startServer starts a private Chroma server unless CHROMAFS_TEST_URL
// names one, and returns how to stop it.
func startServer(root, tmp string) func() {
	if u := os.Getenv("CHROMAFS_TEST_URL"); u != "" {
		env.url = u
		return nil
	}
	s, err := harness.StartServer(root, filepath.Join(tmp, "chroma-data"), nil)
	if err != nil {
		env.missing = err.Error()
		return nil
	}
	env.server, env.url = s, s.URL
	env.script = filepath.Join(root, "scripts", "chroma-server.sh")
	return func() { _ = s.Stop() }
}

// requireServer skips (or, under CI=true, fails) when there is no server.
func requireServer(t *testing.T) {
	t.Helper()
	testenv.Require(t, env.missing == "", "no Chroma server: %s", env.missing)
}

func freePort() (int, error) { return harness.FreePort() }

func repoRoot() string { return harness.RepoRoot() }

// serverCtl stops or starts the test's own Chroma server; tests that need
// it skip (fail under CI=true) when the server is external
// (CHROMAFS_TEST_URL).
func serverCtl(t *testing.T, verb string) {
	t.Helper()
	testenv.Require(t, env.server != nil, "the Chroma server is external (CHROMAFS_TEST_URL); cannot stop it")
	var err error
	switch verb {
	case "start":
		err = env.server.Start()
	case "stop":
		err = env.server.Stop()
	default:
		t.Fatalf("serverCtl %q: want start or stop", verb)
	}
	must(t, err)
}

var nonName = regexp.MustCompile(`[^a-zA-Z0-9]+`)

// collectionName gives each test its own collection.
func collectionName(t *testing.T) string {
	name := strings.Trim(nonName.ReplaceAllString(t.Name(), "-"), "-")
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("it-%s-%d", strings.ToLower(name), time.Now().UnixNano()%1e9)
}

// conn returns a validated connection config for collection name.
func conn(t *testing.T, name string) chroma.Config {
	t.Helper()
	c := chroma.Config{URL: env.url, Collection: name, Tenant: chroma.DefaultTenant, Database: chroma.DefaultDatabase, Timeout: 60 * time.Second}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	return c
}

func openStore(t *testing.T, name string) *chroma.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := chroma.Open(ctx, conn(t, name), nil)
	if err != nil {
		t.Fatalf("open collection %s: %v", name, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// ingestCmd runs chromafs-ingest and returns its stdout, stderr and exit code.
func ingestCmd(t *testing.T, envv []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(env.bin, "chromafs-ingest"), args...)
	cmd.Env = append(os.Environ(), envv...)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := exitCode(t, err)
	return out.String(), errb.String(), code
}

// exitCode is the exit code of a finished command; an error starting or
// waiting for it fails the test.
func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("run: %v", err)
	}
	return harness.ExitCode(err)
}
