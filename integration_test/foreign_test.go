package integration_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/corpus"
)

// jsClients installs (once) and returns the node_modules of the
// third-party JavaScript clients; it skips loudly without node, except
// under CI=true.
func jsClients(t *testing.T, which string) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(repoRoot(), "scripts", "js-clients.sh"), which).Output()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("scripts/js-clients.sh %s: %v", which, err)
		}
		t.Skipf("SKIPPED: scripts/js-clients.sh %s: %v", which, err)
	}
	return strings.TrimSpace(string(out))
}

// normalize is what survives LangChain's splitter for sure: it strips
// white space at the edges of every chunk, so white space at line ends and
// blank lines at the end of a file are unknowable.
var trailingSpace = regexp.MustCompile(`[ \t\r]+\n`)

func normalize(b []byte) string {
	s := trailingSpace.ReplaceAllString(string(b), "\n")
	return strings.TrimRight(s, " \t\r\n")
}

// TestLangChainJSCollection: a collection written by LangChain.js itself
// (RecursiveCharacterTextSplitter, overlapping chunks, the Chroma vector
// store) is indexed without touching a record and mounts in two requests;
// every file is there, equal to its source up to the white space the
// splitter strips, and marked as not exact in the report (so nobody takes
// it for byte-exact); grep -r finds what grep finds in the source.
func TestLangChainJSCollection(t *testing.T) {
	requireFUSE(t)
	modules := jsClients(t, "langchain")
	parent := t.TempDir()
	src := filepath.Join(parent, "src")
	_, err := corpus.Generate(src, corpus.Spec{Files: 30, PerDir: 6, Seed: 21, MaxSize: 3000})
	must(t, err)
	writeSource(t, src, map[string]string{"intl/ünïcödé.md": "# Ünïcödé 🚀\n\n" + strings.Repeat("Grüße aus Köln, 日本語のテキスト. ", 40) + "\n"})
	name := collectionName(t)
	writer := exec.Command("node", filepath.Join(repoRoot(), "integration_test", "testdata", "langchain-writer.cjs"), modules, env.url, name, src)
	if out, err := writer.CombinedOutput(); err != nil {
		t.Fatalf("LangChain.js writer: %v\n%s", err, out)
	}
	scannedView := scannedMount(t, parent, src, name, modules)
	st := openStore(t, name)
	before, err := st.IDs(t.Context())
	must(t, err)
	out, errOut, code := ingestCmd(t, nil, "index", "--chroma-url", env.url, "--collection", name)
	if code != 0 || !strings.Contains(out, "layout langchain") || !strings.Contains(out, "no existing record changed") {
		t.Fatalf("index: exit %d: %s%s", code, out, errOut)
	}
	after, err := st.IDs(t.Context())
	must(t, err)
	had := map[string]bool{}
	for _, id := range before {
		had[id] = true
	}
	for _, id := range after {
		if !had[id] && !strings.HasPrefix(id, "__path_tree__") {
			t.Errorf("index added record %q, not a tree record", id)
		}
	}
	if len(after) <= len(before) {
		t.Errorf("index wrote no tree (%d records before, %d after)", len(before), len(after))
	}
	mnt := mountDir(t, parent)
	m := startMount(t, name, mnt, "--refresh", "0", "--prefetch", "none")
	if n := m.metric(t, "chromafs_chroma_requests_total"); n > 3 {
		t.Errorf("mount-ready took %d requests to Chroma; want at most 3 (open the collection, the tree header, its parts), whatever the records", n)
	}
	report, err := os.ReadFile(filepath.Join(mnt, ".chromafs-reassembly.txt"))
	must(t, err)
	files, _ := sh(t, src, "find . -type f | sort", false)
	for _, rel := range strings.Fields(files) {
		rel = strings.TrimPrefix(rel, "./")
		want, err := os.ReadFile(filepath.Join(src, rel))
		must(t, err)
		got, err := os.ReadFile(filepath.Join(mnt, rel))
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		ambiguous := strings.Contains(string(report), "ambiguous\t"+rel+"\n") // repeated text: reported, may differ
		if normalize(got) != normalize(want) && !ambiguous {
			t.Errorf("%s: differs from its source beyond stripped white space (%d vs %d bytes): %s", rel, len(got), len(want), firstDiff(normalize(got), normalize(want)))
		}
		if !bytes.Equal(got, want) && !strings.Contains(string(report), "\t"+rel+"\n") {
			t.Errorf("%s: not byte-exact, and the report does not say so:\n%s", rel, report)
		}
	}
	if !strings.Contains(string(report), "ambiguous\tintl/ünïcödé.md\n") {
		t.Errorf("the file of one repeated phrase (its seams cannot be known) is not reported ambiguous:\n%s", report)
	}
	if n := strings.Count(string(report), "ambiguous\t"); n > 3 {
		t.Errorf("%d files reported ambiguous; only repeated text should be:\n%s", n, report)
	}
	grep := "grep -rlw -e chromafs -e Köln . | grep -v chromafs-reassembly | sort"
	sameOutput(t, mnt, src, grep)
	if !strings.Contains(m.logs.String(), "reassembled") && !strings.Contains(m.logs.String(), ".chromafs-reassembly.txt") {
		t.Errorf("no mount-time warning about files that are not exact:\n%s", m.logs)
	}
	indexedView, _ := sh(t, mnt, viewCmd, false)
	if indexedView != scannedView {
		t.Errorf("the indexed mount and the scanned one differ: %s", firstDiff(indexedView, scannedView))
	}
}

// viewCmd prints every file of a mount with its digest.
const viewCmd = "find . -type f -print0 | sort -z | xargs -0 md5sum"

// scannedMount mounts a collection that has no path tree (it is scanned
// at mount time), returns its view, and checks that the refresh poll
// notices records LangChain.js adds to the collection.
func scannedMount(t *testing.T, parent, src, name, modules string) string {
	t.Helper()
	mnt := mountDir(t, subdir(t, parent, "scanned"))
	m := startMount(t, name, mnt, "--refresh", "200ms", "--prefetch", "none")
	if _, code := sh(t, mnt, viewCmd, false); code != 0 || !strings.Contains(m.logs.String(), "scanned the collection's records") {
		t.Fatalf("scanned mount: exit %d\n%s", code, m.logs)
	}
	// a page added to the source later, and written by LangChain.js alone
	more := filepath.Join(src, "late")
	writeSource(t, more, map[string]string{"added.md": "# Added later\n\nA page written after the mount.\n"})
	writer := exec.Command("node", filepath.Join(repoRoot(), "integration_test", "testdata", "langchain-writer.cjs"), modules, env.url, name, more)
	if out, err := writer.CombinedOutput(); err != nil {
		t.Fatalf("LangChain.js writer: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if b, err := os.ReadFile(filepath.Join(mnt, "late/added.md")); err == nil && strings.Contains(string(b), "Added later") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("records added to the collection never showed on the scanned mount:\n%s", m.logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	view, _ := sh(t, mnt, viewCmd, false)
	m.stop(t)
	return view
}

// TestPlainLoaderCollection: a hand-written loader (the chromadb JS client,
// a path and a code-point offset per chunk, random ids, groups in the
// metadata) is byte-exact on the mount, scanned at mount time and indexed
// alike: diff -r equals the source, nothing is reported inexact, and the
// groups key hides what a mount may not see.
func TestPlainLoaderCollection(t *testing.T) {
	requireFUSE(t)
	modules := jsClients(t, "langchain") // holds the chromadb client too
	parent := t.TempDir()
	src := filepath.Join(parent, "src")
	_, err := corpus.Generate(src, corpus.Spec{Files: 25, PerDir: 5, Seed: 22, MaxSize: 4000, Edge: true})
	must(t, err)
	writeSource(t, src, map[string]string{"internal/secret.md": "the team's secret\n"})
	name := collectionName(t)
	loader := exec.Command("node", filepath.Join(repoRoot(), "integration_test", "testdata", "plain-loader.cjs"), modules, env.url, name, src)
	if out, err := loader.CombinedOutput(); err != nil {
		t.Fatalf("plain loader: %v\n%s", err, out)
	}
	layout := []string{"--layout", "custom", "--path-key", "path", "--offset-key", "offset", "--groups-key", "groups"}
	// an empty file has no chunk, so no record names it: no layout of
	// chunks can show it (the one thing this layout cannot keep)
	empties, _ := sh(t, src, "find . -type f -empty -printf ' -x %f'", false)
	if !strings.Contains(empties, "empty.md") {
		t.Fatalf("the corpus has no empty file to exclude: %q", empties)
	}
	check := func(what string) {
		t.Helper()
		team := mountDir(t, subdir(t, parent, what+"-team"))
		startMount(t, name, team, append([]string{"--groups", "team", "--prefetch", "none"}, layout...)...)
		if out, code := sh(t, parent, "diff -r"+empties+" "+what+"-team/mnt src", true); code != 0 || out != "" {
			t.Errorf("%s: diff -r: exit %d: %.1500s", what, code, out)
		}
		public := mountDir(t, subdir(t, parent, what+"-public"))
		startMount(t, name, public, append([]string{"--prefetch", "none"}, layout...)...)
		hiddenIsAbsent(t, public, "internal/secret.md")
		hiddenIsAbsent(t, public, "internal")
	}
	check("scanned")
	if out, errOut, code := ingestCmd(t, nil, append([]string{"index", "--chroma-url", env.url, "--collection", name}, layout...)...); code != 0 || !strings.Contains(out, "all exact") {
		t.Fatalf("index: exit %d: %s%s", code, out, errOut)
	}
	check("indexed")
}
