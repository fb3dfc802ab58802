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

	"github.com/amikos-tech/chroma-go/pkg/embeddings"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/chromafs/chromafs/chroma"
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
	quiet     bool
	version   bool
	lazy      ingest.Lazy
	lazyOver  string
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
	fs.BoolVar(&opt.quiet, "quiet", false, "no progress bar")
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
	ef, err := embeddingFunction(opt.embedding, opt.embedCfg)
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
			return ingest.Run(ctx, emptyStore{}, runOptions(opt, src, stderr))
		}
		return ingest.Summary{}, err
	}
	defer store.Close()
	sum, err := ingest.Run(ctx, store, runOptions(opt, src, stderr))
	if errors.Is(err, chroma.ErrDimension) {
		err = fmt.Errorf("%w; pass the collection's embedding function with --embedding and --embedding-config, or ingest into another collection", err)
	}
	return sum, err
}

func runOptions(opt options, src string, stderr io.Writer) ingest.Options {
	o := ingest.Options{
		Src: src, ChunkSize: opt.chunkSize, DefaultPublic: opt.defPublic, DryRun: opt.dryRun, KeepPrevious: opt.keepPrev,
		Workers: opt.workers, Lazy: opt.lazy, Log: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}
	if f, ok := stderr.(*os.File); ok && !opt.quiet && term.IsTerminal(int(f.Fd())) {
		var bar *progressbar.ProgressBar
		o.Progress = func(done, total int) {
			if bar == nil {
				bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(stderr),
					progressbar.OptionSetDescription("ingest"), progressbar.OptionShowCount(),
					progressbar.OptionClearOnFinish(), progressbar.OptionThrottle(100e6))
			}
			_ = bar.Set(done)
		}
	}
	return o
}

// embeddingFunction builds the named embedding function. The default is
// chroma-go's consistent hash: deterministic, offline, and meaningless for
// semantic search.
func embeddingFunction(name, cfgJSON string) (embeddings.EmbeddingFunction, error) {
	if name == "" {
		name = "consistent_hash"
	}
	if !embeddings.HasDense(name) {
		names := embeddings.ListDense()
		sort.Strings(names)
		return nil, fmt.Errorf("--embedding %q: unknown; available: %s", name, strings.Join(names, ", "))
	}
	cfg := embeddings.EmbeddingFunctionConfig{}
	if cfgJSON != "" {
		if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
			return nil, fmt.Errorf("--embedding-config: %w", err)
		}
	}
	ef, err := embeddings.BuildDense(name, cfg)
	if err != nil {
		return nil, fmt.Errorf("--embedding %s: %w", name, err)
	}
	return ef, nil
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
func (emptyStore) Upsert(context.Context, []chroma.Record) error        { return nil }
func (emptyStore) WriteTree(context.Context, string) error              { return nil }
func (emptyStore) DeleteOwned(context.Context, []string) error          { return nil }
