package name

import (
	"strings"
	"testing"
)

func TestCheckCollection(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"docs", true},
		{"it-my-test-123", true},
		{"a.b_c-d", true},
		{"Docs9", true},
		{strings.Repeat("a", 512), true},
		{"ab", false},
		{strings.Repeat("a", 513), false},
		{"../../vault/collections/payroll", false},
		{"a/b", false},
		{"docs%2f..%2fx", false},
		{"a..b", false},
		{".docs", false},
		{"docs-", false},
		{"do cs", false},
		{"docs?x", false},
		{"docs#x", false},
		{"192.168.1.1", false},
		{"dócs", false},
		{"", false},
	} {
		if err := CheckCollection(c.name); (err == nil) != c.ok {
			t.Errorf("%q: %v, want ok %v", c.name, err, c.ok)
		}
	}
}

func TestCheckTenantOrDatabase(t *testing.T) {
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"default_tenant", true},
		{"default_database", true},
		{"6b1e6f2e-1c8b-4d0e-9b0e-3f1f4a2b9c77", true},
		{"_db_", true},
		{"db", false},
		{"../vault", false},
		{"a/b", false},
		{"a..b", false},
		{"x y z", false},
	} {
		if err := CheckTenantOrDatabase("database", c.name); (err == nil) != c.ok {
			t.Errorf("%q: %v, want ok %v", c.name, err, c.ok)
		}
	}
}
