package cli

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestQuietErrorsUsageOnHelp(t *testing.T) {
	var out strings.Builder
	fs := New("cmd", "Usage: cmd [flags]\n", &out)
	fs.Int("n", 1, "a number")
	if err := fs.Parse([]string{"--nope"}); err == nil || out.Len() != 0 {
		t.Errorf("unknown flag: err %v, printed %q", err, out.String())
	}
	fs.Bool("b", false, "a switch")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--n", "many"}, `--n "many": want a whole number (default 1`},
		{[]string{"--n=99999999999999999999"}, "want a smaller whole number"},
		{[]string{"--b=maybe"}, `--b "maybe": want true or false`},
	} {
		if err := fs.Parse(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
	if err := fs.Parse([]string{"--help"}); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "Usage: cmd") || !strings.Contains(out.String(), "a number") {
		t.Errorf("--help: err %v, printed %q", err, out.String())
	}
}

func TestDurationValues(t *testing.T) {
	for _, c := range []struct {
		in        string
		allowZero bool
		ok        bool
		hint      string
	}{
		{"10s", false, true, ""}, {"10", false, false, "write 10s"}, {"0", false, false, "more than 0"},
		{"0", true, true, ""}, {"-1s", true, false, "0 or more"}, {"soon", false, false, "like 10s"},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var d time.Duration
		Duration(fs, &d, "t", time.Second, c.allowZero, "")
		err := fs.Parse([]string{"-t", c.in})
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), c.hint)) {
			t.Errorf("-t %s (zero ok %v): %v", c.in, c.allowZero, err)
		}
	}
}

func TestGroupsAndSizes(t *testing.T) {
	if g, err := Groups(" sre, billing ,,"); err != nil || strings.Join(g, "|") != "sre|billing" {
		t.Errorf("Groups: %q %v", g, err)
	}
	if _, err := Groups("sre billing"); err == nil {
		t.Error(`Groups("sre billing") accepted a space`)
	}
	for _, bad := range []string{"NaN", "-1MiB", "0", "Inf", "lots"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
	for in, want := range map[string]int64{"1TB": 1e12, "1TiB": 1 << 40, "1T": 1 << 40, "256mib": 256 << 20, "1.5G": 3 << 29, "4096": 4096, "2 KB": 2000} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ParseSize("1XB"); err == nil || !strings.Contains(err.Error(), "TiB") {
		t.Errorf("ParseSize(1XB): %v, want the units listed", err)
	}
	if !strings.Contains(Version("x", "dev"), "x ") {
		t.Errorf("Version: %q", Version("x", "dev"))
	}
}
