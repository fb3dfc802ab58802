package tree

import (
	"strings"
	"testing"
)

// reportText is the text of t's report of inexact files, "" without one.
func reportText(t *testing.T, tr *Tree) string {
	t.Helper()
	n := tr.Lookup(ReportPath)
	if n == nil {
		return ""
	}
	if n.File == nil || len(n.File.Records()) != 1 || n.File.Records()[0].ID != "" {
		t.Fatalf("the report is not a page of one literal part: %+v", n)
	}
	text := n.File.Records()[0].Text
	if size, ok := n.File.Size(); !ok || size != int64(len(text)) || len(n.File.Chunks) != 1 || n.File.Chunks[0] != size {
		t.Fatalf("the report's size %d (known %v), chunks %v, for %d bytes", size, ok, n.File.Chunks, len(text))
	}
	return text
}

// TestReportPerView: the list of files that are not reassembled exactly
// is written per view from the files it shows (issue 28, finding 4): a
// view's report names no file it may not see; a view that shows no
// inexact file has none; an entry stored at the report's path (what an
// older chromafs-ingest index wrote: one public list of every file, the
// hidden ones too) is never served; the report survives a snapshot. It
// is unlisted (issue 33): a lookup by name finds it, a listing, a walk
// and the file count do not.
func TestReportPerView(t *testing.T) {
	doc := `{
		"a": {"isPublic": true, "path": "docs/a.md", "reassembly": "gaps"},
		"b": {"isPublic": true, "path": "docs/b.md"},
		"secret": {"isPublic": false, "groups": ["admin"], "path": "admin/secret-plan.md", "reassembly": "conflict"},
		"billing": {"isPublic": false, "groups": ["billing"], "path": "billing/invoices.md", "reassembly": "edges"},
		".chromafs-reassembly.txt": {"isPublic": true, "groups": [], "path": ".chromafs-reassembly.txt", "size": 31,
			"records": [{"text": "conflict\tadmin/secret-plan.md\n"}], "chunk_sha256": ["` + strings.Repeat("0", 64) + `"]},
		"elsewhere": {"isPublic": true, "path": ".chromafs-reassembly.txt/x.md"}
	}`
	for _, tc := range []struct {
		groups    []string
		want, not []string
	}{
		{nil, []string{"gaps\tdocs/a.md\n"}, []string{"secret", "billing", "docs/b.md"}},
		{[]string{"billing"}, []string{"edges\tbilling/invoices.md\n", "gaps\tdocs/a.md\n"}, []string{"secret"}},
		{[]string{"admin"}, []string{"conflict\tadmin/secret-plan.md\n", "gaps\tdocs/a.md\n"}, []string{"billing"}},
	} {
		tr, d := mustBuild(t, doc, tc.groups...)
		r := reportText(t, tr)
		unlisted(t, tr)
		if !strings.HasPrefix(r, reportHeader) {
			t.Errorf("view %v: the report does not open with its header:\n%s", tc.groups, r)
		}
		for _, w := range tc.want {
			if !strings.Contains(r, w) {
				t.Errorf("view %v: the report lacks %q:\n%s", tc.groups, w, r)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(r, n) {
				t.Errorf("view %v: the report names %q:\n%s", tc.groups, n, r)
			}
		}
		if tr.Lookup(".chromafs-reassembly.txt/x.md") != nil || !strings.Contains(strings.Join(d.Warnings.List, "\n"), "the view's own report") {
			t.Errorf("view %v: an entry at the report's place was placed, or not warned of: %q", tc.groups, d.Warnings.List)
		}
		snap, err := FromSnapshot(tr.Snapshot())
		if err != nil {
			t.Fatal(err)
		}
		sameTree(t, tr, snap)
		if reportText(t, snap) != r || snap.Report.Ino != tr.Report.Ino || snap.Report.Parent != snap.Root {
			t.Errorf("view %v: the report changed through a snapshot", tc.groups)
		}
		unlisted(t, snap)
	}
	// lines sorted by path, one per inexact file
	tr, _ := mustBuild(t, doc, "admin", "billing")
	if got, want := strings.TrimPrefix(reportText(t, tr), reportHeader), "conflict\tadmin/secret-plan.md\nedges\tbilling/invoices.md\ngaps\tdocs/a.md\n"; got != want {
		t.Errorf("report lines %q, want %q", got, want)
	}
	if tr.Inexact() != 3 {
		t.Errorf("Inexact() = %d, want 3", tr.Inexact())
	}
	// nothing inexact shown: no report, whatever is stored there
	tr, _ = mustBuild(t, `{"b": {"isPublic": true, "path": "b.md"}, "s": {"isPublic": false, "groups": ["admin"], "path": "s.md", "reassembly": "gaps"},
		".chromafs-reassembly.txt": {"isPublic": true, "path": ".chromafs-reassembly.txt", "size": 0}}`)
	if tr.Lookup(ReportPath) != nil || tr.Files != 1 || tr.Inexact() != 0 {
		t.Errorf("a view that shows no inexact file has a report (%d files)", tr.Files)
	}
}

// unlisted fails unless tr's report is found by name only: not among the
// root's children, not walked, not counted as a file, with an inode of
// its own.
func unlisted(t *testing.T, tr *Tree) {
	t.Helper()
	if tr.Report == nil || tr.Lookup(ReportPath) != tr.Report || tr.RootChild(ReportPath) != tr.Report || tr.Root.Child(ReportPath) != nil {
		t.Fatalf("the report is not found by name alone: %+v", tr.Report)
	}
	files := 0
	Walk(tr.Root, func(n *Node) bool {
		if n == tr.Report || n.Name == ReportPath {
			t.Errorf("a walk visits the report")
		}
		if n.File != nil {
			files++
		}
		if n.Ino == tr.Report.Ino {
			t.Errorf("the report's inode %d is also %q's", n.Ino, n.Path())
		}
		return true
	})
	if files != tr.Files {
		t.Errorf("%d files walked, the tree counts %d", files, tr.Files)
	}
}

// TestOldSnapshotRefused: a snapshot of a format before the report was
// per view and unlisted is not used (a v3 may hold a stored report of
// every file; a v4 lists the report).
func TestOldSnapshotRefused(t *testing.T) {
	tr, _ := mustBuild(t, `{"a": {"isPublic": true}}`)
	snap := tr.Snapshot()
	for _, v := range []string{"v3", "v4"} {
		old := append([]byte("chromafs-tree-snapshot-"+v+"\n"), snap[len(snapshotMagic):]...)
		if _, err := FromSnapshot(old); err == nil {
			t.Fatalf("a %s snapshot was used", v)
		}
	}
}
