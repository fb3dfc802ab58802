package tree

import (
	"fmt"
	"strings"
	"testing"
)

// kindsDoc holds empty directories, the root's attributes, symbolic links
// of every kind (to a file, to a directory, through a link, in a chain, a
// loop, out of the tree, to a hidden page) and a private directory.
const kindsDoc = `{
 "/":            {"isPublic":true,"type":"dir","path":".","mtime":500,"mtime_ns":7},
 "a":            {"isPublic":true,"path":"a/page.md","size":3,"mtime":100},
 "empty/":       {"isPublic":true,"type":"dir","path":"empty","mtime":50},
 "nested/":      {"isPublic":true,"type":"dir","path":"nested/x/y","mtime":60},
 "adir/":        {"isPublic":true,"type":"dir","path":"a","mtime":40,"mtime_ns":9},
 "secret":       {"isPublic":false,"groups":["admin"],"path":"priv/s.md","size":1,"mtime":900},
 "privdir/":     {"isPublic":true,"type":"dir","path":"priv","mtime":30},
 "tofile":       {"isPublic":true,"type":"symlink","path":"links/tofile","target":"../a/page.md","mtime":70},
 "todir":        {"isPublic":true,"type":"symlink","path":"links/todir","target":"../a","mtime":71},
 "through":      {"isPublic":true,"type":"symlink","path":"links/through","target":"todir/page.md"},
 "chain":        {"isPublic":true,"type":"symlink","path":"chain","target":"links/tofile"},
 "loop1":        {"isPublic":true,"type":"symlink","path":"loop1","target":"loop2"},
 "loop2":        {"isPublic":true,"type":"symlink","path":"loop2","target":"loop1"},
 "escape":       {"isPublic":true,"type":"symlink","path":"escape","target":"../outside"},
 "abs":          {"isPublic":true,"type":"symlink","path":"abs","target":"/etc/passwd"},
 "tosecret":     {"isPublic":true,"type":"symlink","path":"tosecret","target":"priv/s.md"},
 "missing":      {"isPublic":true,"type":"symlink","path":"missing","target":"a/nope.md"},
 "notadir":      {"isPublic":true,"type":"symlink","path":"notadir","target":"a/page.md/x"},
 "self":         {"isPublic":true,"type":"symlink","path":"only/self","target":".."},
 "hiddenlink":   {"isPublic":false,"type":"symlink","path":"hl","target":"a"},
 "badtype":      {"isPublic":true,"type":"socket","path":"sock"}
}`

func TestDirectoriesAndLinks(t *testing.T) {
	tr, d := mustBuild(t, kindsDoc)
	got := strings.Join(paths(tr), " ")
	want := "a/ a/page.md chain empty/ links/ links/through links/todir links/tofile nested/ nested/x/ nested/x/y/ only/ only/self priv/"
	if got != want {
		t.Fatalf("paths\n got %s\nwant %s", got, want)
	}
	for link, target := range map[string]string{"chain": "links/tofile", "links/todir": "../a", "only/self": ".."} {
		if n := tr.Lookup(link); n == nil || n.Link == nil || n.Link.Target != target || n.Nlink() != 1 {
			t.Errorf("%s: not a link to %q: %+v", link, target, n)
		}
	}
	if tr.Links != 5 {
		t.Errorf("Links = %d, want 5", tr.Links)
	}
	for _, w := range []string{`"loop1"`, `"escape"`, `"abs"`, `"tosecret"`, `"missing"`, `"notadir"`, `"badtype"`} {
		if !strings.Contains(strings.Join(d.Warnings.List, "\n"), w) {
			t.Errorf("no warning for %s: %q", w, d.Warnings.List)
		}
	}
	if strings.Contains(strings.Join(d.Warnings.List, "\n"), "priv/s.md") {
		t.Errorf("a warning names the hidden target: %q", d.Warnings.List)
	}
}

func TestRecordedDirectoryMtimes(t *testing.T) {
	tr, _ := mustBuild(t, kindsDoc)
	for p, want := range map[string][2]int64{
		"":           {71, 0}, // a root entry, but hidden entries lie below: the newest shown
		"a":          {40, 9}, // recorded, though a file below is newer
		"empty":      {50, 0},
		"nested/x/y": {60, 0},
		"nested":     {60, 0}, // no entry: the newest below
		"priv":       {0, 0},  // recorded 30, but a hidden page lies below: derived (nothing shown)
	} {
		n := tr.Lookup(p)
		if n == nil || n.Mtime != want[0] || int64(n.Nsec) != want[1] {
			t.Errorf("%q mtime = %+v, want %v", p, n, want)
		}
	}
	admin, _ := mustBuild(t, kindsDoc, "admin")
	if n := admin.Lookup("priv"); n.Mtime != 30 {
		t.Errorf("admin: priv mtime %d, want the recorded 30", n.Mtime)
	}
	if admin.Lookup("tosecret") == nil || admin.Lookup("tosecret").Link == nil {
		t.Errorf("admin: a link to a page admin sees is missing")
	}
	open, _ := mustBuild(t, `{"/":{"isPublic":true,"type":"dir","path":".","mtime":500,"mtime_ns":7},"a":{"isPublic":true,"size":0,"mtime":900}}`)
	if n := open.Lookup(""); n.Mtime != 500 || n.Nsec != 7 {
		t.Errorf("root mtime %d.%d, want the recorded 500.7", n.Mtime, n.Nsec)
	}
}

func TestLinkInodesFollowTargets(t *testing.T) {
	a, _ := mustBuild(t, kindsDoc)
	b, _ := mustBuild(t, strings.Replace(kindsDoc, `"target":"../a/page.md"`, `"target":"../a/./page.md"`, 1))
	if a.Lookup("links/tofile").Ino == b.Lookup("links/tofile").Ino {
		t.Errorf("a link whose target changed kept its inode")
	}
	if a.Lookup("links/todir").Ino != b.Lookup("links/todir").Ino {
		t.Errorf("an unchanged link changed its inode")
	}
	if SameAttrs(a.Lookup("links/tofile"), b.Lookup("links/tofile")) {
		t.Errorf("SameAttrs: links with other targets look the same")
	}
}

func TestLazyPointerFields(t *testing.T) {
	sha := strings.Repeat("ab", 32)
	for name, c := range map[string]struct {
		entry string
		ok    bool
	}{
		"whole":        {`{"isPublic":true,"uri":"https://h/x","size":3,"sha256":"` + sha + `"}`, true},
		"pieces":       {`{"isPublic":true,"uri":"http://h/x","chunks":[2,1],"chunk_sha256":["` + sha + `","` + sha + `"],"sha256":"` + sha + `"}`, true},
		"no sha":       {`{"isPublic":true,"uri":"https://h/x","size":3}`, false},
		"no size":      {`{"isPublic":true,"uri":"https://h/x","sha256":"` + sha + `"}`, false},
		"file scheme":  {`{"isPublic":true,"uri":"file:///etc/passwd","size":3,"sha256":"` + sha + `"}`, false},
		"short pieces": {`{"isPublic":true,"uri":"http://h/x","chunks":[2,1],"chunk_sha256":["` + sha + `"],"sha256":"` + sha + `"}`, false},
		"bad digest":   {`{"isPublic":true,"uri":"http://h/x","chunks":[3],"chunk_sha256":["zz"],"sha256":"` + sha + `"}`, false},
	} {
		tr, d := mustBuild(t, `{"p":`+c.entry+`}`)
		if got := tr.Lookup("p.mdx") != nil; got != c.ok {
			t.Errorf("%s: placed=%v, want %v (warnings %q)", name, got, c.ok, d.Warnings.List)
		}
	}
}

func TestLongPathsUpToPathMax(t *testing.T) {
	long := strings.Repeat(strings.Repeat("x", 249)+"/", 16) + "f.md" // 4,004 bytes
	tr, d := mustBuild(t, `{"l":{"isPublic":true,"path":"`+long+`","size":0}}`)
	if tr.Lookup(long) == nil {
		t.Fatalf("a %d-byte path was not placed: %q", len(long), d.Warnings.List)
	}
	tooLong := strings.Repeat("y/", 2048)
	tr, _ = mustBuild(t, `{"l":{"isPublic":true,"path":"`+tooLong+`f","size":0}}`)
	if tr.Files != 0 {
		t.Errorf("a path over PATH_MAX was placed")
	}
}

// TestHostileLinkChains: long chains and loops of links cost time linear
// in the links; a chain resolves only within Linux's 40 hops.
func TestHostileLinkChains(t *testing.T) {
	const n = 20000
	var sb strings.Builder
	sb.WriteString(`{"f":{"isPublic":true,"path":"f.md","size":0}`)
	for i := 0; i < n; i++ {
		next := fmt.Sprintf("l%05d", i+1)
		if i == n-1 {
			next = "f.md"
		}
		fmt.Fprintf(&sb, `,"c%d":{"isPublic":true,"type":"symlink","path":"l%05d","target":"%s"}`, i, i, next)
		fmt.Fprintf(&sb, `,"r%d":{"isPublic":true,"type":"symlink","path":"loop/r%05d","target":"r%05d"}`, i, i, (i+1)%n)
	}
	sb.WriteString("}")
	d, err := Decode([]byte(sb.String()), DefaultLimits)
	if err != nil {
		t.Fatal(err)
	}
	tr, b := build(d, nil, DefaultLimits)
	// placements are memoised: placing a link costs at most a lookup per
	// link it may pass through (maxLinkHops, and its own), however chains
	// and loops are laid; a count, where a time would measure the machine
	steps, most := b.linkSteps, int64(2*n*(maxLinkHops+2))
	if steps > most {
		t.Errorf("placing %d chained and %d looping links took %d lookups, want at most %d (linear)", n, n, steps, most)
	}
	if tr.Links < 30 || tr.Links > 45 || tr.Lookup(fmt.Sprintf("l%05d", n-1)) == nil || tr.Lookup("l00000") != nil {
		t.Errorf("%d links placed; want the ~40 within reach of f.md", tr.Links)
	}
	if tr.Lookup("loop") != nil {
		t.Errorf("a loop of links was placed")
	}
}

func TestValidPathAgreesWithSplitPath(t *testing.T) {
	for _, p := range []string{"a", "a/b/c.md", "", "/abs", "a//b", "a/./b", "a/../b", "a/", strings.Repeat("x", 256), strings.Repeat("a/", 130) + "f", "a\x00b"} {
		_, want := SplitPath(p, DefaultLimits.MaxDepth)
		if got := validPath(p, DefaultLimits.MaxDepth); (got == nil) != (want == nil) {
			t.Errorf("%.40q: validPath %v, SplitPath %v", p, got, want)
		}
	}
}
