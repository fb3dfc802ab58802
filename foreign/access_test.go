package foreign

import (
	"slices"
	"strings"
	"testing"
)

// TestAccessStrictest: a file takes the strictest access of its records
// (issue 28, finding 2): a view sees it only where it may see every
// record. The red team's collection first: a path key a client chose
// (kind) groups a billing record, an admin one and a public one into one
// file; under the union of their groups a [billing] view read the admin
// text. Then the cases of the rule, a view of each file, and the warning
// for records that disagree.
func TestAccessStrictest(t *testing.T) {
	rec := func(id, kind string, groups any) Record {
		m := map[string]any{"kind": kind}
		if groups != nil {
			m["acl"] = groups
		}
		return Record{ID: id, Doc: id + " text of " + kind + "; ", Meta: m}
	}
	custom := Layout{Name: "custom", PathKey: "kind", OrderKey: "n", GroupsKeys: []string{"acl"}}

	redTeam := []Record{rec("b1", "doc", "billing"), {ID: "a1", Doc: "HUNTER2 admin secret", Meta: map[string]any{"kind": "doc", "acl": "admin"}}, rec("p1", "doc", nil)}
	es, rep := Build(redTeam, custom)
	if e := es["doc"]; e.IsPublic || len(e.Groups) != 0 {
		t.Errorf("the red team's file: public %v, groups %v; want hidden from every view (billing and admin have no group in common)", e.IsPublic, e.Groups)
	}
	for _, groups := range [][]string{nil, {"billing"}, {"admin"}, {"billing", "admin"}} {
		if tr := viewTree(t, es, groups...); tr.Lookup("doc") != nil {
			t.Errorf("view %v shows the file of records it may not all see", groups)
		}
	}
	if len(rep.Warnings) != 1 || !strings.Contains(rep.Warnings[0], "doc: its 3 records disagree on their groups") || !strings.Contains(rep.Warnings[0], "hidden from every view") {
		t.Errorf("warnings %q: want one saying the records of doc disagree", rep.Warnings)
	}

	for _, tc := range []struct {
		name   string
		recs   []Record
		keys   []string
		public bool
		groups []string
		warn   bool
	}{
		{"no groups key", []Record{rec("1", "f", "admin"), rec("2", "f", nil)}, nil, true, nil, false},
		{"no record names groups", []Record{rec("1", "f", nil), rec("2", "f", "")}, []string{"acl"}, true, nil, false},
		{"all name the same", []Record{rec("1", "f", "sre, ops"), rec("2", "f", []any{"ops", "sre"})}, []string{"acl"}, false, []string{"ops", "sre"}, false},
		{"a public record restricts nothing", []Record{rec("1", "f", "billing"), rec("2", "f", nil)}, []string{"acl"}, false, []string{"billing"}, true},
		{"the intersection", []Record{rec("1", "f", "a,b"), rec("2", "f", "b,c"), rec("3", "f", "b,d")}, []string{"acl"}, false, []string{"b"}, true},
		{"nothing in common", []Record{rec("1", "f", "a"), rec("2", "f", "b")}, []string{"acl"}, false, nil, true},
		{"malformed anywhere", []Record{rec("1", "f", "a"), rec("2", "f", 7.0)}, []string{"acl"}, false, nil, true},
		{"malformed list", []Record{rec("1", "f", []any{"a", 1.0})}, []string{"acl"}, false, nil, true},
		{"two keys: both restrict", []Record{{ID: "1", Meta: map[string]any{"kind": "f", "acl": "admin", "team": "admin,sre"}}}, []string{"acl", "team"}, false, []string{"admin"}, false},
		{"two keys: a key the record lacks restricts nothing", []Record{{ID: "1", Meta: map[string]any{"kind": "f", "acl": "admin"}}}, []string{"acl", "team"}, false, []string{"admin"}, false},
		{"two keys that disagree hide", []Record{{ID: "1", Meta: map[string]any{"kind": "f", "acl": "admin", "team": "sre"}}}, []string{"acl", "team"}, false, nil, true},
		{"two keys: malformed under one", []Record{{ID: "1", Meta: map[string]any{"kind": "f", "acl": "admin", "team": true}}}, []string{"acl", "team"}, false, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := custom
			l.GroupsKeys = tc.keys
			es, rep := Build(tc.recs, l)
			e, ok := es["f"]
			if !ok {
				t.Fatalf("no file f: %v", keys(es))
			}
			if e.IsPublic != tc.public || !slices.Equal(e.Groups, tc.groups) {
				t.Errorf("public %v, groups %v; want %v, %v", e.IsPublic, e.Groups, tc.public, tc.groups)
			}
			if (len(rep.Warnings) > 0) != tc.warn {
				t.Errorf("warnings %q; want some: %v", rep.Warnings, tc.warn)
			}
			// a view sees the file only where it may see every record
			for _, view := range [][]string{nil, {"a"}, {"b"}, {"admin"}, {"billing"}, {"ops"}, {"sre"}, {"a", "b", "c", "d", "admin", "billing", "ops", "sre"}} {
				shown := viewTree(t, es, view...).Lookup("f") != nil
				if shown && !everyRecordVisible(tc.recs, tc.keys, view) {
					t.Errorf("view %v sees f, but not every record of it", view)
				}
			}
		})
	}
}

// everyRecordVisible reports whether a view of groups may see each of
// recs under each key: a record naming no groups under a key is not
// restricted by it; a malformed value is never visible.
func everyRecordVisible(recs []Record, keys, groups []string) bool {
	for _, r := range recs {
		for _, k := range keys {
			gs, ok := groupsMeta(r.Meta, k)
			if !ok || len(gs) > 0 && !slices.ContainsFunc(gs, func(g string) bool { return slices.Contains(groups, g) }) {
				return false
			}
		}
	}
	return true
}
