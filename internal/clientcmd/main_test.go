package clientcmd

import (
	"path/filepath"
	"strings"
	"testing"
)

func runCmd(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errb strings.Builder
	code := run(args, &out, &errb)
	return out.String() + errb.String(), code
}

func TestUsageAndErrors(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, c := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--help"}, 0, "Usage: chromafs"},
		{[]string{"--version"}, 0, "chromafs "},
		{[]string{"--socket", sock}, 2, "want a command"},
		{[]string{"--socket", sock, "mount"}, 2, `unknown command "mount"`},
		{[]string{"--socket", sock, "attach", "/p"}, 2, "--collection"},
		{[]string{"--socket", sock, "attach", "--collection", "docs"}, 2, "exactly one PATH"},
		{[]string{"--socket", sock, "attach", "--collection", "docs", "--groups", "a b", "/p"}, 2, "--groups"},
		{[]string{"--socket", sock, "detach"}, 2, "one PATH or ID"},
		{[]string{"--socket", sock, "refresh", "a", "b"}, 2, "at most one"},
		{[]string{"--socket", sock, "list"}, 1, "chromafsd unreachable at " + sock},
		{[]string{"--socket", sock, "attach", "--help"}, 0, "Usage: chromafs attach"},
	} {
		out, code := runCmd(t, c.args...)
		if code != c.code || !strings.Contains(out, c.says) {
			t.Errorf("chromafs %q: exit %d %q, want exit %d saying %q", c.args, code, out, c.code, c.says)
		}
		if code == 1 && strings.Count(strings.TrimSpace(out), "\n") > 0 {
			t.Errorf("chromafs %q: more than one line: %q", c.args, out)
		}
	}
	t.Setenv("CHROMAFS_SOCKET", sock)
	if out, code := runCmd(t, "list"); code != 1 || !strings.Contains(out, sock) {
		t.Errorf("CHROMAFS_SOCKET not used: %d %q", code, out)
	}
}
