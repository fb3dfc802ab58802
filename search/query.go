package search

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
)

// Mode is how a search ranks pages.
type Mode string

// The modes.
const (
	Hybrid   Mode = "hybrid"
	Semantic Mode = "semantic"
	Lexical  Mode = "lexical"
	// Similar ranks pages like a given one (.similar/); not a query option.
	Similar Mode = "similar"
)

// Errors a search answers with besides a failure (which is EIO): they
// wrap the errno the file system gives for them.
var (
	// ErrInvalid: a query that cannot be run (an empty one, a known
	// option with a bad value).
	ErrInvalid = fmt.Errorf("invalid search: %w", syscall.EINVAL)
	// ErrUnsupported: a mode the collection cannot give (semantic without
	// a usable embedding function).
	ErrUnsupported = fmt.Errorf("search mode not available: %w", syscall.EOPNOTSUPP)
)

// Query limits.
const (
	DefaultK = 10
	MaxK     = 100
	// MaxQuery bounds a query's bytes (a directory name is at most 255).
	MaxQuery = 255
)

// Query is a parsed .search/ directory name.
type Query struct {
	Text string
	K    int
	Mode Mode
	// NoSnippets (snippets=0) leaves the matching lines out of .results:
	// ranks, scores and paths only.
	NoSnippets bool
}

// key names q in a cache (with the tree version). Snippets are not in
// it: they change the report, not the hits.
func (q Query) key() string { return fmt.Sprintf("%s\x00%d\x00%s", q.Mode, q.K, q.Text) }

// ParseName parses a .search/ directory name: the query, then, after its
// last '?', options joined by '&': k=N (1 to MaxK), mode=hybrid,
// semantic or lexical, and snippets=0 or 1. A '?' followed by anything but known options is
// part of the query ("what is a token?"); a known option with a bad value
// is ErrInvalid, as is an empty query.
func ParseName(name string) (Query, error) {
	q := Query{Text: name, K: DefaultK, Mode: Hybrid}
	if i := strings.LastIndexByte(name, '?'); i >= 0 {
		if opts, ok := splitOptions(name[i+1:]); ok {
			q.Text = name[:i]
			if err := q.apply(opts); err != nil {
				return Query{}, err
			}
		}
	}
	q.Text = strings.TrimSpace(q.Text)
	if q.Text == "" {
		return Query{}, fmt.Errorf("%w: empty query", ErrInvalid)
	}
	if len(q.Text) > MaxQuery {
		return Query{}, fmt.Errorf("%w: a query of %d bytes (at most %d)", ErrInvalid, len(q.Text), MaxQuery)
	}
	return q, nil
}

// ParseOptions parses what follows the last '?' of a .similar/ page
// name: only k. ok is false when s is not options (the '?' is part of
// the page's name).
func ParseOptions(s string) (k int, ok bool, err error) {
	opts, ok := splitOptions(s)
	if !ok {
		return 0, false, nil
	}
	q := Query{K: DefaultK, Mode: Similar}
	for key := range opts {
		if key != "k" {
			return 0, true, fmt.Errorf("%w: .similar/ takes only k", ErrInvalid)
		}
	}
	err = q.apply(opts)
	return q.K, true, err
}

// splitOptions splits "k=5&mode=lexical"; ok only when every part is a
// known key with a value.
func splitOptions(s string) (map[string]string, bool) {
	if s == "" {
		return nil, false
	}
	opts := map[string]string{}
	for _, part := range strings.Split(s, "&") {
		key, val, found := strings.Cut(part, "=")
		if !found || (key != "k" && key != "mode" && key != "snippets") {
			return nil, false
		}
		if _, dup := opts[key]; dup {
			return nil, false
		}
		opts[key] = val
	}
	return opts, true
}

func (q *Query) apply(opts map[string]string) error {
	if v, ok := opts["k"]; ok {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 || k > MaxK {
			return fmt.Errorf("%w: k=%q: want a whole number from 1 to %d", ErrInvalid, v, MaxK)
		}
		q.K = k
	}
	if v, ok := opts["snippets"]; ok {
		switch v {
		case "0":
			q.NoSnippets = true
		case "1":
			q.NoSnippets = false
		default:
			return fmt.Errorf("%w: snippets=%q: want 0 or 1", ErrInvalid, v)
		}
	}
	if v, ok := opts["mode"]; ok {
		switch Mode(v) {
		case Hybrid, Semantic, Lexical:
			q.Mode = Mode(v)
		default:
			return fmt.Errorf("%w: mode=%q: want hybrid, semantic or lexical", ErrInvalid, v)
		}
	}
	return nil
}
