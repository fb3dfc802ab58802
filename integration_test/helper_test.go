package integration_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Some tests need a process of another user that does what no command
// does (hold many connections to chromafsd's socket): this test binary,
// copied where that user may run it, started under setpriv with
// helperEnv naming its role. TestMain hands such a process to runHelper
// before anything else.

const helperEnv = "CHROMAFS_IT_HELPER"

// helperBinary copies this test binary into dir (which other users may
// enter) and returns its path.
func helperBinary(t *testing.T, dir string) string {
	t.Helper()
	self, err := os.Executable()
	must(t, err)
	dst := filepath.Join(dir, "it-helper")
	if _, err := os.Stat(dst); err == nil {
		return dst
	}
	must(t, exec.Command("cp", self, dst).Run())
	must(t, os.Chmod(dst, 0o755))
	return dst
}

// runHelper runs a helper's role and returns its exit status.
func runHelper(role string) int {
	switch role {
	case "hold-conns":
		return holdConns(os.Getenv("CHROMAFS_IT_SOCKET"), atoi(os.Getenv("CHROMAFS_IT_CONNS")))
	}
	fmt.Fprintf(os.Stderr, "unknown helper role %q\n", role)
	return 2
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n }

// holdReport is what hold-conns prints: first once every connection has
// asked once, then once the daemon has closed what it kept.
type holdReport struct {
	Admitted, Refused, Failed int
	Refusal                   string // the body of a refusal
	ClosedByServer            int
	ClosedAfterMS             int64 // the last close, from the end of the requests
}

// holdConns opens n connections to the socket and asks GET /v1/health on
// each, keeping the connection (keep-alive), as the red team's idle
// connections did. It reports how many the daemon answered (admitted) or
// refused (503), waits for a line on stdin, then reads until the daemon
// closes every admitted connection (its idle timeout) or 60 s pass.
func holdConns(socket string, n int) int {
	var rep holdReport
	var kept []net.Conn
	for range n {
		c, err := net.Dial("unix", socket)
		if err != nil {
			rep.Failed++
			continue
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprint(c, "GET /v1/health HTTP/1.1\r\nHost: chromafsd\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		switch {
		case err != nil:
			rep.Failed++
			c.Close()
		case resp.StatusCode == http.StatusOK:
			_, _ = io.Copy(io.Discard, resp.Body)
			rep.Admitted++
			kept = append(kept, c)
		default:
			b, _ := io.ReadAll(resp.Body)
			rep.Refused++
			rep.Refusal = string(b)
			c.Close()
		}
	}
	out := json.NewEncoder(os.Stdout)
	_ = out.Encode(rep)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	start := time.Now()
	done := make(chan bool, len(kept))
	for _, c := range kept {
		go func() {
			_ = c.SetDeadline(time.Now().Add(60 * time.Second))
			_, err := c.Read(make([]byte, 1))
			done <- err == io.EOF || (err != nil && !isTimeout(err))
		}()
	}
	for range kept {
		if <-done {
			rep.ClosedByServer++
			rep.ClosedAfterMS = time.Since(start).Milliseconds()
		}
	}
	_ = out.Encode(rep)
	return 0
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// helperProc is a running helper.
type helperProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *json.Decoder
}

// startHelper runs role as uid (group 65534, no other groups) with env.
func startHelper(t *testing.T, bin string, uid int, role string, env ...string) *helperProc {
	t.Helper()
	cmd := exec.Command("setpriv", fmt.Sprintf("--reuid=%d", uid), "--regid=65534", "--clear-groups", bin)
	cmd.Env = append(append(os.Environ(), helperEnv+"="+role), env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return &helperProc{cmd: cmd, stdin: stdin, out: json.NewDecoder(stdout)}
}

func (h *helperProc) next(t *testing.T, v any) {
	t.Helper()
	if err := h.out.Decode(v); err != nil {
		t.Fatalf("the helper's report: %v", err)
	}
}

func (h *helperProc) proceed() { _, _ = io.WriteString(h.stdin, "go\n") }
