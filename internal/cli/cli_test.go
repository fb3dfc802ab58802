package cli

import (
	"errors"
	"flag"
	"strings"
	"testing"
)

func TestQuietErrorsUsageOnHelp(t *testing.T) {
	var out strings.Builder
	fs := New("cmd", "Usage: cmd [flags]\n", &out)
	fs.Int("n", 1, "a number")
	if err := fs.Parse([]string{"--nope"}); err == nil || out.Len() != 0 {
		t.Errorf("unknown flag: err %v, printed %q", err, out.String())
	}
	if err := fs.Parse([]string{"--help"}); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "Usage: cmd") || !strings.Contains(out.String(), "a number") {
		t.Errorf("--help: err %v, printed %q", err, out.String())
	}
}
