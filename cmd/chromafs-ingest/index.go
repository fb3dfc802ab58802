package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/index"
	"github.com/chromafs/chromafs/internal/cli"
	"github.com/chromafs/chromafs/treeload"
)

const indexUsage = `Usage: chromafs-ingest index [flags]

Makes a collection written by another tool mountable: it reads every
record's metadata and document once (LangChain's or LlamaIndex's Chroma
vector store, or any loader that keeps a file path in the metadata),
reassembles each file from its chunks, and writes a chromafs path tree
into the collection (the __path_tree__ record and its parts, marked
chromafs_owner=chromafs-ingest) that maps every file onto byte ranges of
the existing records. No existing record is changed or deleted; a later
mount loads the tree in one request and reads the records by id, each part
verified against the digest recorded now (a record changed since is EIO).
Run it again after the collection changes: until then, a mount whose
refresh sees another record count serves the records as scanned and says so.

Reassembly is exact where the records say where they start (LangChain's
start_index, LlamaIndex's start_char_idx, --offset-key); elsewhere chunks
are joined at their overlaps in order (LangChain.js's line numbers,
--order-key, LlamaIndex's PREVIOUS/NEXT links), and what no record holds (whitespace a splitter stripped) is
guessed. Files that are not exact are counted in the summary, and each
mount lists those it shows, with why, in .chromafs-reassembly.txt at its
root.

The tree records get a fixed unit-vector embedding of the collection's
dimension (the tool's own embedding function is not needed): a semantic
search may still return them; filter on chromafs_owner to leave them out.

Layouts (--layout): auto (detected from the records), langchain (metadata
source, start_index or locFrom/locTo), llamaindex (file_path,
_node_content), custom (--path-key, with --offset-key or --order-key).
Without --groups-key every file is public; with it, a file is visible
only where every one of its records is: to the groups that all of its
records naming groups name (a list, or a comma-separated string); records
that name none in common, or a malformed value, hide it from every view.
The tree records the key it was written with (chromafs_index_groups_key),
so that a mount whose --groups-key differs never serves it looser.

Exit status: 0 done; 1 a runtime error; 2 a usage error.

Flags:
`

type indexOptions struct {
	conn   chroma.Config
	layout treeload.Layout
	dryRun bool
}

func parseIndexFlags(args []string, helpOut io.Writer) (indexOptions, error) {
	var o indexOptions
	fs := cli.New("chromafs-ingest index", indexUsage, helpOut)
	o.conn.RegisterFlags(fs.FlagSet)
	cli.Duration(fs.FlagSet, &o.conn.Timeout, "timeout", chroma.DefaultTimeout, false, "deadline for each request to Chroma")
	o.layout.RegisterFlags(fs.FlagSet, "auto (detected from the records), langchain, llamaindex or custom")
	fs.BoolVar(&o.dryRun, "dry-run", false, "read and report; write nothing")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() != 0 {
		return o, fmt.Errorf("index takes no arguments, got %q (see --help)", fs.Args())
	}
	if err := o.layout.Validate(); err != nil {
		return o, err
	}
	if !o.layout.Scans() {
		return o, fmt.Errorf("--layout %s: index maps the collections of other tools (auto, langchain, llamaindex, custom)", o.layout.Name)
	}
	return o, o.conn.Validate()
}

// runIndex is "chromafs-ingest index".
func runIndex(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parseIndexFlags(args, stdout)
	if errors.Is(err, errHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "chromafs-ingest index: %v\n", err)
		return 2
	}
	sum, err := runIndexOn(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "chromafs-ingest index: %v\n", err)
		return 1
	}
	printWarnings(stderr, sum.Report.Warnings)
	fmt.Fprintln(stdout, sum)
	return 0
}

// maxWarnings bounds the warnings index prints (one per file at most:
// reassembly's, records of one file that disagree on their groups).
const maxWarnings = 20

func printWarnings(w io.Writer, warnings []string) {
	for i, msg := range warnings {
		if i == maxWarnings {
			fmt.Fprintf(w, "warning: %d more not shown\n", len(warnings)-i)
			return
		}
		fmt.Fprintf(w, "warning: %s\n", msg)
	}
}

// runIndexOn opens the collection with an embedding function of its
// dimension (for the tree records it writes) and indexes it.
func runIndexOn(ctx context.Context, o indexOptions) (index.Summary, error) {
	probe, err := chroma.Open(ctx, o.conn, nil)
	if err != nil {
		return index.Summary{}, err
	}
	dim, err := probe.Dimension(ctx)
	probe.Close()
	if err != nil {
		return index.Summary{}, err
	}
	st, err := chroma.Open(ctx, o.conn, chroma.UnitEmbedding(max(dim, 1)))
	if err != nil {
		return index.Summary{}, err
	}
	defer st.Close()
	return index.Run(ctx, st, index.Options{Layout: o.layout, DryRun: o.dryRun})
}
