package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/amikos-tech/chroma-go/pkg/embeddings"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/embed"
)

// fakeEmbedder embeds a text as (its length, 1, 1) and refuses a text
// longer than limit bytes (as over a model's input limit).
type fakeEmbedder struct {
	mu     sync.Mutex
	limit  int
	texts  []string
	failOn string
}

func (f *fakeEmbedder) Embed(_ context.Context, texts []string) ([]embeddings.Embedding, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]embeddings.Embedding, len(texts))
	for i, t := range texts {
		if f.failOn != "" && strings.Contains(t, f.failOn) {
			return nil, errors.New("embedding with openai model m at http://embed.example/v1/: refused")
		}
		f.texts = append(f.texts, t)
		out[i] = embeddings.NewEmbeddingFromFloat32([]float32{float32(len(t)), 1, 1})
	}
	return out, nil
}

func (f *fakeEmbedder) Check(text string) error {
	if len(text) > f.limit {
		return embed.ErrTooLong
	}
	return nil
}

func (f *fakeEmbedder) Truncate(text string) (string, bool) {
	if len(text) > f.limit {
		return text[:f.limit], true
	}
	return text, false
}

func (f *fakeEmbedder) Stats() embed.Stats {
	return embed.Stats{Tokens: 42, Requests: 3, Counter: "counted with fake"}
}

// TestEmbeddingStage: with a stage, every record is written with the
// embedding the stage made of its text (a binary chunk's of its
// description); a chunk over the model's input limit stops the run
// before anything is written, naming its file; the stage's failure
// writes nothing of its batch and is the run's error; the summary says
// what the stage sent; a collection of another dimension is refused
// through the stage's probe.
func TestEmbeddingStage(t *testing.T) {
	src := t.TempDir()
	writeFiles(t, src, map[string]string{
		"a.md":      strings.Repeat("alpha\n", 30),
		"bin/x.png": "\x89PNG\r\n\x1a\n\xff\xfe",
		"docs/b.md": "beta\n",
	})
	st := newMemStore()
	fe := &fakeEmbedder{limit: 1 << 20}
	sum, err := Run(context.Background(), st, Options{Src: src, ChunkSize: 64, Workers: 2, Embed: fe})
	if err != nil {
		t.Fatal(err)
	}
	chunks := 0
	for id, r := range st.recs {
		if id == chroma.TreeID || strings.HasPrefix(id, "__") {
			continue
		}
		chunks++
		v := r.Embedding
		if v == nil || v.Len() != 3 || int(v.ContentAsFloat32()[0]) != len(r.EmbedSource()) {
			t.Errorf("%s: written with embedding %v, want the stage's of its %d-byte text", id, v, len(r.EmbedSource()))
		}
	}
	if chunks != sum.Chunks || len(fe.texts) != chunks {
		t.Errorf("%d chunks written, %d in the summary, %d texts embedded", chunks, sum.Chunks, len(fe.texts))
	}
	if !strings.Contains(sum.String(), "42 tokens embedded (counted with fake) in 3 requests") {
		t.Errorf("summary: %s", sum)
	}

	// a second run with a model of a smaller limit: every page is
	// unchanged, nothing is embedded, nothing checked
	if _, err := Run(context.Background(), st, Options{Src: src, ChunkSize: 64, Workers: 2, Embed: &fakeEmbedder{limit: 10}}); err != nil {
		t.Errorf("a run with nothing to embed checked the unchanged pages: %v", err)
	}

	// a chunk over the limit: nothing written, the file named
	st = newMemStore()
	_, err = Run(context.Background(), st, Options{Src: src, ChunkSize: 64, Workers: 2, Embed: &fakeEmbedder{limit: 10}})
	if !errors.Is(err, embed.ErrTooLong) || !strings.Contains(err.Error(), "a.md") || !strings.Contains(err.Error(), "--chunk-size") || st.upserts != 0 || st.tree != "" {
		t.Errorf("a chunk over the input limit: %v, %d upserts; want the file named and nothing written", err, st.upserts)
	}

	// --embed-truncate: the chunk is embedded from its first tokens, its
	// file named in the summary; its stored text is whole
	st = newMemStore()
	fe = &fakeEmbedder{limit: 40}
	sum, err = Run(context.Background(), st, Options{Src: src, ChunkSize: 64, Workers: 1, Embed: fe, EmbedTruncate: true})
	if err != nil || !slices.Equal(sum.Truncated, []string{"a.md"}) || !strings.Contains(sum.String(), "1 file embedded from the first tokens of a chunk over the model's input limit (--embed-truncate): a.md") {
		t.Errorf("--embed-truncate: %v, truncated %q, summary %s", err, sum.Truncated, sum)
	}
	for _, text := range fe.texts {
		if len(text) > 40 {
			t.Errorf("a text of %d bytes embedded past the limit", len(text))
		}
	}
	if got := st.content(t, "a.md"); got != strings.Repeat("alpha\n", 30) {
		t.Errorf("a.md stored truncated: %q", got)
	}

	// the stage fails: its batch is not written, the run fails with it
	st = newMemStore()
	_, err = Run(context.Background(), st, Options{Src: src, ChunkSize: 64, Workers: 1, Embed: &fakeEmbedder{limit: 1 << 20, failOn: "beta"}})
	if err == nil || !strings.Contains(err.Error(), "http://embed.example/v1/") || st.tree != "" {
		t.Errorf("the stage failing: %v (tree written: %v)", err, st.tree != "")
	}

	// another dimension: refused through the stage, nothing written
	st = newMemStore()
	st.dim = 384
	_, err = Run(context.Background(), st, Options{Src: src, ChunkSize: 64, Workers: 1, Embed: fe})
	if !errors.Is(err, chroma.ErrDimension) || st.upserts != 0 {
		t.Errorf("a 384-dimensional collection, 3-dimensional stage: %v, %d upserts", err, st.upserts)
	}
}

// TestProgressAfterWrites: progress counts files whose records are
// written, whatever the batches (a file across two writes counts once,
// with its last), and ends at the total.
func TestProgressAfterWrites(t *testing.T) {
	src := t.TempDir()
	files := map[string]string{"big.md": strings.Repeat("x\n", 400*40)} // 400 chunks of 64 bytes: two writes
	for i := range 30 {
		files[fmt.Sprintf("p/%02d.md", i)] = "page\n"
	}
	writeFiles(t, src, files)
	var mu sync.Mutex
	var calls [][2]int
	st := newMemStore()
	_, err := Run(context.Background(), st, Options{Src: src, ChunkSize: 64, Workers: 3, Progress: func(done, total int) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, [2]int{done, total})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(calls) == 0 {
		t.Fatal("no progress")
	}
	last := calls[len(calls)-1]
	for i, c := range calls {
		if i > 0 && c[0] <= calls[i-1][0] {
			t.Errorf("progress went %v after %v", c, calls[i-1])
		}
	}
	if last[0] != last[1] || st.upserts < 2 {
		t.Errorf("progress ends at %v, %d writes", last, st.upserts)
	}
}
