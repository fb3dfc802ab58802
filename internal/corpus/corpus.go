// Package corpus generates deterministic documentation-like directory trees
// for tests and benchmarks: nested sections, Markdown and MDX pages with
// headings and paragraphs, and the awkward cases a file system must carry
// exactly (empty files, CRLF line ends, no final newline, a byte-order mark,
// Unicode and spaces in names and content, large files).
package corpus

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

// Spec describes a corpus.
type Spec struct {
	Files    int     // number of ordinary pages
	PerDir   int     // pages per directory (default 10)
	MaxDepth int     // nesting depth of directories (default 4)
	MinSize  int     // smallest ordinary page in bytes (default 2 KiB)
	MaxSize  int     // largest ordinary page in bytes (default 20 KiB)
	Large    []int64 // sizes of extra large pages
	Private  int     // every Private-th page gets `public: false` and groups [team]; 0 = none
	Seed     uint64
	Edge     bool // add the edge-case files (empty, CRLF, BOM, Unicode names, ...)
}

// Stats says what was written.
type Stats struct {
	Files, Dirs int
	Bytes       int64
}

var words = strings.Fields(`the a of to and in for is on with that by this be are as from at or an
chromafs mount kernel page cache chunk tree collection server request latency token group access
config deploy install guide reference api endpoint webhook client sdk query filter index vector
naïve café résumé façade jalapeño Ärger Übung straße 日本語 ドキュメント 中文 文档 한국어 Ελληνικά
русский العربية emoji 🎉 🚀 ✓ — “quoted” ‘single’ … µs ±5% ≤ ≥ → ⇒`)

var sections = []string{"guides", "api", "reference", "concepts", "tutorials", "sdk", "deploy", "admin", "integrations", "changelog"}

// Generate writes the corpus into dir, which must exist.
func Generate(dir string, s Spec) (Stats, error) {
	g := &gen{dir: dir, s: s.withDefaults(), rng: rand.New(rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15))}
	for i := 0; i < g.s.Files; i++ {
		if err := g.page(i); err != nil {
			return g.st, err
		}
	}
	for i, n := range g.s.Large {
		if err := g.write(fmt.Sprintf("large/big-%d.md", i), g.text(int(n), false)); err != nil {
			return g.st, err
		}
	}
	if g.s.Edge {
		if err := g.edges(); err != nil {
			return g.st, err
		}
	}
	return g.st, nil
}

func (s Spec) withDefaults() Spec {
	if s.PerDir <= 0 {
		s.PerDir = 10
	}
	if s.MaxDepth <= 0 {
		s.MaxDepth = 4
	}
	if s.MinSize <= 0 {
		s.MinSize = 2 << 10
	}
	if s.MaxSize < s.MinSize {
		s.MaxSize = max(s.MinSize, 20<<10)
	}
	return s
}

type gen struct {
	dir string
	s   Spec
	rng *rand.Rand
	st  Stats
}

// dirFor spreads pages over a tree of directories, PerDir pages each.
func (g *gen) dirFor(i int) string {
	d := i / g.s.PerDir
	parts := []string{sections[d%len(sections)]}
	for d /= len(sections); d > 0 && len(parts) < g.s.MaxDepth; d /= 7 {
		parts = append(parts, fmt.Sprintf("part-%d", d%7))
	}
	return strings.Join(parts, "/")
}

func (g *gen) page(i int) error {
	ext := ".mdx"
	if i%3 == 1 {
		ext = ".md"
	}
	size := g.s.MinSize + g.rng.IntN(g.s.MaxSize-g.s.MinSize+1)
	var buf bytes.Buffer
	if g.s.Private > 0 && i%g.s.Private == g.s.Private-1 {
		buf.WriteString("---\ntitle: Private page\npublic: false\ngroups: [team]\n---\n")
	} else {
		fmt.Fprintf(&buf, "---\ntitle: Page %d\n---\n", i)
	}
	buf.Write(g.text(size-buf.Len(), i%17 == 5))
	return g.write(fmt.Sprintf("%s/page-%04d%s", g.dirFor(i), i, ext), buf.Bytes())
}

// text returns about n bytes of Markdown: headings, paragraphs, code.
func (g *gen) text(n int, crlf bool) []byte {
	nl := "\n"
	if crlf {
		nl = "\r\n"
	}
	var b bytes.Buffer
	b.Grow(n + 128)
	for b.Len() < n {
		switch g.rng.IntN(8) {
		case 0:
			fmt.Fprintf(&b, "## %s %s%s%s", g.word(), g.word(), nl, nl)
		case 1:
			fmt.Fprintf(&b, "```go%sfunc main() { fmt.Println(%q) }%s```%s%s", nl, g.word(), nl, nl, nl)
		default:
			for w := 8 + g.rng.IntN(40); w > 0; w-- {
				b.WriteString(g.word())
				b.WriteByte(' ')
			}
			b.WriteString(nl + nl)
		}
	}
	return b.Bytes()
}

func (g *gen) word() string { return words[g.rng.IntN(len(words))] }

func (g *gen) write(rel string, data []byte) error {
	p := filepath.Join(g.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return err
	}
	g.st.Files++
	g.st.Bytes += int64(len(data))
	return nil
}

// edges writes the files whose bytes are easy to get wrong.
func (g *gen) edges() error {
	files := map[string][]byte{
		"edge/empty.md":                  nil,
		"edge/crlf.md":                   []byte("# CRLF\r\n\r\nline one\r\nline two\r\n"),
		"edge/no-final-newline.md":       []byte("# No newline\n\nthe end"),
		"edge/bom.md":                    []byte("\xef\xbb\xbf# BOM first\n"),
		"edge/only-newlines.md":          []byte("\n\n\n"),
		"edge/with space/file name.md":   []byte("spaces in the path\n"),
		"edge/ünïcödé/日本語のページ.mdx":       []byte("# 日本語\n\nこんにちは世界\n"),
		"edge/emoji 🎉.md":                []byte("party 🎉🎉🎉\n"),
		"edge/long-line.md":              bytes.Repeat([]byte("x"), 40000),
		"edge/multibyte-run.md":          bytes.Repeat([]byte("日本語"), 9000),
		"edge/no-extension":              []byte("plain text without extension\n"),
		"edge/.hidden-dotfile.md":        []byte("dotfiles are pages too\n"),
		"edge/same.md":                   []byte("same slug, .md\n"),
		"edge/same.mdx":                  []byte("same slug, .mdx\n"),
		"edge/tabs\tand-newline-free.md": []byte("\ttabbed\n"),
	}
	for rel, data := range files {
		if err := g.write(rel, data); err != nil {
			return err
		}
	}
	return nil
}
