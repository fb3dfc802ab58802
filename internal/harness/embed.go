package harness

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
)

// EmbedServer is a private OpenAI-compatible embeddings server with a real
// model (Universal Sentence Encoder lite, offline), run by
// scripts/embed-server.sh on a port of 127.0.0.1. Its embeddings endpoint
// is URL()+"/v1/embeddings"; chroma-go's openai function reaches it with
// api_base URL()+"/v1" and insecure set.
type EmbedServer struct {
	url    string
	script string
	port   string
}

// StartEmbedServer starts the embed server on port (0: a free one) through
// root's scripts/embed-server.sh, which installs its npm packages first if
// needed and returns once GET /health answers; the script's output also
// goes to out when out is not nil.
func StartEmbedServer(root string, port int, out io.Writer) (*EmbedServer, error) {
	if port == 0 {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		port = p
	}
	s := &EmbedServer{
		url:    fmt.Sprintf("http://127.0.0.1:%d", port),
		script: filepath.Join(root, "scripts", "embed-server.sh"),
		port:   strconv.Itoa(port),
	}
	if err := s.run("start", out); err != nil {
		return nil, err
	}
	return s, nil
}

// URL is the server's base URL, http://127.0.0.1:PORT.
func (s *EmbedServer) URL() string { return s.url }

// Stop stops the server (its recorded pid only).
func (s *EmbedServer) Stop() error { return s.run("stop", nil) }

func (s *EmbedServer) run(verb string, out io.Writer) error {
	return runScript(s.script, []string{verb, "--port", s.port}, out)
}
