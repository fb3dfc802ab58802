package treeload

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"time"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/foreign"
	"github.com/chromafs/chromafs/tree"
)

// Collections written by other tools (package foreign) have no path tree
// of their own. chromafs-ingest index reads them once and writes one; a
// mount of a small one that was never indexed scans it itself, through the
// same functions, so both see the same files.

// Scanner reads every record of a collection; chroma.Store implements it.
type Scanner interface {
	Scan(ctx context.Context, fn func([]chroma.RawRecord) error) (int, error)
	Count(ctx context.Context) (int, error)
}

// Layout chooses how records map to files (flags --layout, --path-key,
// --order-key, --offset-key, --groups-key).
type Layout struct {
	Name, PathKey, OrderKey, OffsetKey, GroupsKey string
	// Unit is what offsets count: codepoints (Python), utf16
	// (JavaScript) or bytes; "" detects it from the records (the
	// layout's where they cannot tell).
	Unit string
}

// RegisterFlags adds the layout flags (--layout, --path-key, --order-key,
// --offset-key, --offset-unit, --groups-key) to fs, spelled alike in every
// command; layouts lists the --layout values the command takes.
func (l *Layout) RegisterFlags(fs *flag.FlagSet, layouts string) {
	fs.StringVar(&l.Name, "layout", "auto", layouts)
	fs.StringVar(&l.PathKey, "path-key", "", "metadata key naming a record's file (a path or a URL); needed by --layout custom")
	fs.StringVar(&l.OrderKey, "order-key", "", "metadata key giving a chunk's position among its file's (a number)")
	fs.StringVar(&l.OffsetKey, "offset-key", "", "metadata key giving a chunk's start offset in its file, in characters")
	fs.StringVar(&l.Unit, "offset-unit", "", "what offsets (--offset-key's, LlamaIndex's) count: codepoints (Python\nclients), utf16 (JavaScript clients) or bytes (default: detected, the one unit\nin which the chunks' lengths and the differences of their offsets agree; the\nlayout's when the data cannot tell; the mount's log and index's summary say\nwhich, and ask for this flag when no unit agrees)")
	fs.StringVar(&l.GroupsKey, "groups-key", "", "metadata key holding a record's access groups (a list, or a comma-separated\nstring; default: every file public). A file is shown only where every one of its\nrecords may be: to the groups all of its records that name groups name (none in\ncommon, or a malformed value anywhere, hides it)")
}

// Validate checks the flags; tree layouts (chromafs, mintlify) pass too.
func (l Layout) Validate() error {
	switch l.Name {
	case "auto", "chromafs", "mintlify", "langchain", "llamaindex":
	case "custom":
		if l.PathKey == "" {
			return errors.New("--layout custom needs --path-key (the metadata key naming each record's file)")
		}
	default:
		return fmt.Errorf("--layout %q: want auto, chromafs, mintlify, langchain, llamaindex or custom", l.Name)
	}
	if _, ok := Units[l.Unit]; !ok && l.Unit != "" {
		return fmt.Errorf("--offset-unit %q: want codepoints, utf16 or bytes", l.Unit)
	}
	return nil
}

// Scans reports whether a collection without a path tree is scanned (not
// for the layouts that require a tree).
func (l Layout) Scans() bool { return l.Name != "chromafs" && l.Name != "mintlify" }

// Units are the --offset-unit names.
var Units = map[string]foreign.Unit{"codepoints": foreign.CodePoints, "utf16": foreign.UTF16, "bytes": foreign.Bytes}

// ErrTooBig is returned when a collection without a tree is too large to
// scan at mount time.
var ErrTooBig = errors.New("too many records to scan at mount time")

// Records reads the records of another writer (chromafs-ingest's own are
// left out: they are in its own tree).
func Records(ctx context.Context, src Scanner) ([]foreign.Record, error) {
	var recs []foreign.Record
	_, err := src.Scan(ctx, func(page []chroma.RawRecord) error {
		for _, r := range page {
			if r.Meta[chroma.KeyOwner] != chroma.OwnerIngest {
				recs = append(recs, foreign.Record{ID: r.ID, Doc: r.Doc, Meta: r.Meta})
			}
		}
		return nil
	})
	return recs, err
}

// Choose is the layout l names, or (auto) the one the records show. Its
// offset unit is l.Unit when given; else foreign.Build detects it from
// the records, and where they cannot tell keeps the layout's (UTF-16
// units for LangChain.js's). Its groups keys are l.GroupsKey and more
// (empty ones and repeats left out): a record is restricted by each.
func Choose(l Layout, recs []foreign.Record, more ...string) (foreign.Layout, error) {
	name := l.Name
	if name == "" || name == "auto" {
		if name = foreign.Detect(recs); name == "" {
			return foreign.Layout{}, fmt.Errorf("cannot tell the layout of %d records (no source, file_path or _node_content): pass --layout custom --path-key KEY", len(recs))
		}
	}
	fl, err := foreign.Named(name, l.PathKey, l.OrderKey, l.OffsetKey)
	if err != nil {
		return fl, err
	}
	if name == "langchain" && foreign.JSClient(recs) {
		fl.Unit = foreign.UTF16
	}
	if l.Unit != "" {
		u, ok := Units[l.Unit]
		if !ok {
			return fl, fmt.Errorf("--offset-unit %q: want codepoints, utf16 or bytes", l.Unit)
		}
		fl.Unit, fl.FixedUnit = u, true
	}
	fl.GroupsKeys = GroupsKeys(append([]string{l.GroupsKey}, more...)...)
	return fl, nil
}

// GroupsKeys are keys without the empty ones and repeats, in order.
func GroupsKeys(keys ...string) []string {
	var out []string
	for _, k := range keys {
		if k != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// Scanned is the tree of a collection without one, read from its records
// (at most limit of them), visible to groups. Records' access groups are
// read under l.GroupsKey and the moreGroupsKeys (package view passes the
// key an index was written with): a record is restricted by each, so a
// file is visible only where every record of it is under every key
// (foreign.Build). The result's Records is the count the scan read.
func Scanned(ctx context.Context, src Scanner, l Layout, limit int, groups []string, lim tree.Limits, moreGroupsKeys ...string) (Result, foreign.Report, error) {
	start := time.Now()
	n, err := src.Count(ctx)
	if err != nil {
		return Result{}, foreign.Report{}, err
	}
	if n == 0 {
		return Result{}, foreign.Report{}, fmt.Errorf("the collection is empty (%w): ingest a directory into it with chromafs-ingest", chroma.ErrNoTree)
	}
	if n > limit {
		return Result{}, foreign.Report{}, fmt.Errorf("%w: %d records (--scan-limit %d): run chromafs-ingest index once, then mounts load its tree in one request", ErrTooBig, n, limit)
	}
	recs, err := Records(ctx, src)
	if err != nil {
		return Result{}, foreign.Report{}, err
	}
	fl, err := Choose(l, recs, moreGroupsKeys...)
	if err != nil {
		return Result{}, foreign.Report{}, err
	}
	entries, rep := foreign.Build(recs, fl)
	raw, err := tree.Encode(entries)
	if err != nil {
		return Result{}, rep, err
	}
	fetched := time.Now()
	doc, err := tree.Decode(raw, lim)
	if err != nil {
		return Result{}, rep, err
	}
	t := tree.BuildVisible(doc, groups, lim)
	return Result{Tree: t, Warnings: doc.Warnings, Bytes: len(raw), Stamp: ScanStamp(n), Records: n,
		Fetch: fetched.Sub(start), Build: time.Since(fetched)}, rep, nil
}

// ScanStamp is the refresh stamp of a scanned tree: the record count, so
// that a poll notices records added or removed and scans again.
func ScanStamp(records int) string { return fmt.Sprintf("records:%d", records) }
