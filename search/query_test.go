package search

import (
	"errors"
	"syscall"
	"testing"
)

func TestParseName(t *testing.T) {
	for _, tc := range []struct {
		name string
		want Query
	}{
		{"rotate api keys", Query{"rotate api keys", DefaultK, Hybrid, false}},
		{"q?k=5", Query{"q", 5, Hybrid, false}},
		{"q?mode=lexical", Query{"q", DefaultK, Lexical, false}},
		{"q?k=5&mode=semantic", Query{"q", 5, Semantic, false}},
		{"q?mode=semantic&k=5", Query{"q", 5, Semantic, false}}, // any order
		{"q?mode=hybrid", Query{"q", DefaultK, Hybrid, false}},
		{"q?k=1", Query{"q", 1, Hybrid, false}},
		{"q?k=100", Query{"q", MaxK, Hybrid, false}},
		// A '?' that is part of the query.
		{"what is a token?", Query{"what is a token?", DefaultK, Hybrid, false}},
		{"a?b=c", Query{"a?b=c", DefaultK, Hybrid, false}},
		{"x?k=5&foo=1", Query{"x?k=5&foo=1", DefaultK, Hybrid, false}},
		{"x?k", Query{"x?k", DefaultK, Hybrid, false}},
		{"x?k=5&", Query{"x?k=5&", DefaultK, Hybrid, false}},
		{"q?k=5?", Query{"q?k=5?", DefaultK, Hybrid, false}}, // the last '?' has nothing after it
		// Only the last '?' starts options.
		{"a?b?k=3", Query{"a?b", 3, Hybrid, false}},
		{"is it? yes?mode=lexical", Query{"is it? yes", DefaultK, Lexical, false}},
		// A key given twice is not options: the whole name is the query.
		{"x?k=5&k=6", Query{"x?k=5&k=6", DefaultK, Hybrid, false}},
		{"x?mode=lexical&mode=semantic", Query{"x?mode=lexical&mode=semantic", DefaultK, Hybrid, false}},
		// The query is trimmed.
		{"  spaced out ?k=3", Query{"spaced out", 3, Hybrid, false}},
		{"ünïcödé ?mode=lexical", Query{"ünïcödé", DefaultK, Lexical, false}},
		// snippets=0: paths only (issue 33)
		{"q?snippets=0", Query{"q", DefaultK, Hybrid, true}},
		{"q?k=3&snippets=0&mode=lexical", Query{"q", 3, Lexical, true}},
		{"q?snippets=1", Query{"q", DefaultK, Hybrid, false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseName(tc.name)
			if err != nil {
				t.Fatalf("ParseName(%q): %v", tc.name, err)
			}
			if got != tc.want {
				t.Errorf("ParseName(%q) = %+v, want %+v", tc.name, got, tc.want)
			}
		})
	}
}

func TestParseNameInvalid(t *testing.T) {
	for _, name := range []string{
		"x?k=0", "x?k=101", "x?k=-1", "x?k=abc", "x?k=", "x?k=1.5", "x?k=99999999999999999999",
		"x?mode=fuzzy", "x?mode=", "x?mode=LEXICAL", "x?mode=similar", // similar is not a query option
		"x?k=5&mode=fuzzy", "x?mode=lexical&k=0",
		"x?snippets=2", "x?snippets=", "x?snippets=no",
		"", "   ", "?k=5", "  ?mode=lexical", "\t\n",
	} {
		t.Run(name, func(t *testing.T) {
			q, err := ParseName(name)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseName(%q) = %+v, %v; want ErrInvalid", name, q, err)
			}
			if !errors.Is(err, syscall.EINVAL) {
				t.Errorf("ParseName(%q): %v does not wrap EINVAL", name, err)
			}
			if q != (Query{}) {
				t.Errorf("ParseName(%q) returned %+v with its error", name, q)
			}
		})
	}
}

func TestParseOptions(t *testing.T) {
	for _, tc := range []struct {
		s       string
		k       int
		ok, bad bool
	}{
		{s: "k=7", k: 7, ok: true},
		{s: "k=1", k: 1, ok: true},
		{s: "k=100", k: 100, ok: true},
		{s: "", ok: false},          // "page?": the '?' is part of the name
		{s: "v=2", ok: false},       // not an option
		{s: "k=5&foo=1", ok: false}, // not all options
		{s: "k", ok: false},         // no value
		{s: "k=5&k=6", ok: false},   // a key twice
		{s: "k=0", ok: true, bad: true},
		{s: "k=101", ok: true, bad: true},
		{s: "k=abc", ok: true, bad: true},
		{s: "mode=lexical", ok: true, bad: true}, // .similar/ takes only k
		{s: "k=3&mode=semantic", ok: true, bad: true},
		{s: "mode=fuzzy", ok: true, bad: true},
		{s: "snippets=0", ok: true, bad: true},
	} {
		t.Run(tc.s, func(t *testing.T) {
			k, ok, err := ParseOptions(tc.s)
			if ok != tc.ok {
				t.Fatalf("ParseOptions(%q): ok = %v, want %v", tc.s, ok, tc.ok)
			}
			if tc.bad {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("ParseOptions(%q) = %d, %v; want ErrInvalid", tc.s, k, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseOptions(%q): %v", tc.s, err)
			}
			if ok && k != tc.k {
				t.Errorf("ParseOptions(%q) = %d, want %d", tc.s, k, tc.k)
			}
		})
	}
}

// A query's cache key tells apart every field that changes the hits
// (snippets change only the report).
func TestQueryKeyDistinct(t *testing.T) {
	qs := []Query{
		{"a", 10, Hybrid, false}, {"a", 10, Lexical, false}, {"a", 11, Hybrid, false}, {"b", 10, Hybrid, false},
		{"a\x0010", 1, Hybrid, false}, {"a", 10, Similar, false},
	}
	if (Query{"a", 10, Hybrid, true}).key() != qs[0].key() {
		t.Error("snippets=0 changes the cache key: the same hits would be searched twice")
	}
	seen := map[string]Query{}
	for _, q := range qs {
		if prev, dup := seen[q.key()]; dup {
			t.Errorf("%+v and %+v share the key %q", prev, q, q.key())
		}
		seen[q.key()] = q
	}
}
