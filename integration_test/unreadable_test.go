package integration_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromafs/chromafs/internal/testenv"
)

// unprivileged returns how to run a command as a user that file modes
// apply to: nothing when the test is not root, else setpriv to nobody. It
// also copies chromafs-ingest where that user can execute it and opens the
// directories above dir to it.
func unprivileged(t *testing.T, dir string) (prefix []string, ingest string) {
	t.Helper()
	ingest = filepath.Join(env.bin, "chromafs-ingest")
	if os.Geteuid() != 0 {
		return nil, ingest
	}
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		testenv.Missing(t, "running as root without setpriv (util-linux): file modes cannot be tested")
	}
	binDir, err := os.MkdirTemp("", "chromafs-unpriv-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(binDir) })
	must(t, os.Chmod(binDir, 0o755))
	data, err := os.ReadFile(ingest)
	must(t, err)
	ingest = filepath.Join(binDir, "chromafs-ingest")
	must(t, os.WriteFile(ingest, data, 0o755))
	for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		must(t, os.Chmod(d, 0o755))
	}
	return []string{setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--"}, ingest
}

// TestUnreadableSourceKeepsPages: a file or a directory that exists but
// cannot be read stops the run (and its dry run) with exit 1 and one line
// naming it; the collection keeps its tree and every page, byte for byte;
// once readable again, a run deletes nothing.
func TestUnreadableSourceKeepsPages(t *testing.T) {
	requireServer(t)
	src := sharedSource(t)
	name := collectionName(t)
	prefix, bin := unprivileged(t, src)
	run := func(extra ...string) (string, string, int) {
		args := append(append(append([]string{}, prefix...), bin), extra...)
		args = append(args, "--chroma-url", env.url, "--collection", name, "--quiet", src)
		cmd := exec.Command(args[0], args[1:]...)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		code := exitCode(t, cmd.Run())
		return out.String(), errb.String(), code
	}
	if _, errOut, code := run(); code != 0 {
		t.Fatalf("first ingest: exit %d: %s", code, errOut)
	}
	st := openStore(t, name)
	tree0, err := st.LoadTree(context.Background())
	must(t, err)
	ids0, err := st.IDs(context.Background())
	must(t, err)

	cases := []struct{ path, want string }{
		{"guides/s0/page-03.md", "cannot read guides/s0/page-03.md: permission denied"},
		{"guides/s1", "cannot read guides/s1: permission denied"},
	}
	for _, tc := range cases {
		t.Run(tc.path, func(t *testing.T) {
			// Another page changes too, so the run has something to write.
			writeSource(t, src, map[string]string{"index.mdx": "# Welcome, " + tc.path + "\n"})
			target := filepath.Join(src, filepath.FromSlash(tc.path))
			st0, err := os.Stat(target)
			must(t, err)
			must(t, os.Chmod(target, 0))
			defer os.Chmod(target, st0.Mode().Perm())
			for _, extra := range [][]string{{"--dry-run"}, nil} {
				_, errOut, code := run(extra...)
				lines := strings.Split(strings.TrimSpace(errOut), "\n")
				if code != 1 || len(lines) != 1 || !strings.Contains(lines[0], tc.want) {
					t.Errorf("%v: exit %d, stderr %q; want exit 1 and one line with %q", extra, code, errOut, tc.want)
				}
			}
			tree1, err := st.LoadTree(context.Background())
			must(t, err)
			if string(tree1) != string(tree0) {
				t.Errorf("the tree changed after a run that could not read %s", tc.path)
			}
			ids1, err := st.IDs(context.Background())
			must(t, err)
			for _, id := range ids0 {
				if !slices.Contains(ids1, id) {
					t.Errorf("record %q deleted by a run that could not read %s", id, tc.path)
				}
			}
		})
	}
	writeSource(t, src, map[string]string{"index.mdx": "# Welcome\n"})
	out, errOut, code := run()
	if s := parseSummary(t, out); code != 0 || s.deleted != 0 || s.written != 0 {
		t.Errorf("run with everything readable again: exit %d, %+v (%s); want nothing deleted or written", code, s, errOut)
	}
	checkAllPages(t, st, src, loadEntries(t, st))
}
