// Command chromafs-ingest loads a directory of documentation into a Chroma
// collection in the layout chromafs-mount serves (docs/FORMAT.md).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/amikos-tech/chroma-go/pkg/embeddings"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/embed"
	"github.com/chromafs/chromafs/ingest"
	"github.com/chromafs/chromafs/internal/cli"
)

const usage = `Usage: chromafs-ingest [flags] SRC_DIR
       chromafs-ingest index [flags]    (a collection of another tool: see index --help)

Loads every file under SRC_DIR into a Chroma collection as a page that
chromafs-mount can serve: the file is cut into chunks (at most --chunk-size
bytes, cut at headings or blank lines where possible) whose concatenation is
the file byte for byte, and a path tree records each page's path, size,
mtime, chunk lengths and access. A file that is not UTF-8 text (an image, a
font, a PDF) is stored in binary chunks: each document is the base64 of at
most 3/4 of --chunk-size bytes, and its embedding is made of the file's path
and media type; it has no frontmatter, so --default-public decides its
access.

Access comes from YAML frontmatter, as in Mintlify:
    ---
    public: false
    groups: [admin, billing]
    ---
A page without these keys is public unless --default-public=false; a page
that lists groups but not "public" is private. Malformed frontmatter hides
the page (fail closed) and is reported.

Every directory is recorded (empty ones too, with their mtimes), and so is
the executable bit. A relative symbolic link that stays inside SRC_DIR is
kept as a link (to a file or a directory); an absolute one that ends at a
file inside SRC_DIR is stored as that file.

Large files can stay where they are published: with --lazy-base-url and
--lazy-over or --lazy-match, the chosen files are recorded as lazy pointers
(their URL, size and SHA-256 digests), no chunks; the mount fetches them on
read, verified, and cached like any page.

Re-running updates changed pages, deletes removed ones and leaves unchanged
ones untouched. The tree is written last, so a failed run leaves the previous
tree readable. Sockets, devices, broken symlinks and symlinks that leave
SRC_DIR are skipped and listed. A file or directory that
exists but cannot be read (permissions, I/O error, removed mid-run) stops
the run with exit 1 before the tree changes: no page is ever deleted because
it could not be read.

The collection may be shared with other writers (a RAG pipeline, LangChain,
LlamaIndex): every record chromafs-ingest writes carries the metadata
chromafs_owner=chromafs-ingest, and it overwrites or deletes only records
that carry it. Records of other writers are counted in the summary and never
touched; a run that would overwrite one (same id) stops instead.

A re-run keeps the chunks of the versions it replaces or deletes until the
next run (--keep-previous): a mount that refreshes to the new tree while a
reader has an old file open lets it finish with the old bytes.

--dry-run reads the collection (its existence, its embedding dimension, the
records it holds) and reports what a run would write and delete, failing
where the real run would fail.

The token is read from env CHROMA_TOKEN or --token-file, never from a flag.

Examples:
    chromafs-ingest --collection docs ./docs
    CHROMA_URL=https://chroma.example:8000 chromafs-ingest --collection docs --dry-run ./docs

Exit status: 0 done (or --help, --version); 1 a runtime error (the server,
the collection, a source file that cannot be read, a record of another
writer in the way: one line says which; nothing of the tree changed); 2 a
usage error (a bad flag or value).

Environment: CHROMA_URL, CHROMAFS_COLLECTION, CHROMA_TENANT, CHROMA_DATABASE
(defaults of the flags of the same names), CHROMA_TOKEN (the API token).

Flags:
`

type options struct {
	conn      chroma.Config
	chunkSize int
	defPublic bool
	dryRun    bool
	keepPrev  bool
	workers   int
	embedding string
	embedCfg  string
	// the embedding stage (package embed)
	embedTimeout time.Duration
	embedConc    int
	embedRetries int
	embedCut     bool
	quiet        bool
	version      bool
	lazy         ingest.Lazy
	lazyOver     string
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errHelp is what a flag set returns for -h and --help.
var errHelp = flag.ErrHelp

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "index" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runIndex(ctx, args[1:], stdout, stderr)
	}
	opt, src, err := parseFlags(args, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "chromafs-ingest: %v\n", err)
		return 2
	}
	if opt.version {
		fmt.Fprintln(stdout, cli.Version("chromafs-ingest", version))
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	sum, err := ingestDir(ctx, opt, src, stderr)
	for _, s := range sum.Skipped {
		fmt.Fprintf(stderr, "skipped: %s: %s\n", s.Rel, s.Reason)
	}
	if err != nil {
		fmt.Fprintf(stderr, "chromafs-ingest: %v\n", err)
		return 1
	}
	prefix := "ingested"
	if opt.dryRun {
		prefix = "dry run, nothing written"
	}
	fmt.Fprintf(stdout, "%s: %s\n", prefix, sum)
	return 0
}

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func parseFlags(args []string, helpOut io.Writer) (options, string, error) {
	var opt options
	fs := cli.New("chromafs-ingest", usage, helpOut)
	opt.conn.RegisterFlags(fs.FlagSet)
	cli.Duration(fs.FlagSet, &opt.conn.Timeout, "timeout", chroma.DefaultTimeout, false, "deadline for each request to Chroma")
	fs.BoolVar(&opt.version, "version", false, "print the version and exit")
	fs.IntVar(&opt.chunkSize, "chunk-size", 8<<10, fmt.Sprintf("largest chunk in bytes (%d..%d)", ingest.MinChunkSize, chroma.MaxDocument))
	fs.BoolVar(&opt.defPublic, "default-public", true, "make pages without access frontmatter public")
	fs.BoolVar(&opt.dryRun, "dry-run", false, "read and report what would change; write nothing")
	fs.BoolVar(&opt.keepPrev, "keep-previous", true, "keep the chunks of the page versions a run replaces or deletes until\nthe next run, so that readers of mounts that refresh to the new tree\nwhile reading a file finish it with its old bytes; =false deletes them now")
	fs.IntVar(&opt.workers, "workers", 4, "concurrent write requests")
	fs.StringVar(&opt.embedding, "embedding", "consistent_hash",
		"embedding function: consistent_hash (default: offline, no model download,\nand it carries NO semantic meaning), or a chroma-go function such as\nopenai or ollama, configured with --embedding-config")
	fs.StringVar(&opt.embedCfg, "embedding-config", "", `JSON configuration for --embedding, e.g. '{"model_name":"text-embedding-3-small","api_key_env_var":"OPENAI_API_KEY"}'`)
	cli.Duration(fs.FlagSet, &opt.embedTimeout, "embed-timeout", 2*time.Minute, false,
		"deadline for each embedding request (a model on a CPU takes seconds per\nrequest); Chroma's writes keep --timeout")
	fs.IntVar(&opt.embedConc, "embed-concurrency", 2, "embedding requests in flight at once, across the run")
	fs.IntVar(&opt.embedRetries, "embed-retries", 5, "attempts after the first for an embedding request the provider rate-limited\n(429: its Retry-After honoured) or failed (5xx, a timeout); 0 for none.\n"+
		"Requests stay within the provider's limits: openai 2,048 inputs, 8,192\ntokens an input and 300,000 a request, counted with OpenAI's tokenizer\n"+
		"(cl100k_base, embedded); ollama 512 inputs, others 96, whose tokens the\nsummary estimates at one per 3 bytes. A chunk over the per-input limit\nstops the run before anything is written, naming its file")
	fs.BoolVar(&opt.embedCut, "embed-truncate", false, "embed a chunk over the model's per-input limit from its first tokens (the\nsummary names its files) instead of stopping; the chunk is stored whole")
	fs.BoolVar(&opt.quiet, "quiet", false, "no progress bar (nor, when stderr is not a terminal, the progress line\nlogged each minute)")
	fs.StringVar(&opt.lazy.BaseURL, "lazy-base-url", "", "record the files chosen by --lazy-over and --lazy-match as lazy pointers to\nURL/PATH (each path component URL-escaped) instead of storing them in\nchunks; publish SRC_DIR's files there (the mount reads them with ranged\nrequests and checks every byte against the SHA-256 digests recorded now)")
	fs.StringVar(&opt.lazyOver, "lazy-over", "", "with --lazy-base-url: files larger than this size (e.g. 4MiB) become pointers")
	fs.Func("lazy-match", "with --lazy-base-url: files whose path or name matches this glob (e.g.\n'*.mp4') become pointers; repeatable", func(v string) error {
		opt.lazy.Match = append(opt.lazy.Match, v)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return opt, "", err
	}
	if opt.version {
		return opt, "", nil
	}
	if opt.embedConc < 1 {
		return opt, "", fmt.Errorf("--embed-concurrency %d: want 1 or more requests in flight", opt.embedConc)
	}
	if opt.embedRetries < 0 {
		return opt, "", fmt.Errorf("--embed-retries %d: want 0 or more", opt.embedRetries)
	}
	if opt.workers < 1 {
		return opt, "", fmt.Errorf("--workers %d: want 1 or more concurrent write requests (Chroma Cloud allows 10 per collection)", opt.workers)
	}
	if opt.lazyOver != "" {
		n, err := cli.ParseSize(opt.lazyOver)
		if err != nil {
			return opt, "", fmt.Errorf("--lazy-over: %w", err)
		}
		opt.lazy.Over = n
	}
	if err := opt.lazy.Check(); err != nil {
		return opt, "", err
	}
	if fs.NArg() != 1 {
		return opt, "", fmt.Errorf("want exactly one SRC_DIR, got %d arguments (see --help)", fs.NArg())
	}
	if opt.chunkSize < ingest.MinChunkSize || opt.chunkSize > chroma.MaxDocument {
		return opt, "", fmt.Errorf("--chunk-size %d: want %d..%d bytes (Chroma caps a document at 16 KiB)", opt.chunkSize, ingest.MinChunkSize, chroma.MaxDocument)
	}
	return opt, fs.Arg(0), opt.conn.Validate()
}

func ingestDir(ctx context.Context, opt options, src string, stderr io.Writer) (ingest.Summary, error) {
	ef, cfg, err := embeddingFunction(opt.embedding, opt.embedCfg)
	if err != nil {
		return ingest.Summary{}, err
	}
	stage, err := embedStage(opt, ef, cfg, warnLog(stderr))
	if err != nil {
		return ingest.Summary{}, err
	}
	if st, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
		return ingest.Summary{}, fmt.Errorf("SRC_DIR %s does not exist", src)
	} else if err != nil {
		return ingest.Summary{}, fmt.Errorf("SRC_DIR: %w", err)
	} else if !st.IsDir() {
		return ingest.Summary{}, fmt.Errorf("SRC_DIR %s is not a directory", src)
	}
	open := chroma.OpenOrCreate
	if opt.dryRun {
		open = chroma.Open
	}
	store, err := open(ctx, opt.conn, ef)
	if err != nil {
		if opt.dryRun && errors.Is(err, chroma.ErrNoCollection) {
			fmt.Fprintf(stderr, "dry run: collection %q does not exist; a real run creates it\n", opt.conn.Collection)
			return ingest.Run(ctx, emptyStore{}, runOptions(opt, src, stage, stderr))
		}
		return ingest.Summary{}, err
	}
	defer store.Close()
	if stage != nil {
		store.EmbedWith(stage.Embed)
	}
	sum, err := ingest.Run(ctx, store, runOptions(opt, src, stage, stderr))
	if errors.Is(err, chroma.ErrDimension) {
		err = fmt.Errorf("%w; pass the collection's embedding function with --embedding and --embedding-config, or ingest into another collection", err)
	}
	return sum, err
}

// warnLog logs warnings and errors to w.
func warnLog(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// embedStage is the embedding stage of the function, or nil for one that
// runs in this process.
func embedStage(opt options, ef embeddings.EmbeddingFunction, cfg embeddings.EmbeddingFunctionConfig, log *slog.Logger) (*embed.Stage, error) {
	c, ok, err := embed.ForFunction(opt.embedding, cfg)
	if err != nil || !ok {
		return nil, err
	}
	if c.Func == nil { // chroma-go's function sends the requests
		c.Func = ef
	}
	c.Timeout, c.Concurrency, c.Log = opt.embedTimeout, opt.embedConc, log
	c.Retries = opt.embedRetries
	if c.Retries == 0 {
		c.Retries = -1 // none
	}
	return embed.New(c), nil
}

func runOptions(opt options, src string, stage *embed.Stage, stderr io.Writer) ingest.Options {
	o := ingest.Options{
		Src: src, ChunkSize: opt.chunkSize, DefaultPublic: opt.defPublic, DryRun: opt.dryRun, KeepPrevious: opt.keepPrev,
		Workers: opt.workers, Lazy: opt.lazy, Log: warnLog(stderr),
	}
	if stage != nil {
		o.Embed, o.EmbedTruncate = stage, opt.embedCut
	}
	if opt.quiet {
		return o
	}
	if f, ok := stderr.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		var bar *progressbar.ProgressBar
		o.Progress = func(done, total int) {
			if bar == nil {
				bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(stderr),
					progressbar.OptionSetDescription("ingest"), progressbar.OptionShowCount(), progressbar.OptionShowIts(),
					progressbar.OptionSetItsString("files"), progressbar.OptionSetPredictTime(true),
					progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100e6))
			}
			_ = bar.Set(done)
		}
		return o
	}
	o.Progress = progressLines(stderr, time.Minute, time.Now)
	return o
}

// progressLines logs a progress line (files done, rate, time left) at most
// once every period: a log has no terminal to redraw a bar on.
func progressLines(w io.Writer, period time.Duration, now func() time.Time) func(done, total int) {
	start := now()
	last := start
	return func(done, total int) {
		t := now()
		if t.Sub(last) < period || done >= total {
			return
		}
		last = t
		rate := float64(done) / t.Sub(start).Seconds()
		left := "unknown"
		if rate > 0 {
			left = (time.Duration(float64(total-done)/rate) * time.Second).Round(time.Second).String()
		}
		fmt.Fprintf(w, "chromafs-ingest: %d of %d files read (%.1f files/s), about %s left\n", done, total, rate, left)
	}
}

// embeddingFunction builds the named embedding function. The default is
// chroma-go's consistent hash: deterministic, offline, and meaningless for
// semantic search.
func embeddingFunction(name, cfgJSON string) (embeddings.EmbeddingFunction, embeddings.EmbeddingFunctionConfig, error) {
	if name == "" {
		name = "consistent_hash"
	}
	if !embeddings.HasDense(name) {
		names := embeddings.ListDense()
		sort.Strings(names)
		return nil, nil, fmt.Errorf("--embedding %q: unknown; available: %s", name, strings.Join(names, ", "))
	}
	cfg := embeddings.EmbeddingFunctionConfig{}
	if cfgJSON != "" {
		if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
			return nil, nil, fmt.Errorf("--embedding-config: %w", err)
		}
	}
	ef, err := embeddings.BuildDense(name, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("--embedding %s: %w", name, err)
	}
	return ef, cfg, nil
}

// emptyStore stands in for a collection that does not exist yet, so a dry
// run can report what a first ingest would write.
type emptyStore struct{}

func (emptyStore) LoadTree(context.Context) ([]byte, error) { return nil, chroma.ErrNoTree }
func (emptyStore) Inventory(context.Context) (chroma.Inventory, error) {
	return chroma.Inventory{}, nil
}
func (emptyStore) NotOwned(context.Context, []string) ([]string, error) { return nil, nil }
func (emptyStore) CheckDimension(context.Context) error                 { return nil }
func (emptyStore) Dimension(context.Context) (int, error)               { return 0, nil }
func (emptyStore) Upsert(context.Context, []chroma.Record) error        { return nil }
func (emptyStore) WriteTree(context.Context, string) error              { return nil }
func (emptyStore) DeleteOwned(context.Context, []string) error          { return nil }
