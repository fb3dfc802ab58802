package tree

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"
)

// ReportPath is where a tree shows its report of the files it serves
// whose bytes were reassembled from another tool's chunks and are not
// exact (package foreign marks them: Entry.Reassembly).
//
// The report is the view's, never the collection's: BuildVisible writes it
// from the entries it placed (the files the view shows, with their marks),
// so it names nothing the view may not see and counts nothing of what is
// hidden; a scanned collection, an index and every mount get it alike.
// The path is reserved: an entry stored there (a chromafs-ingest index
// before this report was per view wrote one public report of every file,
// hidden ones included) is never served.
const ReportPath = ".chromafs-reassembly.txt"

// reportHeader opens the report: comment lines, then one "mark<TAB>path"
// line per file.
const reportHeader = "# Files of this view whose bytes chromafs could not reassemble exactly\n" +
	"# (see chromafs docs/FORMAT.md, \"Collections written by other tools\")\n"

// reserved reports whether an entry of the document at slug, shown at p,
// takes the report's place (its path, a path below it, or its slug: the
// read engine names a page's loads by its slug).
func reserved(slug, p string) bool {
	return slug == ReportPath || p == ReportPath || strings.HasPrefix(p, ReportPath+"/")
}

// report is the text of the report of the placed files that carry a
// mark, or "" when none does.
func (pl *placement) report() string {
	type line struct{ path, mark string }
	var lines []line
	for p, f := range pl.files {
		if f.e.Reassembly != "" {
			lines = append(lines, line{p, f.e.Reassembly})
		}
	}
	if len(lines) == 0 {
		return ""
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i].path < lines[j].path })
	var sb strings.Builder
	sb.WriteString(reportHeader)
	for _, l := range lines {
		fmt.Fprintf(&sb, "%s\t%s\n", l.mark, l.path)
	}
	return sb.String()
}

// Inexact is the number of files the tree's report names: the files of
// this view that are not reassembled exactly (0 without a report).
func (t *Tree) Inexact() int {
	if t.Report == nil || len(t.Report.File.Records()) != 1 {
		return 0
	}
	return strings.Count(strings.TrimPrefix(t.Report.File.Records()[0].Text, reportHeader), "\n")
}

// addReport makes the report text the tree's unlisted Report, at
// ReportPath: a page of one literal part (no record holds it; the read
// engine serves the part's text), its digest its version. It is not one
// of the root's Children, and not counted in Files: a listing, a walk and
// a statfs show the docs only.
func (b *builder) addReport(text string) {
	size := int64(len(text))
	sum := sha256.Sum256([]byte(text))
	d := hex.EncodeToString(sum[:])
	file := &File{Slug: ReportPath, Chunks: []int64{size}, SHA256: d, Version: d}
	file.setElsewhere(Elsewhere{ChunkSHA256: []string{d}, Records: []Part{{Text: text, To: size}}})
	file.size.Store(size)
	b.t.Report = &Node{Name: ReportPath, Parent: b.t.Root, File: file}
}
