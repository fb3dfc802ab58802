package ingest

import (
	"reflect"
	"testing"
)

func TestParseAccess(t *testing.T) {
	tests := []struct {
		name    string
		page    string
		def     bool
		want    Access
		wantErr bool
	}{
		{"no frontmatter", "# Title\n", true, Access{Public: true}, false},
		{"no frontmatter, private default", "# Title\n", false, Access{Public: false}, false},
		{"other keys only", "---\ntitle: X\n---\nbody", true, Access{Public: true}, false},
		{"public false", "---\npublic: false\n---\n", true, Access{Public: false}, false},
		{"public true", "---\npublic: true\n---\n", false, Access{Public: true}, false},
		{"groups imply private", "---\ngroups: [admin, billing]\n---\n", true, Access{Groups: []string{"admin", "billing"}}, false},
		{"groups block list", "---\ngroups:\n  - a\n  - b\n---\n", true, Access{Groups: []string{"a", "b"}}, false},
		{"public with groups", "---\npublic: true\ngroups: [a]\n---\n", true, Access{Public: true, Groups: []string{"a"}}, false},
		{"empty groups", "---\ngroups: []\n---\n", true, Access{Public: true}, false},
		{"crlf", "---\r\npublic: false\r\n---\r\nbody", true, Access{Public: false}, false},
		{"bom", "\xef\xbb\xbf---\npublic: false\n---\n", true, Access{Public: false}, false},
		{"dots close", "---\npublic: false\n...\n", true, Access{Public: false}, false},
		{"dashes later are not frontmatter", "text\n---\npublic: false\n---\n", true, Access{Public: true}, false},
		{"public string", "---\npublic: \"no\"\n---\n", true, Access{}, true},
		{"public yes is not a bool", "---\npublic: yes\n---\n", true, Access{}, true},
		{"groups string", "---\ngroups: admin\n---\n", true, Access{}, true},
		{"groups of maps", "---\ngroups: [{a: 1}]\n---\n", true, Access{}, true},
		{"invalid yaml", "---\npublic: [\n---\n", true, Access{}, true},
		{"unclosed", "---\npublic: true\n", true, Access{}, true},
		{"yaml list", "---\n- a\n---\n", true, Access{}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseAccess([]byte(tc.page), tc.def)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("access = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// FuzzParseAccess: never panics, and an error always means hidden.
func FuzzParseAccess(f *testing.F) {
	f.Add([]byte("---\npublic: false\ngroups: [a]\n---\n"))
	f.Add([]byte("---\r\ngroups: [x, y]\r\n...\r\n"))
	f.Add([]byte("---\n&a [*a]\n---\n"))
	f.Fuzz(func(t *testing.T, page []byte) {
		a, err := ParseAccess(page, true)
		if err != nil && (a.Public || len(a.Groups) > 0) {
			t.Fatalf("error %v but access %+v is not closed", err, a)
		}
	})
}
