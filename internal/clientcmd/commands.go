package clientcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/internal/cli"
)

const attachUsage = `Usage: chromafs attach --collection NAME [--groups a,b] [--private] [--access-log FILE] [--owner UID[:GID]] PATH

Places a view of collection NAME, as the groups see it, at PATH: an empty
directory you own and may write, reached without a symbolic link (created
if missing). Prints the attachment's id once PATH answers.

Flags:
`

func attach(ctx context.Context, e *env, args []string) int {
	fs := cli.New("chromafs attach", attachUsage, e.stdout)
	var req api.AttachRequest
	var groups string
	fs.StringVar(&req.Collection, "collection", os.Getenv("CHROMAFS_COLLECTION"), "the collection (env CHROMAFS_COLLECTION)")
	fs.StringVar(&groups, "groups", "", "comma-separated access groups (default: none, public pages only); the policy must grant each")
	fs.BoolVar(&req.Private, "private", false, "a FUSE mount of its own: its own page cache, and an access log that sees every read")
	var owner string
	fs.StringVar(&owner, "owner", "", "UID[:GID] the view is served to (root only): the user a container or sandbox\nruns as, when not the caller; only they may enter it (default: the caller)")
	fs.StringVar(&req.AccessLog, "access-log", "", "append one JSON line per operation that reaches the daemon to FILE (a file you may write)")
	fs.StringVar(&req.Layout.Name, "layout", "", "how the collection maps to files (chromafs-mount --help); default: the daemon's")
	fs.StringVar(&req.Layout.PathKey, "path-key", "", "--layout custom: metadata key naming a record's file")
	fs.StringVar(&req.Layout.OrderKey, "order-key", "", "metadata key giving a chunk's position")
	fs.StringVar(&req.Layout.OffsetKey, "offset-key", "", "metadata key giving a chunk's start offset")
	fs.StringVar(&req.Layout.OffsetUnit, "offset-unit", "", "what --offset-key counts: codepoints, utf16 or bytes (default: detected)")
	fs.StringVar(&req.Layout.GroupsKey, "groups-key", "", "metadata key holding a record's access groups")
	if err := fs.Parse(args); err != nil {
		return e.usageError("attach", err)
	}
	if fs.NArg() != 1 {
		return e.usageError("attach", fmt.Errorf("want exactly one PATH, got %d arguments (see --help)", fs.NArg()))
	}
	if req.Collection == "" {
		return e.usageError("attach", errors.New("--collection: which collection?"))
	}
	g, err := cli.Groups(groups)
	if err != nil {
		return e.usageError("attach", fmt.Errorf("--groups: %w", err))
	}
	req.Groups = g
	if owner != "" {
		o, err := parseOwner(owner)
		if err != nil {
			return e.usageError("attach", fmt.Errorf("--owner: %w", err))
		}
		req.Owner = &o
	}
	if req.Path, err = filepath.Abs(fs.Arg(0)); err != nil {
		return e.usageError("attach", err)
	}
	if req.AccessLog != "" {
		if req.AccessLog, err = filepath.Abs(req.AccessLog); err != nil {
			return e.usageError("attach", err)
		}
	}
	if err := os.MkdirAll(req.Path, 0o755); err != nil { // as the caller: the daemon checks it is the caller's
		return e.fail("attach", err)
	}
	a, err := e.client.Attach(ctx, req)
	if err != nil {
		return e.fail("attach", err)
	}
	if err := answers(ctx, a.Path); err != nil {
		return e.fail("attach", err)
	}
	fmt.Fprintln(e.stdout, a.ID)
	return 0
}

// parseOwner reads UID[:GID] (GID defaults to UID).
func parseOwner(s string) (api.Owner, error) {
	u, g, hasG := strings.Cut(s, ":")
	uid, err := strconv.ParseUint(u, 10, 32)
	if err != nil {
		return api.Owner{}, fmt.Errorf("%q: want UID or UID:GID, numbers", s)
	}
	gid := uid
	if hasG {
		if gid, err = strconv.ParseUint(g, 10, 32); err != nil {
			return api.Owner{}, fmt.Errorf("%q: want UID or UID:GID, numbers", s)
		}
	}
	return api.Owner{UID: uint32(uid), GID: uint32(gid)}, nil
}

// answers waits until path is the root of a mount that answers (the
// daemon returns once it is; this checks what the caller sees): a stat
// of its root, answered by the mount, on another device than its parent
// (a listing of the bare directory attach made would pass without one;
// and a stat asks the daemon for the root alone, where a listing looks up
// every name in it).
func answers(ctx context.Context, path string) error {
	for {
		err := mountRoot(path)
		if err == nil {
			return nil
		} else if ctx.Err() != nil {
			return fmt.Errorf("%s does not answer: %w", path, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// mountRoot checks that path is the root of a mount that answers a stat.
func mountRoot(path string) error {
	var st, parent syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if err := syscall.Stat(filepath.Dir(path), &parent); err != nil {
		return &os.PathError{Op: "stat", Path: filepath.Dir(path), Err: err}
	}
	if st.Dev == parent.Dev {
		return errors.New("no mount there")
	}
	return nil
}

func detach(ctx context.Context, e *env, args []string) int {
	fs := cli.New("chromafs detach", "Usage: chromafs detach PATH|ID\n\nTakes an attachment away (by its path, or the id attach printed).\n\nFlags:\n", e.stdout)
	if err := fs.Parse(args); err != nil {
		return e.usageError("detach", err)
	}
	if fs.NArg() != 1 {
		return e.usageError("detach", fmt.Errorf("want one PATH or ID, got %d arguments", fs.NArg()))
	}
	var req api.DetachRequest
	if arg := fs.Arg(0); strings.ContainsRune(arg, '/') || arg == "." || arg == ".." {
		abs, err := filepath.Abs(arg)
		if err != nil {
			return e.usageError("detach", err)
		}
		req.Path = abs
	} else if _, err := os.Lstat(arg); err == nil {
		req.Path, _ = filepath.Abs(arg)
	} else {
		req.ID = arg
	}
	if _, err := e.client.Detach(ctx, req); err != nil {
		return e.fail("detach", err)
	}
	return 0
}

func list(ctx context.Context, e *env, args []string) int {
	fs := cli.New("chromafs list", "Usage: chromafs list [--json]\n\nCollections, views and attachments the daemon serves.\n\nFlags:\n", e.stdout)
	asJSON := fs.Bool("json", false, "print the daemon's answer as JSON (docs/API.md)")
	if err := fs.Parse(args); err != nil {
		return e.usageError("list", err)
	}
	st, err := e.client.List(ctx)
	if err != nil {
		return e.fail("list", err)
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(st)
		return 0
	}
	printStatus(e, st)
	return 0
}

func printStatus(e *env, st api.Status) {
	w := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	limit := "no --memory-limit"
	if st.Memory.Limit > 0 && st.Memory.Limit < math.MaxInt64 {
		limit = "a limit of " + mib(st.Memory.Limit)
	}
	m := st.Memory
	if m.Budget > 0 { // root's list: the host's budget
		fmt.Fprintf(w, "memory budget %s (--memory): pages %s, trees, indexes and mounts %s, the heap beyond them %s; evicted %d chunks, %d idle views (%d loaded again)\n",
			mib(m.Budget), mib(m.Pages), mib(m.Trees), mib(m.Overhead), m.PageEvictions, m.ViewEvictions, m.Reloads)
	}
	fmt.Fprintf(w, "process: %s in use, %s (rss %s); %d threads, %d fds\n\n", mib(m.Heap), limit, mib(m.RSS), st.Threads, st.FDs)
	fmt.Fprintln(w, "COLLECTION\tVIEWS\tPAGES CACHED\tCACHE\tTREES\tEVICTED\tREQUESTS\tFETCHED")
	for _, c := range st.Collections {
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%d\t%d\t%s\n", c.Name, c.Views, c.PagesCached, mib(c.CacheBytes), mib(c.MemoryBytes), c.PageEvictions, c.Requests, mib(c.Fetched))
	}
	fmt.Fprintln(w, "\nVIEW\tCOLLECTION\tGROUPS\tFILES\tATTACHMENTS\tLINGERING\tREADS\tBYTES\tERRORS")
	for _, v := range st.Views {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\t%d\t%d\t%d\n", v.ID, v.Collection, groupsOf(v.Groups), v.Files, v.Attachments, lingering(v), v.Reads, v.Bytes, v.Errors)
	}
	for _, v := range st.Views {
		if v.Inexact > 0 {
			fmt.Fprintf(w, "view %s: not byte-exact (reassembled from another tool's chunks): %d of its files, named in %s at its mounts' root (unlisted: cat finds it, ls does not show it)\n",
				v.ID, v.Inexact, api.ReportPath)
		}
	}
	fmt.Fprintln(w, "\nATTACHMENT\tVIEW\tUID\tOWNER\tPRIVATE\tPATH")
	for _, a := range st.Attachments {
		view := a.View
		if a.Waiting {
			view = "(waiting for Chroma)"
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%v\t%s\n", a.ID, view, a.UID, a.Owner, a.Private, a.Path)
	}
	w.Flush()
}

// lingering says how many of v's mounts are kept warm without an
// attachment, and until when: "-" when none is.
func lingering(v api.View) string {
	if v.Lingering == 0 || v.LingerUntil == nil {
		return "-"
	}
	return fmt.Sprintf("%d until %s", v.Lingering, v.LingerUntil.Local().Format(time.TimeOnly))
}

func groupsOf(g []string) string {
	if len(g) == 0 {
		return "(public)"
	}
	return strings.Join(g, ",")
}

func mib(n int64) string { return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20)) }

func refresh(ctx context.Context, e *env, args []string) int {
	fs := cli.New("chromafs refresh", "Usage: chromafs refresh [COLLECTION]\n\nAsks the daemon to check the collection (default: every one) for a new tree now.\n\nFlags:\n", e.stdout)
	if err := fs.Parse(args); err != nil {
		return e.usageError("refresh", err)
	}
	if fs.NArg() > 1 {
		return e.usageError("refresh", fmt.Errorf("want at most one COLLECTION, got %d", fs.NArg()))
	}
	r, err := e.client.Refresh(ctx, api.RefreshRequest{Collection: fs.Arg(0)})
	if err != nil {
		return e.fail("refresh", err)
	}
	fmt.Fprintf(e.stdout, "checked %d collection(s)\n", r.Checked)
	return 0
}
