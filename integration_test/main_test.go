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
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/chromafs/chromafs/chroma"
)

var env struct {
	script  string   // scripts/chroma-server.sh, when this run owns the server
	args    []string // its --port and --data arguments
	url     string   // Chroma server under test
	raceBin string   // the commands built with -race
	bin     string   // directory holding the built commands
	missing string   // why the server is unavailable
}

func TestMain(m *testing.M) {
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
	env.raceBin = filepath.Join(tmp, "bin-race")
	for _, b := range [][]string{{"build", "-buildvcs=auto", "-o", env.bin + "/", "./cmd/..."}, {"build", "-race", "-o", env.raceBin + "/", "./cmd/chromafs-mount"}} {
		build := exec.Command("go", b...)
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "go %v: %v\n%s", b, err, out)
			return 1
		}
	}
	if stop := startServer(root, tmp); stop != nil {
		defer stop()
	}
	return m.Run()
}

// startServer starts a private Chroma server unless CHROMAFS_TEST_URL
// names one, and returns how to stop it.
func startServer(root, tmp string) func() {
	if u := os.Getenv("CHROMAFS_TEST_URL"); u != "" {
		env.url = u
		return nil
	}
	port, err := freePort()
	if err != nil {
		env.missing = err.Error()
		return nil
	}
	script := filepath.Join(root, "scripts", "chroma-server.sh")
	args := []string{"--port", fmt.Sprint(port), "--data", filepath.Join(tmp, "chroma-data")}
	out, err := exec.Command(script, append([]string{"start"}, args...)...).CombinedOutput()
	if err != nil {
		env.missing = fmt.Sprintf("scripts/chroma-server.sh start failed: %v: %s", err, strings.TrimSpace(string(out)))
		return nil
	}
	env.url = fmt.Sprintf("http://127.0.0.1:%d", port)
	env.script, env.args = script, args
	return func() { _ = exec.Command(script, append([]string{"stop"}, args...)...).Run() }
}

// requireServer skips (or, under CI=true, fails) when there is no server.
func requireServer(t *testing.T) {
	t.Helper()
	if env.missing == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("no Chroma server (CI=true makes this a failure): %s", env.missing)
	}
	t.Skipf("SKIPPED: no Chroma server: %s", env.missing)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("no free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// serverCtl stops or starts the test's own Chroma server; tests that need
// it skip when the server is external (CHROMAFS_TEST_URL).
func serverCtl(t *testing.T, verb string) {
	t.Helper()
	if env.script == "" {
		t.Skip("SKIPPED: the Chroma server is external (CHROMAFS_TEST_URL); cannot stop it")
	}
	if out, err := exec.Command(env.script, append([]string{verb}, env.args...)...).CombinedOutput(); err != nil {
		t.Fatalf("chroma-server.sh %s: %v: %s", verb, err, out)
	}
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
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return 0
}
