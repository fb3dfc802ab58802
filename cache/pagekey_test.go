package cache

import (
	"strings"
	"testing"
)

// TestPageKeyNames pins the names entries already on disk and in Redis
// carry: a change here would orphan every existing entry.
func TestPageKeyNames(t *testing.T) {
	const sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	tests := []struct {
		key  PageKey
		want string
	}{
		{PageKey{Collection: "default_tenant/default_database/0123", SHA256: sha}, "674f3063d0d9e660f1a8b1c6c076d32408519e3ab846339c6e146b314d03c3b8"},
		{PageKey{Collection: "t/d/id", SHA256: sha, Part: "0-12"}, "ebbe71256c3b31d779f4f6719f29ca367a08e76fa48b9657cfd62fe8240c53ee"},
	}
	for _, tt := range tests {
		if got := tt.key.Name(); got != tt.want {
			t.Errorf("%+v.Name() = %s, want %s", tt.key, got, tt.want)
		}
	}
}

// Name is on every read of a host tier or Redis: one allocation, its
// result, however long the collection's name (up to the room on the stack).
func TestNameAllocatesItsResultOnly(t *testing.T) {
	k := PageKey{Collection: "7f0c1d9e-2b1a-4c55-9b0e-3f3a2d1c0b9a", SHA256: strings.Repeat("e3", 32), Part: "3-5"}
	if n := testing.AllocsPerRun(100, func() { _ = k.Name() }); n != 1 {
		t.Errorf("Name allocates %.0f times, want 1", n)
	}
}
