package harness

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Server is a private Chroma server run by scripts/chroma-server.sh on a
// port of 127.0.0.1.
type Server struct {
	URL    string
	script string
	args   []string // --port and --data
}

// StartServer starts a Chroma server on a free port with its data in
// dataDir, through root's scripts/chroma-server.sh; the script's output
// also goes to out when out is not nil.
func StartServer(root, dataDir string, out io.Writer) (*Server, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL:    fmt.Sprintf("http://127.0.0.1:%d", port),
		script: filepath.Join(root, "scripts", "chroma-server.sh"),
		args:   []string{"--port", strconv.Itoa(port), "--data", dataDir},
	}
	if err := s.run("start", out); err != nil {
		return nil, err
	}
	return s, nil
}

// Start starts the server again after Stop, on the same port and data.
func (s *Server) Start() error { return s.run("start", nil) }

// Stop stops the server (the script escalates to SIGKILL, for its pid only).
func (s *Server) Stop() error { return s.run("stop", nil) }

func (s *Server) run(verb string, out io.Writer) error {
	return runScript(s.script, append([]string{verb}, s.args...), out)
}

// runScript runs one of the scripts that start and stop servers, its
// output given to out too (when set) and quoted in the error.
func runScript(script string, args []string, out io.Writer) error {
	var b bytes.Buffer
	cmd := exec.Command(script, args...)
	w := io.Writer(&b)
	if out != nil {
		w = io.MultiWriter(&b, out)
	}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("scripts/%s %s: %w: %s", filepath.Base(script), args[0], err, strings.TrimSpace(b.String()))
	}
	return nil
}
