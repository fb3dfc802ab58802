package integration_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/chromafs/chromafs/internal/corpus"
)

// TestDaemonViewSearch: a daemon's views answer .search/ too, inside a
// sandbox: a word of one public page finds it (the link resolves to its
// bytes), a word only the hidden pages hold finds nothing in the public
// view and the hidden page in the team view, and the root lists no
// .search.
func TestDaemonViewSearch(t *testing.T) {
	requireBwrap(t)
	parent := t.TempDir()
	name, src := ingestCorpus(t, parent, corpus.Spec{Files: 40, Private: 4, Seed: 44})
	policy := filepath.Join(parent, "policy.yaml")
	must(t, os.WriteFile(policy, []byte(fmt.Sprintf("- users: [0]\n  collections: [%s]\n  groups: [team]\n", name)), 0o600))
	d := startDaemon(t, "--policy", policy)
	public, team := d.dirFor(0, "public"), d.dirFor(0, "team")
	if out, code := d.run(0, "attach", "--collection", name, public); code != 0 {
		t.Fatalf("attach: exit %d %s", code, out)
	}
	if out, code := d.run(0, "attach", "--collection", name, "--groups", "team", team); code != 0 {
		t.Fatalf("attach --groups team: exit %d %s", code, out)
	}
	pub, hid := wordsOf(t, src)
	if pub.word == "" || hid.word == "" {
		t.Fatalf("corpus has no word of one public page (%q) or only of hidden pages (%q)", pub.word, hid.word)
	}
	inside := func(path, script string) string {
		t.Helper()
		out, err := exec.Command("bwrap", bwrapArgs(path, "sh", "-c", script)...).CombinedOutput()
		if err != nil {
			t.Fatalf("in a sandbox of %s: %v\n%s", path, err, out)
		}
		return string(out)
	}
	q := func(word string) string { return "/docs/.search/" + word + "?mode=lexical" }
	out := inside(public, fmt.Sprintf(`ls -a /docs | grep -c '^\.search$'; cd %q && ls && cmp 01-* /docs/%s && echo SAME; ls %q | wc -l; cat %q/.results`,
		q(pub.word), pub.page, q(hid.word), q(hid.word)))
	lines := strings.Split(out, "\n")
	if lines[0] != "0" {
		t.Errorf("ls -a of the view lists .search (%q)", lines[0])
	}
	if !strings.Contains(out, "01-"+filepath.Base(pub.page)) || !strings.Contains(out, "SAME") {
		t.Errorf("a word of %s alone does not find it first, or the link does not give its bytes:\n%s", pub.page, out)
	}
	if strings.Contains(out, hid.page) || strings.Contains(out, filepath.Base(hid.page)) || !strings.Contains(out, ": 0 results") {
		t.Errorf("the public view's search for a word only hidden pages hold shows something of them:\n%s", out)
	}
	out = inside(team, fmt.Sprintf(`ls %q`, q(hid.word)))
	if !strings.Contains(out, filepath.Base(hid.page)) {
		t.Errorf("the team view's search for %q does not find %s: %s", hid.word, hid.page, out)
	}
	if st := d.status(); len(st.Views) != 2 || st.Views[0].Searches+st.Views[1].Searches < 3 {
		t.Errorf("list: %+v (want 2 views and their searches counted)", st.Views)
	}
}

type pageWord struct{ word, page string }

// wordsOf finds a word that only one public page holds, and a word only
// the hidden pages (marked public: false) hold, with one such page.
func wordsOf(t *testing.T, src string) (pub, hid pageWord) {
	t.Helper()
	word := regexp.MustCompile(`[a-z0-9]{2,}`)
	where := map[string]map[string]bool{}
	hidden := map[string]bool{}
	must(t, filepath.WalkDir(src, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		hidden[rel] = bytes.Contains(b[:min(len(b), 200)], []byte("public: false"))
		for _, w := range word.FindAllString(strings.ToLower(string(b)), -1) {
			if where[w] == nil {
				where[w] = map[string]bool{}
			}
			where[w][rel] = true
		}
		return nil
	}))
	words := make([]string, 0, len(where))
	for w := range where {
		words = append(words, w)
	}
	sort.Strings(words)
	for _, w := range words {
		pages := where[w]
		allHidden := true
		var one string
		for p := range pages {
			allHidden = allHidden && hidden[p]
			one = p
		}
		if pub.word == "" && len(pages) == 1 && !hidden[one] && strings.HasSuffix(one, ".md") {
			pub = pageWord{w, one}
		}
		if hid.word == "" && allHidden {
			hid = pageWord{w, one}
		}
	}
	return pub, hid
}
