// Package cli holds what both commands do alike with their flags: errors
// come back from Parse for the caller to print in one line, and the usage
// is printed only when asked for with -h or --help.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
)

// FlagSet is a flag.FlagSet that stays quiet on errors.
type FlagSet struct {
	*flag.FlagSet
	usage string
	out   io.Writer
}

// New returns a FlagSet whose -h/--help prints usage, then the flags, to out.
func New(name, usage string, out io.Writer) *FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // the flag package calls it on every error too
	return &FlagSet{FlagSet: fs, usage: usage, out: out}
}

// Parse parses args; for -h or --help it prints the usage and returns
// flag.ErrHelp.
func (f *FlagSet) Parse(args []string) error {
	err := f.FlagSet.Parse(args)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		return f.explain(err)
	}
	if errors.Is(err, flag.ErrHelp) {
		f.SetOutput(f.out)
		fmt.Fprint(f.out, f.usage)
		f.PrintDefaults()
		f.SetOutput(io.Discard)
	}
	return err
}

// badValue matches the flag package's words for a value its own types
// could not parse ("parse error", "value out of range"), which name
// neither what was wanted nor an example.
var badValue = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-([^:]+): (parse error|value out of range)$`)

// explain rewrites the flag package's bare "parse error" into what the
// flag wants; other errors come back as they are.
func (f *FlagSet) explain(err error) error {
	m := badValue.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	value, name := m[1], m[2]
	fl := f.Lookup(name)
	if fl == nil {
		return err
	}
	want := "a valid value"
	if g, ok := fl.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case int, int64, uint, uint64:
			want = "a whole number"
			if m[3] == "value out of range" {
				want = "a smaller whole number"
			}
		case bool:
			want = "true or false"
		case float64:
			want = "a number"
		}
	}
	return fmt.Errorf("--%s %q: want %s (default %s; see --help)", name, value, want, fl.DefValue)
}
