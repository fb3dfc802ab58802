// Package cli holds what both commands do alike with their flags: errors
// come back from Parse for the caller to print in one line, and the usage
// is printed only when asked for with -h or --help.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
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
	if errors.Is(err, flag.ErrHelp) {
		f.SetOutput(f.out)
		fmt.Fprint(f.out, f.usage)
		f.PrintDefaults()
		f.SetOutput(io.Discard)
	}
	return err
}
