// Package api is chromafsd's API: HTTP and JSON over the daemon's unix
// socket, for the chromafs client and for orchestrators that call it
// directly (curl --unix-socket /run/chromafs/chromafsd.sock ...). The
// daemon takes who is asking from the socket (the kernel's peer
// credentials), never from the request. docs/API.md describes every call.
//
//	POST /v1/attach   AttachRequest  -> Attachment
//	POST /v1/detach   DetachRequest  -> Attachment
//	GET  /v1/list                    -> Status
//	POST /v1/refresh  RefreshRequest -> RefreshResult
//	GET  /v1/health                  -> {"ok": true}
//
// Errors are a status code and an Error: 400 bad_request, 403 refused (the
// policy, or a path the user may not mount on), 404 not_found (no such
// collection, attachment or path), 409 in_use (the path is a mount point
// or not empty), 503 unavailable (Chroma cannot be reached), 500 internal.
//
// This package imports nothing of chroma-go: the client starts in a few
// milliseconds.
package api

import (
	"os"
	"path/filepath"
	"time"
)

// Layout is how a collection's records map to files (chromafs-mount's
// --layout, --path-key, --order-key, --offset-key, --offset-unit,
// --groups-key); empty fields take the daemon's defaults.
type Layout struct {
	Name       string `json:"name,omitempty"`
	PathKey    string `json:"path_key,omitempty"`
	OrderKey   string `json:"order_key,omitempty"`
	OffsetKey  string `json:"offset_key,omitempty"`
	OffsetUnit string `json:"offset_unit,omitempty"`
	GroupsKey  string `json:"groups_key,omitempty"`
}

// AttachRequest asks for a view of a collection at Path.
type AttachRequest struct {
	Collection string   `json:"collection"`
	Groups     []string `json:"groups,omitempty"` // access groups; none: public pages only
	// Private gives the attachment a FUSE mount of its own (its own page
	// cache, and an access log that sees every read).
	Private   bool   `json:"private,omitempty"`
	AccessLog string `json:"access_log,omitempty"` // a file the caller may write
	Path      string `json:"path"`                 // an absolute path: an empty directory the caller owns
	Layout    Layout `json:"layout,omitzero"`
	// Owner, root's to set, is the user the view is served to (its files
	// are theirs and only they may enter it): the user a container or a
	// sandbox runs as when that is not the caller. Default: the caller.
	Owner *Owner `json:"owner,omitempty"`
}

// Owner is a user and group.
type Owner struct {
	UID uint32 `json:"uid"`
	GID uint32 `json:"gid"`
}

// DetachRequest names an attachment by its id or its path.
type DetachRequest struct {
	ID   string `json:"id,omitempty"`
	Path string `json:"path,omitempty"`
}

// RefreshRequest asks the daemon to check collections for a new tree now
// ("" every collection).
type RefreshRequest struct {
	Collection string `json:"collection,omitempty"`
}

// RefreshResult says how many collections were checked.
type RefreshResult struct {
	Checked int `json:"checked"`
}

// Attachment is a view placed at a path for one conversation.
type Attachment struct {
	ID      string    `json:"id"`
	Path    string    `json:"path"`
	View    string    `json:"view"`
	UID     uint32    `json:"uid"`   // who attached it
	Owner   uint32    `json:"owner"` // who the view is served to
	Private bool      `json:"private,omitempty"`
	Created time.Time `json:"created"`
	// Waiting: restored from the state, not placed yet because Chroma
	// cannot be reached; tried again every few seconds (ENOTCONN meanwhile).
	Waiting bool `json:"waiting,omitempty"`
}

// View is one collection seen with one set of groups and a layout.
type View struct {
	ID          string   `json:"id"`
	Collection  string   `json:"collection"`
	Groups      []string `json:"groups"`
	Layout      Layout   `json:"layout,omitzero"`
	Attachments int      `json:"attachments"`
	// Lingering counts the view's mounts kept warm without an attachment
	// (chromafsd --linger); LingerUntil is when the last of them goes
	// unless attached again.
	Lingering   int        `json:"lingering"`
	LingerUntil *time.Time `json:"linger_until,omitempty"`
	Files       int        `json:"files"`
	Tree        string     `json:"tree"` // the tree version served
	Reads       int64      `json:"reads"`
	Bytes       int64      `json:"bytes"`
	Errors      int64      `json:"errors"`
	// Searches and SearchFailures count the view's searches (.search/,
	// .similar/); SearchIndexBytes is its lexical index's memory.
	Searches         int64 `json:"searches"`
	SearchFailures   int64 `json:"search_failures"`
	SearchIndexBytes int64 `json:"search_index_bytes"`
	// Inexact counts the files of the view that are not byte-exact (a
	// collection of another tool whose chunks could not be reassembled
	// exactly); its mounts list them in ReportPath, which no listing
	// shows (cat finds it).
	Inexact int `json:"inexact,omitempty"`
}

// ReportPath is the unlisted file at a view's root that lists the files
// counted in View.Inexact (tree.ReportPath).
const ReportPath = ".chromafs-reassembly.txt"

// Collection is a collection the daemon holds open.
type Collection struct {
	Name        string `json:"name"`
	Views       int    `json:"views"`
	PagesCached int64  `json:"pages_cached"` // chunks in the shared memory cache
	CacheBytes  int64  `json:"cache_bytes"`
	Requests    int64  `json:"requests"`      // to Chroma
	Polls       int64  `json:"polls"`         // checks of the tree's stamp (--refresh), one for all the views
	Fetched     int64  `json:"fetched_bytes"` // content bytes that came from Chroma (or lazy pointers' URIs)
	// MemoryBytes is what it holds besides its pages, counted against
	// the daemon's memory budget: its decoded tree, its views' trees,
	// mounts and search indexes (estimates); PageEvictions counts its chunks
	// evicted from memory (by the budget or --cache-size). Root's
	// answer only (0 in another user's: they count every view).
	MemoryBytes   int64 `json:"memory_bytes"`
	PageEvictions int64 `json:"page_evictions"`
}

// Memory is the daemon's memory budget (chromafsd --memory), what it
// holds, and the process's figures.
type Memory struct {
	Budget int64 `json:"budget"` // bytes: pages, trees, views and search indexes together
	Pages  int64 `json:"pages"`  // bytes of pages cached, every collection
	// Trees is what the collections hold besides pages (decoded trees,
	// views' trees, their mounts, search indexes; estimates)
	Trees int64 `json:"trees"`
	// Overhead is what the daemon's heap holds beyond pages, trees, what
	// it held serving nothing and a fixed 16 MiB, measured after garbage
	// collections and counted against the budget (chromafsd; 0 elsewhere)
	Overhead      int64 `json:"overhead"`
	PageEvictions int64 `json:"page_evictions"`
	// ViewEvictions counts idle views (lingering mounts) dropped for the
	// budget, Reloads those of them attached (and loaded) again since
	ViewEvictions int64 `json:"view_evictions"`
	Reloads       int64 `json:"reloads"`
	Limit         int64 `json:"limit"` // bytes: Go's soft limit (--memory-limit), above the budget
	Heap          int64 `json:"heap"`  // bytes in use
	RSS           int64 `json:"rss"`
}

// Status is everything chromafs list shows.
type Status struct {
	Collections []Collection `json:"collections"`
	Views       []View       `json:"views"`
	Attachments []Attachment `json:"attachments"`
	Memory      Memory       `json:"memory"`
	Threads     int          `json:"threads"`
	FDs         int          `json:"fds"`
}

// Error is the body of every answer that is not 2xx.
type Error struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// Error codes.
const (
	CodeBadRequest  = "bad_request"
	CodeRefused     = "refused"
	CodeNotFound    = "not_found"
	CodeInUse       = "in_use"
	CodeUnavailable = "unavailable"
	CodeInternal    = "internal"
)

// SocketEnv names the environment variable the client reads the socket
// path from.
const SocketEnv = "CHROMAFS_SOCKET"

// DefaultSocket is where chromafsd listens unless told otherwise:
// /run/chromafs/chromafsd.sock for root, else
// $XDG_RUNTIME_DIR/chromafs/chromafsd.sock ("" without XDG_RUNTIME_DIR).
func DefaultSocket() string {
	if os.Geteuid() == 0 {
		return "/run/chromafs/chromafsd.sock"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(d) {
		return filepath.Join(d, "chromafs", "chromafsd.sock")
	}
	return ""
}
