package treeload

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/tree"
)

// docs returns its answers in turn, the last one forever.
type docs struct {
	answers []answer
	calls   int
}

type answer struct {
	doc string
	err error
}

func (d *docs) LoadTreeCached(context.Context, chroma.TreeCache) ([]byte, string, error) {
	a := d.answers[min(d.calls, len(d.answers)-1)]
	d.calls++
	return []byte(a.doc), "stamp-" + a.doc, a.err
}

const doc = `{"a":{"isPublic":true},"team/b":{"isPublic":false,"groups":["team"]},"bad":{"isPublic":true,"path":"../x"}}`

func TestLoadPrunesAndWarns(t *testing.T) {
	for _, tc := range []struct {
		groups []string
		files  int
	}{{nil, 1}, {[]string{"team"}, 2}} {
		res, err := Load(context.Background(), &docs{answers: []answer{{doc: doc}}}, nil, "c", tc.groups, tree.DefaultLimits)
		if err != nil {
			t.Fatal(err)
		}
		if res.Tree.Files != tc.files || res.Warnings.Count() != 1 || res.Bytes != len(doc) {
			t.Errorf("groups %v: %d files, %d warnings, %d bytes", tc.groups, res.Tree.Files, res.Warnings.Count(), res.Bytes)
		}
	}
}

func TestLoadWaitsOutBackPressure(t *testing.T) {
	src := &docs{answers: []answer{{err: chroma.ErrBusy}, {err: chroma.ErrBusy}, {doc: doc}}}
	if _, err := Load(context.Background(), src, nil, "c", nil, tree.DefaultLimits); err != nil || src.calls != 3 {
		t.Errorf("Load after two 429s: %v after %d calls", err, src.calls)
	}
	src = &docs{answers: []answer{{err: chroma.ErrServer}, {doc: doc}}}
	if _, err := Load(context.Background(), src, nil, "c", nil, tree.DefaultLimits); !errors.Is(err, chroma.ErrServer) || src.calls != 1 {
		t.Errorf("a failure was retried: %v after %d calls", err, src.calls)
	}
}

func TestLoadRefusesABadTree(t *testing.T) {
	_, err := Load(context.Background(), &docs{answers: []answer{{doc: "[1,2]"}}}, nil, "docs", nil, tree.DefaultLimits)
	if err == nil || !strings.Contains(err.Error(), `collection "docs"`) {
		t.Errorf("bad tree: %v", err)
	}
}
