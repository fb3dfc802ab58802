package cli

import (
	"fmt"
	"os"
	"strings"
)

// Secret reads a secret the way both commands take them: from the file at
// path when given (refused unless only its owner can read it, and when
// empty), else from the environment variable env ("" when unset). what
// names it in errors ("token file"). Secrets never come from argv.
func Secret(what, path, env string) (string, error) {
	if path == "" {
		return strings.TrimSpace(os.Getenv(env)), nil
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return "", fmt.Errorf("%s %s has mode %04o: it must not be readable by group or others (chmod 600 %s)", what, path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", what, err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("%s %s is empty", what, path)
	}
	return s, nil
}
