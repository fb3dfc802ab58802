package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
// goes to out when out is not nil. flags go to the server (--rate N,
// --slow-first MS, its limits: see scripts/embed-server/server.mjs).
func StartEmbedServer(root string, port int, out io.Writer, flags ...string) (*EmbedServer, error) {
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
	args := []string{"start", "--port", s.port}
	if len(flags) > 0 {
		args = append(append(args, "--"), flags...)
	}
	if err := runScript(s.script, args, out); err != nil {
		return nil, err
	}
	return s, nil
}

// EmbedStats is what the server answered and refused (GET /stats).
type EmbedStats struct {
	Requests     int            `json:"requests"`
	Answered     int            `json:"answered"`
	Refused      map[string]int `json:"refused"` // by HTTP status
	PromptTokens int64          `json:"prompt_tokens"`
}

// Stats asks the server what it answered and refused so far.
func (s *EmbedServer) Stats() (EmbedStats, error) {
	var st EmbedStats
	resp, err := http.Get(s.url + "/stats")
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("GET /stats: %s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// URL is the server's base URL, http://127.0.0.1:PORT.
func (s *EmbedServer) URL() string { return s.url }

// Stop stops the server (its recorded pid only).
func (s *EmbedServer) Stop() error { return s.run("stop", nil) }

func (s *EmbedServer) run(verb string, out io.Writer) error {
	return runScript(s.script, []string{verb, "--port", s.port}, out)
}
