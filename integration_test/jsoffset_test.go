package integration_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromafs/chromafs/internal/corpus"
)

// TestJSOffsetCollection (issue 21, point 4): a collection written by a
// hand-made loader on the official chromadb JavaScript client (fixed
// 800-character chunks cut by JavaScript string slicing, metadata source,
// chunk and offset: JavaScript string offsets, UTF-16 units) mounts
// byte-exact with --layout custom and no --offset-unit: the unit is
// detected from the chunks, and the mount's log and index's summary say
// which. --offset-unit codepoints still overrides: the files with
// characters outside the BMP then come out wrong, and are reported.
func TestJSOffsetCollection(t *testing.T) {
	requireFUSE(t)
	modules := jsClients(t, "langchain") // holds the chromadb client too
	parent := t.TempDir()
	src := filepath.Join(parent, "src")
	_, err := corpus.Generate(src, corpus.Spec{Files: 30, PerDir: 6, Seed: 25, MaxSize: 5000})
	must(t, err)
	writeSource(t, src, map[string]string{
		"plain/ascii.md": "# ASCII only\n\n" + strings.Repeat("Plain text, counted alike in every unit.\n", 60),
		"plain/bmp.md":   "# Grüße\n\n" + strings.Repeat("Grüße aus Köln, 日本語のテキスト — “quoted”.\n", 50),
		"astral/math.md": "# 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 🚀\n\n" + strings.Repeat("𝔄 line of 𝔣𝔯𝔞𝔨𝔱𝔲𝔯 and emoji 😀🎉, then plain words.\n", 60),
	})
	// as in most docs, a few files have characters outside the BMP (emoji)
	outside := func(r rune) bool { return r > 0xFFFF }
	astral := map[string]bool{}
	i := 0
	eachFile(t, src, src, func(rel string, b, _ []byte) {
		if i++; i%5 != 0 && rel != "astral/math.md" {
			b = []byte(strings.Map(func(r rune) rune {
				if outside(r) {
					return '★'
				}
				return r
			}, string(b)))
			must(t, os.WriteFile(filepath.Join(src, rel), b, 0o644))
		}
		astral[rel] = strings.ContainsFunc(string(b), outside)
	})
	if n := countTrue(astral); n < 3 || n == len(astral) {
		t.Fatalf("%d of %d files have characters outside the BMP: the corpus must have some of both", n, len(astral))
	}
	name := collectionName(t)
	runClient(t, "js-offset-loader.cjs", modules, name, src)
	layout := []string{"--layout", "custom", "--path-key", "source", "--order-key", "chunk", "--offset-key", "offset"}
	mountArgs := append([]string{"--refresh", "0", "--prefetch", "none"}, layout...)

	mnt := mountDir(t, subdir(t, parent, "detected"))
	m := startMount(t, name, mnt, mountArgs...)
	eachFile(t, mnt, src, func(rel string, got, want []byte) {
		if !bytes.Equal(got, want) {
			t.Errorf("%s (outside the BMP: %v): not byte-exact (%d vs %d bytes): %s", rel, astral[rel], len(got), len(want), firstDiff(string(got), string(want)))
		}
	})
	sameFiles(t, mnt, src) // no report either: every file is exact
	if report, err := os.ReadFile(filepath.Join(mnt, ".chromafs-reassembly.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a report of files not exact (%v):\n%s", err, report)
	}
	if logs := m.logs.String(); !strings.Contains(logs, `offsets="utf16 (detected:`) {
		t.Errorf("the mount's log does not say the offsets were detected as utf16:\n%s", logs)
	}
	m.stop(t)

	out, errOut, code := ingestCmd(t, nil, append([]string{"index", "--dry-run", "--chroma-url", env.url, "--collection", name}, layout...)...)
	if code != 0 || !strings.Contains(out, "offsets in utf16 (detected:") || !strings.Contains(out, "all exact") {
		t.Errorf("index --dry-run: exit %d, want the detected unit and all exact: %s%s", code, out, errOut)
	}

	forced := mountDir(t, subdir(t, parent, "codepoints"))
	fm := startMount(t, name, forced, append(mountArgs, "--offset-unit", "codepoints")...)
	report, err := os.ReadFile(filepath.Join(forced, ".chromafs-reassembly.txt"))
	must(t, err)
	wrong := 0
	eachFile(t, forced, src, func(rel string, got, want []byte) {
		exact, reported := bytes.Equal(got, want), strings.Contains(string(report), "\t"+rel+"\n")
		switch {
		case !exact && !reported:
			t.Errorf("%s: not byte-exact with --offset-unit codepoints, and not reported", rel)
		case reported && !astral[rel]:
			t.Errorf("%s: reported, but has no character outside the BMP (code points and UTF-16 units count it alike)", rel)
		}
		if !exact {
			wrong++
		}
	})
	sameFiles(t, forced, src)
	t.Logf("%d files, %d with characters outside the BMP; with --offset-unit codepoints %d differ from their source", len(astral), countTrue(astral), wrong)
	if wrong < 3 {
		t.Errorf("--offset-unit codepoints did not override the detection: %d files differ from their source:\n%s", wrong, report)
	}
	if logs := fm.logs.String(); !strings.Contains(logs, `offsets="codepoints (--offset-unit)"`) {
		t.Errorf("the mount's log does not say the offsets were read as --offset-unit said:\n%s", logs)
	}
}

// countTrue is the number of true values in m.
func countTrue(m map[string]bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}
