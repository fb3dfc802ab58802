package integration_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestAccessControlNoLeaks: for a mount with groups G, a page it may not
// see is ENOENT in every way, absent from every listing, changes no size,
// link count or statfs figure, and its chunks are never requested.
func TestAccessControlNoLeaks(t *testing.T) {
	requireFUSE(t)
	parent := t.TempDir()
	secret := fmt.Sprintf("TOPSECRET-%d", os.Getpid())
	pub := "---\ntitle: public\n---\npublic text\n"
	team := "---\ngroups: [team]\n---\nteam only " + secret + "\n"
	admin := "---\npublic: false\ngroups: [admin]\n---\nadmin only " + secret + "\n"
	nobody := "---\npublic: false\n---\nnobody " + secret + "\n"
	files := map[string]string{
		"index.md":              pub,
		"guides/a.md":           pub,
		"guides/team-notes.md":  team,
		"guides/admin-notes.md": admin,
		"secret/only.md":        admin,
		"secret/deeper/x.md":    nobody,
		"teamdir/t.md":          team,
		"mixed/pub.md":          pub,
		"mixed/sub/hidden.md":   nobody,
	}
	src := filepath.Join(parent, "src")
	for p, c := range files {
		copyFile(t, filepath.Join(src, p), strings.NewReader(c))
	}
	name := collectionName(t)
	if _, errOut, code := ingestCmd(t, nil, "--chroma-url", env.url, "--collection", name, "--quiet", src); code != 0 {
		t.Fatalf("ingest: %s", errOut)
	}
	views := []struct {
		groups  string
		visible []string
	}{
		{"", []string{"index.md", "guides/a.md", "mixed/pub.md"}},
		{"team", []string{"index.md", "guides/a.md", "mixed/pub.md", "guides/team-notes.md", "teamdir/t.md"}},
		{"admin,other", []string{"index.md", "guides/a.md", "mixed/pub.md", "guides/admin-notes.md", "secret/only.md"}},
	}
	for _, v := range views {
		t.Run("groups="+v.groups, func(t *testing.T) { checkView(t, parent, name, src, files, v.groups, v.visible, secret) })
	}
}

func checkView(t *testing.T, parent, name, src string, files map[string]string, groups string, visible []string, secret string) {
	dir := filepath.Join(parent, "view-"+strings.ReplaceAll(groups, ",", "_"))
	local, mnt := filepath.Join(dir, "local"), filepath.Join(dir, "mnt")
	isVisible := map[string]bool{}
	for _, p := range visible {
		isVisible[p] = true
		b, err := os.ReadFile(filepath.Join(src, p))
		must(t, err)
		copyFile(t, filepath.Join(local, p), strings.NewReader(string(b)))
		st, err := os.Stat(filepath.Join(src, p))
		must(t, err)
		must(t, os.Chtimes(filepath.Join(local, p), st.ModTime(), st.ModTime()))
	}
	readOnlyTree(t, local)
	must(t, os.MkdirAll(mnt, 0o755))
	p := newFaultProxy(t, env.url)
	args := []string{}
	if groups != "" {
		args = append(args, "--groups", groups)
	}
	startMountEnv(t, nil, name, mnt, p.URL, args...)

	for _, s := range []string{
		"ls -lanR --time-style=+TS . | grep -v '^total'", "find . | sort", "du -ab . | sort",
		"find . -type d -print0 | sort -z | xargs -0 stat -c '%n %s %h %a'",
		"find . -type f -print0 | sort -z | xargs -0 md5sum",
	} {
		sameOutput(t, mnt, local, s)
	}
	grep := "grep -rn " + secret + " . | sort"
	got, _ := sh(t, mnt, grep, true)
	want, _ := sh(t, local, grep, true)
	if got != want {
		t.Errorf("grep -r for private content prints %q, the visible pages alone %q", got, want)
	}
	for path := range files {
		if isVisible[path] {
			continue
		}
		hiddenIsAbsent(t, mnt, path)
		slug := strings.TrimSuffix(path, ".md")
		if p.sawBody(`"` + slug) {
			t.Errorf("the chunks of hidden page %s were requested", slug)
		}
	}
	// The visible pages share their content, so the host cache may serve
	// all but one of them: at least one must have been asked for.
	if !p.sawBody(`"index`) && !p.sawBody(`"guides/a`) && !p.sawBody(`"mixed/pub`) {
		t.Error("the proxy never saw a request for a visible page: the check above proves nothing")
	}
	sameStatfs(t, dir, mnt, local, args...)
	for _, d := range []string{"secret", "secret/deeper", "mixed/sub"} {
		if !anyVisibleUnder(visible, d) {
			hiddenIsAbsent(t, mnt, d)
		}
	}
}

// sameStatfs mounts a collection ingested from the visible pages alone and
// requires the same statfs figures: hidden pages count for nothing.
func sameStatfs(t *testing.T, dir, mnt, local string, mountArgs ...string) {
	t.Helper()
	name := collectionName(t)
	if _, errOut, code := ingestCmd(t, nil, "--chroma-url", env.url, "--collection", name, "--quiet", local); code != 0 {
		t.Fatalf("ingest of the visible pages: %s", errOut)
	}
	ref := filepath.Join(dir, "ref")
	must(t, os.MkdirAll(ref, 0o755))
	startMount(t, name, ref, mountArgs...)
	statfs := "stat -f -c '%S %b %f %a %c %d %l' ."
	got, _ := sh(t, mnt, statfs, false)
	want, _ := sh(t, ref, statfs, false)
	if got != want || got == "" {
		t.Errorf("statfs %q, with the visible pages alone %q", got, want)
	}
}

func anyVisibleUnder(visible []string, dir string) bool {
	for _, v := range visible {
		if strings.HasPrefix(v, dir+"/") {
			return true
		}
	}
	return false
}

// hiddenIsAbsent checks that every way of asking about path says ENOENT.
func hiddenIsAbsent(t *testing.T, mnt, path string) {
	t.Helper()
	full := filepath.Join(mnt, path)
	if _, err := os.Lstat(full); !os.IsNotExist(err) {
		t.Errorf("lstat %s: %v, want ENOENT", path, err)
	}
	if _, err := os.Open(full); !os.IsNotExist(err) {
		t.Errorf("open %s: %v, want ENOENT", path, err)
	}
	if _, err := os.Readlink(full); !os.IsNotExist(err) {
		t.Errorf("readlink %s: %v, want ENOENT", path, err)
	}
	for _, cmd := range [][]string{{"getfattr", "-d", full}, {"ls", full}, {"stat", full}, {"cat", full}} {
		out, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "No such file or directory") {
			t.Errorf("%s: %v %q, want ENOENT", strings.Join(cmd, " "), err, out)
		}
	}
}
