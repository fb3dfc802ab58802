package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const sample = `
- users: [65534, "1001"]
  collections: [docs]
  groups: [billing]
- unix_groups: [4242]
  collections: [docs, handbook]
  groups: []
- users: [1002]
  collections: ["*"]
  groups: [sre]
`

func TestAllow(t *testing.T) {
	p, err := Parse([]byte(sample))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		s          Subject
		collection string
		groups     []string
		ok         bool
		says       string
	}{
		{"root asks for anything", Subject{UID: 0}, "secret", []string{"admin"}, true, ""},
		{"a granted group", Subject{UID: 65534}, "docs", []string{"billing"}, true, ""},
		{"public view", Subject{UID: 65534}, "docs", nil, true, ""},
		{"a group not granted is refused, not narrowed", Subject{UID: 65534}, "docs", []string{"billing", "admin"}, false, "group(s) admin"},
		{"another collection", Subject{UID: 65534}, "handbook", nil, false, `may not attach collection "handbook"`},
		{"by unix group: public only", Subject{UID: 5000, GIDs: []uint32{100, 4242}}, "handbook", nil, true, ""},
		{"by unix group: no groups", Subject{UID: 5000, GIDs: []uint32{4242}}, "handbook", []string{"billing"}, false, "public pages only"},
		{"rules add up", Subject{UID: 65534, GIDs: []uint32{4242}}, "docs", []string{"billing"}, true, ""},
		{"wildcard collection", Subject{UID: 1002}, "anything", []string{"sre"}, true, ""},
		{"nobody else", Subject{UID: 7}, "docs", nil, false, "uid 7 may not attach"},
	} {
		err := p.Allow(c.s, c.collection, c.groups)
		if (err == nil) != c.ok || (err != nil && (!errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), c.says))) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func TestPodAndDockerSubjects(t *testing.T) {
	p, err := Parse([]byte(`
- namespaces: [support]
  collections: [docs]
  groups: [billing]
- service_accounts: [agents/runner]
  collections: [docs]
  groups: [sre]
- docker: true
  collections: [docs]
  groups: []
`))
	if err != nil {
		t.Fatal(err)
	}
	pod := func(ns, sa string) Subject { return Subject{Pod: &Pod{Namespace: ns, ServiceAccount: sa}} }
	for _, c := range []struct {
		name       string
		s          Subject
		collection string
		groups     []string
		ok         bool
	}{
		{"a namespace's group", pod("support", "default"), "docs", []string{"billing"}, true},
		{"not another's", pod("support", "default"), "docs", []string{"sre"}, false},
		{"a service account's group", pod("agents", "runner"), "docs", []string{"sre"}, true},
		{"another account of that namespace", pod("agents", "other"), "docs", []string{"sre"}, false},
		{"no pod info: public only", pod("", ""), "anything", nil, true},
		{"no pod info: no group", pod("", ""), "docs", []string{"billing"}, false},
		{"a pod is never root", Subject{UID: 0, Pod: &Pod{Namespace: "x", ServiceAccount: "y"}}, "docs", nil, false},
		{"docker: public", Subject{Docker: true}, "docs", nil, true},
		{"docker: no group", Subject{Docker: true}, "docs", []string{"billing"}, false},
		{"docker is never root", Subject{UID: 0, Docker: true}, "other", nil, false},
		{"a unix user matches no pod rule", Subject{UID: 5}, "docs", nil, false},
	} {
		if err := p.Allow(c.s, c.collection, c.groups); (err == nil) != c.ok {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	for in, want := range map[string]string{
		"- service_accounts: [runner]\n  collections: [d]\n  groups: []": "want namespace/name",
		"- namespaces: [a/b]\n  collections: [d]\n  groups: []":          "not a namespace",
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q): %v, want %q", in, err, want)
		}
	}
}

func TestNoPolicyIsRootOnly(t *testing.T) {
	for _, p := range []*Policy{nil, {}} {
		if err := p.Allow(Subject{UID: 0}, "docs", []string{"x"}); err != nil {
			t.Errorf("root refused: %v", err)
		}
		if err := p.Allow(Subject{UID: 1000}, "docs", nil); !errors.Is(err, ErrRefused) {
			t.Errorf("uid 1000 without a policy: %v", err)
		}
	}
	p, err := Load("")
	if err != nil || p.Rules() != 0 {
		t.Errorf("Load(\"\"): %v %v", p, err)
	}
}

func TestParseErrors(t *testing.T) {
	for in, want := range map[string]string{
		"users: [1]":                                                       "want a list of rules",
		"- collections: [docs]\n  groups: []":                              "names its subjects",
		"- users: [1]\n  groups: []":                                       "names its collections",
		"- users: [1]\n  collections: [docs]":                              "groups: [billing], or []",
		"- users: [1]\n  collections: [docs]\n  groups: []\n  group: [x]":  "field group not found",
		"- users: [no-such-user-xyz]\n  collections: [docs]\n  groups: []": "no-such-user-xyz",
		"- users: [1]\n  collections: [docs]\n  groups: [\"a b\"]":         "not a group name",
		"- [1, 2]": "want a rule",
	} {
		if _, err := Parse([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q): %v, want %q", in, err, want)
		}
	}
	for _, empty := range []string{"", "# nothing\n", "[]"} {
		if p, err := Parse([]byte(empty)); err != nil || p.Rules() != 0 {
			t.Errorf("Parse(%q): %v, %v", empty, p, err)
		}
	}
}

func TestNamesResolveAtLoad(t *testing.T) {
	p := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(p, []byte("- users: [root]\n  unix_groups: [root]\n  collections: [docs]\n  groups: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	pol, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o666); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "chmod go-w") {
		t.Errorf("a policy others may write: %v", err)
	}
	if g, ok := pol.Granted(Subject{UID: 1, GIDs: []uint32{0}}, "docs"); !ok || len(g) != 0 {
		t.Errorf("gid 0 by the name root: %v %v", g, ok)
	}
}

func TestLimits(t *testing.T) {
	p, err := Parse([]byte(`
- users: [65534]
  collections: [docs]
  groups: []
  limits: {attachments: 5}
- unix_groups: [4242]
  limits: {attachments: 50, private_mounts: 1, mounts: 3}
- docker: true
  limits: {layouts: 0}
`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		s    Subject
		want Limits
	}{
		{"a rule lowers attachments", Subject{UID: 65534}, Limits{Attachments: 5, Mounts: DefaultLimits.Mounts, PrivateMounts: DefaultLimits.PrivateMounts, Layouts: DefaultLimits.Layouts}},
		{"the largest of the rules naming it", Subject{UID: 65534, GIDs: []uint32{4242}}, Limits{Attachments: 50, Mounts: 3, PrivateMounts: 1, Layouts: DefaultLimits.Layouts}},
		{"no rule sets any: the defaults", Subject{UID: 7}, DefaultLimits},
		{"docker", Subject{Docker: true}, Limits{Attachments: DefaultLimits.Attachments, Mounts: DefaultLimits.Mounts, PrivateMounts: DefaultLimits.PrivateMounts, Layouts: 0}},
	} {
		got, ok := p.Limits(c.s)
		if !ok || got != c.want {
			t.Errorf("%s: %+v %v, want %+v", c.name, got, ok, c.want)
		}
	}
	if _, ok := p.Limits(Subject{UID: 0}); ok {
		t.Error("root has limits")
	}
	// a limits-only rule grants nothing
	if err := p.Allow(Subject{UID: 7, GIDs: []uint32{4242}}, "docs", nil); !errors.Is(err, ErrRefused) {
		t.Errorf("a rule with limits alone granted: %v", err)
	}
	if (Subject{UID: 5, GIDs: []uint32{1}}).Key() != (Subject{UID: 5}).Key() || (Subject{UID: 5}).Key() == (Subject{UID: 6}).Key() ||
		(Subject{Pod: &Pod{"a", "b"}}).Key() == (Subject{Pod: &Pod{"a", "c"}}).Key() {
		t.Error("subject keys: one per uid, one per service account")
	}
}

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct{ yaml, says string }{
		{"- users: [1]\n  collections: [../../vault/collections/payroll]\n  groups: []\n", "collections"},
		{"- users: [1]\n  collections: [ab]\n  groups: []\n", "3 to 512"},
		{"- users: [1]\n  limits: {attachments: -1}\n", "want 0 to"},
		{"- users: [1]\n  limits: {attachments: 99999999999}\n", "want 0 to"},
		{"- users: [1]\n  limits: {threads: 3}\n", "threads"},
		{"- users: [1]\n  limits: {attachments: 3}\n  groups: [a]\n", "collections"},
	} {
		if _, err := Parse([]byte(c.yaml)); err == nil || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%q: %v, want an error saying %q", c.yaml, err, c.says)
		}
	}
}

// FuzzParse: no policy file makes the parser panic or hang, and what it
// accepts judges any subject without panicking.
func FuzzParse(f *testing.F) {
	f.Add([]byte(sample))
	f.Add([]byte("- users: [1]\n  limits: {attachments: 3, private_mounts: 1, layouts: 0}\n"))
	f.Add([]byte("- namespaces: [a]\n  service_accounts: [a/b]\n  docker: true\n  collections: [\"*\"]\n  groups: [x]\n"))
	f.Add([]byte("{}"))
	f.Add([]byte("- &a [x]\n- *a\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			return
		}
		for _, s := range []Subject{{UID: 0}, {UID: 1, GIDs: []uint32{1}}, {Docker: true}, {Pod: &Pod{"a", "b"}}, {Pod: &Pod{}}} {
			_ = p.Allow(s, "docs", []string{"x"})
			if l, ok := p.Limits(s); ok && (l.Attachments < 0 || l.Mounts < 0 || l.PrivateMounts < 0 || l.Layouts < 0) {
				t.Fatalf("negative limits %+v", l)
			}
		}
	})
}
