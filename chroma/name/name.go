// Package name holds Chroma's rules for the names of collections,
// tenants and databases, checked before any request is made with them.
// It imports nothing of chroma-go, so that the policy and the front ends
// can check names without it.
//
// chroma-go puts names into request paths (url.JoinPath, which resolves
// "..": a collection named "../../vault/collections/payroll" would address
// database "vault"), and chromafsd takes collection names from clients
// that must not reach another database with its token. So a name must be
// one the Chroma server itself accepts, and those never leave their path
// segment.
package name

import (
	"fmt"
	"net/netip"
	"strings"
)

// maxName is the longest name Chroma accepts.
const maxName = 512

// CheckCollection returns nil when name is a collection name Chroma
// accepts: 3-512 characters from [a-zA-Z0-9._-], starting and ending with
// a letter or digit, without two consecutive periods, and not an IP
// address (the server's own rule, rust/types validators).
func CheckCollection(name string) error {
	return checkName("collection", name, true)
}

// CheckTenantOrDatabase returns nil when name may be a tenant's or a
// database's: Chroma asks 3 characters at least; chromafs also keeps them
// to the characters of a collection name (no '/', '%', '?', '#', space or
// "..") so that they too stay in their path segment.
func CheckTenantOrDatabase(kind, name string) error {
	return checkName(kind, name, false)
}

func checkName(kind, name string, collection bool) error {
	bad := func(why string) error {
		return fmt.Errorf("%s name %q: %s", kind, truncate(name, 80), why)
	}
	if len(name) < 3 || len(name) > maxName {
		return bad(fmt.Sprintf("want 3 to %d characters", maxName))
	}
	for i := 0; i < len(name); i++ {
		if !nameByte(name[i]) {
			return bad("want only letters, digits, '.', '_' and '-'")
		}
	}
	if strings.Contains(name, "..") {
		return bad("two consecutive periods")
	}
	if !collection {
		return nil
	}
	if !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return bad("want a letter or a digit first and last")
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return bad("an IP address is not a collection name")
	}
	return nil
}

func nameByte(b byte) bool { return alnum(b) || b == '.' || b == '_' || b == '-' }

func alnum(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9'
}

// truncate shortens s for a message (a hostile name may be long).
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
