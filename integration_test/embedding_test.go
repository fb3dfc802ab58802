package integration_test

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// embedCorpus writes n pages to dir: dense ones (8 KiB of numbers, about
// 3,500 cl100k tokens each, sorted first so that they share a write of
// 300 chunks: over OpenAI's 300,000 tokens a request) and short prose.
func embedCorpus(t *testing.T, dir string, dense, short int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(33, 1))
	words := strings.Fields("the a of to and in is for on with that as by this be are from or it an at which can you your " +
		"page api key token rotate deploy cluster node request response error config file path search index chunk embed model")
	for i := range dense {
		var b strings.Builder
		for b.Len() < 8000 {
			fmt.Fprintf(&b, "%d ", rng.IntN(100000))
		}
		copyFile(t, filepath.Join(dir, "dense", fmt.Sprintf("%04d.md", i)), strings.NewReader(b.String()+"\n"))
	}
	for i := range short {
		var b strings.Builder
		fmt.Fprintf(&b, "# Page %d\n\n", i)
		for b.Len() < 120 {
			b.WriteString(words[rng.IntN(len(words))] + " ")
		}
		copyFile(t, filepath.Join(dir, "pages", fmt.Sprintf("%02d", i%40), fmt.Sprintf("%04d.md", i)), strings.NewReader(b.String()+"\n"))
	}
}

var embeddedLine = regexp.MustCompile(`([0-9]+) tokens embedded \(counted with cl100k_base\) in ([0-9]+) requests?, ([0-9]+) retr(?:y|ies)`)

// embedded reads the summary's embedding figures: tokens, requests, retries.
func embedded(t *testing.T, summary string) (tokens, requests, retries int64) {
	t.Helper()
	m := embeddedLine.FindStringSubmatch(summary)
	if m == nil {
		t.Fatalf("the summary does not say what was embedded:\n%s", summary)
	}
	tokens, _ = strconv.ParseInt(m[1], 10, 64)
	requests, _ = strconv.ParseInt(m[2], 10, 64)
	retries, _ = strconv.ParseInt(m[3], 10, 64)
	return
}

// TestEmbeddingContract (issue 33): chromafs-ingest with default flags
// ingests 1,000 pages with a real model through a server that keeps
// OpenAI's contract (2,048 inputs, 8,192 tokens an input, 300,000 a
// request, counted with OpenAI's tokenizer by an npm package: a violation
// is a 400): nothing is refused, and the tokens the summary counts are the
// server's. One write of 300 chunks holds more than 300,000 tokens here,
// so the stage must cut it. Then a server that rate-limits (429 with
// Retry-After) is ridden out by retries, counted alike on both sides; a
// model slower than --embed-timeout fails with a message that names the
// embedding endpoint and what to try, never the Chroma server; a model
// slower than Chroma's --timeout is waited for (the stage has its own
// deadline); and a first answer slower than --embed-timeout is asked for
// again.
func TestEmbeddingContract(t *testing.T) {
	requireServer(t)
	t.Run("openai-limits", func(t *testing.T) {
		s := requireEmbedServer(t)
		src := t.TempDir()
		embedCorpus(t, src, 150, 850)
		start := time.Now()
		out, errOut, code := ingestCmd(t, embedEnv(), "--chroma-url", env.url, "--collection", collectionName(t), "--quiet",
			"--embedding", "openai", "--embedding-config", embeddingConfig(s), src)
		if code != 0 {
			t.Fatalf("ingest of 1,000 pages: exit %d\n%s%s", code, out, errOut)
		}
		t.Logf("ingest of 1,000 pages with the real model: %s\n%s", time.Since(start).Round(time.Millisecond), out)
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		tokens, requests, retries := embedded(t, out)
		if len(st.Refused) != 0 || retries != 0 {
			t.Errorf("the server refused %v, the ingest retried %d times; want nothing refused", st.Refused, retries)
		}
		if tokens != st.PromptTokens || requests != int64(st.Requests) || st.Answered != st.Requests {
			t.Errorf("the summary counts %d tokens in %d requests; the server %d tokens, %d requests, %d answered", tokens, requests, st.PromptTokens, st.Requests, st.Answered)
		}
		if tokens <= 300_000 || requests < 5 { // 1,000 chunks: 4 writes, the dense one cut in two or more
			t.Errorf("%d tokens in %d requests: the corpus does not make a write pass 300,000 tokens; the test proves nothing", tokens, requests)
		}
	})
	t.Run("rate-limited", func(t *testing.T) {
		s := requireEmbedServer(t, "--rate", "1")
		src := t.TempDir()
		embedCorpus(t, src, 0, 700) // 3 writes, 4 workers: 3 requests at once
		out, errOut, code := ingestCmd(t, embedEnv(), "--chroma-url", env.url, "--collection", collectionName(t), "--quiet",
			"--embedding", "openai", "--embedding-config", embeddingConfig(s), "--embed-concurrency", "3", src)
		if code != 0 {
			t.Fatalf("ingest through a rate limit: exit %d\n%s%s", code, out, errOut)
		}
		st, err := s.Stats()
		if err != nil {
			t.Fatal(err)
		}
		tokens, requests, retries := embedded(t, out)
		if st.Refused["429"] == 0 || int64(st.Refused["429"]) != retries || len(st.Refused) != 1 {
			t.Errorf("the server refused %v, the ingest retried %d times: want some 429s, each retried", st.Refused, retries)
		}
		if tokens != st.PromptTokens || requests != int64(st.Requests) {
			t.Errorf("the summary counts %d tokens in %d requests; the server %d tokens in %d requests", tokens, requests, st.PromptTokens, st.Requests)
		}
	})
	t.Run("input-limit", func(t *testing.T) {
		s := requireEmbedServer(t)
		src := t.TempDir()
		embedCorpus(t, src, 0, 5)
		// 15,000 control characters: a token each, over the 8,192 an input
		// (a chunk of 16 KiB, the largest, may pass it)
		var b strings.Builder
		for i := range 15000 {
			b.WriteByte(byte(1 + i%8))
		}
		copyFile(t, filepath.Join(src, "dense", "tokens.md"), strings.NewReader(b.String()))
		args := []string{"--chroma-url", env.url, "--collection", collectionName(t), "--quiet", "--chunk-size", "16384",
			"--embedding", "openai", "--embedding-config", embeddingConfig(s), src}
		out, errOut, code := ingestCmd(t, embedEnv(), args...)
		if code == 0 || !strings.Contains(errOut, "dense/tokens.md") || !strings.Contains(errOut, "8192 tokens") || !strings.Contains(errOut, "--embed-truncate") {
			t.Errorf("a chunk over the input limit: exit %d; want its file and the limit named:\n%s%s", code, out, errOut)
		}
		if st, err := s.Stats(); err != nil || st.Requests != 0 {
			t.Errorf("the server had %d requests (%v): want nothing sent before the refusal", st.Requests, err)
		}
		out, errOut, code = ingestCmd(t, embedEnv(), append([]string{"--embed-truncate"}, args...)...)
		if code != 0 || !strings.Contains(out, "1 file embedded from the first tokens of a chunk over the model's input limit (--embed-truncate): dense/tokens.md") {
			t.Errorf("--embed-truncate: exit %d\n%s%s", code, out, errOut)
		}
		if st, err := s.Stats(); err != nil || len(st.Refused) != 0 || st.Answered == 0 {
			t.Errorf("the server: %+v %v; want the truncated chunk taken", st, err)
		}
	})
	t.Run("slow-model", func(t *testing.T) {
		s := requireEmbedServer(t, "--slow-first", "4000")
		src := t.TempDir()
		embedCorpus(t, src, 0, 20)
		out, errOut, code := ingestCmd(t, embedEnv(), "--chroma-url", env.url, "--collection", collectionName(t), "--quiet",
			"--embedding", "openai", "--embedding-config", embeddingConfig(s), "--embed-timeout", "1s", "--embed-retries", "0", src)
		msg := strings.ToLower(errOut)
		if code == 0 || !strings.Contains(errOut, s.URL()+"/v1") || !strings.Contains(errOut, "text-embedding-3-small") ||
			!strings.Contains(errOut, "--embed-timeout") || strings.Contains(msg, "chroma server") || strings.Contains(msg, "unreachable") {
			t.Errorf("a model slower than --embed-timeout: exit %d; want an error naming the embedding endpoint and --embed-timeout, not Chroma:\n%s%s", code, out, errOut)
		}
		// Chroma's deadline is not the model's: with --timeout 2s (Chroma's)
		// and the default --embed-timeout, a first answer of 4 s passes
		s = requireEmbedServer(t, "--slow-first", "4000")
		out, errOut, code = ingestCmd(t, embedEnv(), "--chroma-url", env.url, "--collection", collectionName(t)+"-chroma-deadline", "--quiet",
			"--embedding", "openai", "--embedding-config", embeddingConfig(s), "--timeout", "2s", src)
		if code != 0 {
			t.Fatalf("a model slower than Chroma's --timeout: exit %d\n%s%s", code, out, errOut)
		}
		if _, _, retries := embedded(t, out); retries != 0 {
			t.Errorf("%d retries: the slow answer should have been waited for", retries)
		}
		// with the default retries, a fresh server's slow first answer is
		// ridden out: the request is sent again after its deadline
		s = requireEmbedServer(t, "--slow-first", "4000")
		out, errOut, code = ingestCmd(t, embedEnv(), "--chroma-url", env.url, "--collection", collectionName(t)+"-retried", "--quiet",
			"--embedding", "openai", "--embedding-config", embeddingConfig(s), "--embed-timeout", "2s", src)
		if code != 0 {
			t.Fatalf("ingest past a slow first answer: exit %d\n%s%s", code, out, errOut)
		}
		if _, requests, retries := embedded(t, out); retries != 1 || requests != 3 {
			t.Errorf("%d requests, %d retries; want the slow one sent again once (and the tree's)", requests, retries)
		}
	})
}
