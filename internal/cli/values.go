package cli

import (
	"flag"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// durationValue is a time.Duration flag that says what it expects: a unit
// ("10" gets "write 10s"), and a positive value unless zero is allowed.
type durationValue struct {
	d         *time.Duration
	allowZero bool
}

// Duration defines a duration flag that refuses negative values, zero
// unless allowZero, and numbers without a unit.
func Duration(fs *flag.FlagSet, p *time.Duration, name string, def time.Duration, allowZero bool, usage string) {
	*p = def
	fs.Var(&durationValue{d: p, allowZero: allowZero}, name, usage)
}

func (v *durationValue) String() string {
	if v.d == nil {
		return ""
	}
	return v.d.String()
}

func (v *durationValue) Set(s string) error {
	if _, err := strconv.ParseFloat(s, 64); err == nil && s != "0" {
		return fmt.Errorf("%q has no unit: write %ss (or ms, m, h)", s, s)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration like 10s, 500ms or 2m", s)
	}
	if d < 0 || (d == 0 && !v.allowZero) {
		want := "more than 0"
		if v.allowZero {
			want = "0 or more"
		}
		return fmt.Errorf("%s: want %s", s, want)
	}
	*v.d = d
	return nil
}

// Version is "NAME VERSION (REVISION[, modified]; GO)": the version set at
// build time (or the module's), and the VCS revision the binary was built
// from when the build recorded one.
func Version(name, version string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return name + " " + version
	}
	if version == "dev" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		version = bi.Main.Version
	}
	var rev, modified string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = ", modified"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		rev = "no VCS revision recorded"
	}
	return fmt.Sprintf("%s %s (%s%s; %s)", name, version, rev, modified, bi.GoVersion)
}

// Groups splits a comma-separated list of access group names; a name
// with white space in it is an error (a space is not a separator).
func Groups(s string) ([]string, error) {
	var out []string
	for _, g := range strings.Split(s, ",") {
		g = strings.TrimSpace(g)
		if g == "" {
			continue
		}
		if strings.IndexFunc(g, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' }) >= 0 {
			return nil, fmt.Errorf("group %q has white space in it: separate groups with commas (a,b)", g)
		}
		out = append(out, g)
	}
	return out, nil
}
