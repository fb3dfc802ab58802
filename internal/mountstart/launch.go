package mountstart

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ServeName is the command the launcher starts: chromafs-mount itself,
// installed beside the launcher (scripts/install.sh, go install
// ./cmd/...).
const ServeName = "chromafs-mount-serve"

// Launch is the launcher's main (cmd/chromafs-mount): it starts a --daemon
// mount whose arguments it reads for certain (Start), and hands every
// other call to the command by exec. argv is the process's arguments; it
// returns the exit status when it does not exec.
func Launch(argv []string) int {
	serve, err := serveBinary()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", Name, err)
		return 1
	}
	if r := Scan(argv[1:]); r.Daemon && filepath.Base(argv[0]) == Name && os.Getenv(DaemonEnv) == "" {
		return Start(serve, argv[1:], r.URL)
	}
	err = syscall.Exec(serve, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "%s: run %s: %v\n", Name, serve, err)
	return 1
}

// serveBinary is the path of the command, beside this binary.
func serveBinary() (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find %s: %w", ServeName, err)
	}
	p := filepath.Join(filepath.Dir(self), ServeName)
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("%s is the command chromafs-mount starts, and it is not beside %s: install both (scripts/install.sh, or go install ./cmd/...): %w", ServeName, self, err)
	}
	return p, nil
}

// Flags are chromafs-mount's flags, each with whether it is a boolean
// (takes no value after it): the launcher reads arguments as the
// command's flag set (Go's package flag) does. A test of the command
// (package mountcmd) keeps it equal to the flag set.
var Flags = map[string]bool{
	"access-log": false, "allow-other": true, "cache-dir": false, "cache-redis": false,
	"cache-redis-password-file": false, "cache-redis-timeout": false, "cache-redis-ttl": false,
	"cache-size": false, "chroma-url": false, "collection": false, "daemon": true, "database": false,
	"debug": true, "disk-cache-size": false, "embedding": false, "embedding-allow": false,
	"embedding-config": false, "fsname": false, "groups": false, "groups-key": false,
	"host-requests": false, "layout": false, "lazy-allow": false, "log-file": false,
	"metrics-addr": false, "o": false, "offset-key": false, "offset-unit": false, "order-key": false,
	"path-key": false, "pid-file": false, "prefetch": false, "push-pages": true, "refresh": false,
	"reload": true, "scan-limit": false, "search": true, "search-prebuild": true, "tenant": false,
	"timeout": false, "token-file": false, "unmount": true, "version": true,
}

// Request is what the launcher reads from a command line.
type Request struct {
	Daemon bool   // a --daemon mount for certain (not --reload, --unmount, --version or --help)
	URL    string // the Chroma URL it names (--chroma-url, -o chroma_url=, env CHROMA_URL), or ""
}

// Scan reads a command line's arguments as the command does: flags, one
// MOUNTPOINT, and flags again after it (a mount helper's order). Whatever
// it cannot read for certain (an unknown flag, "--", a bad value, more
// than one argument) is no Daemon: the command reads it. An unset URL is
// "" (the command's default is this host, where a handed connection saves
// nothing).
func Scan(args []string) Request {
	set := map[string]string{}
	positional := 0
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			if positional++; positional > 1 {
				return Request{}
			}
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		isBool, known := Flags[name]
		switch {
		case !known:
			return Request{} // "--", "-h", a flag of another version: the command's to read
		case isBool && !hasValue:
			value = "true"
		case !isBool && !hasValue:
			if i++; i == len(args) {
				return Request{}
			}
			value = args[i]
		}
		if name == "o" {
			if !mountOpts(value, set) {
				return Request{}
			}
			continue
		}
		set[name] = value
	}
	r := Request{URL: os.Getenv("CHROMA_URL")}
	if u, ok := set["chroma-url"]; ok {
		r.URL = u
	}
	r.Daemon = positional == 1 && is(set["daemon"]) && !is(set["reload"]) && !is(set["unmount"]) && !is(set["version"])
	for name, v := range set {
		if _, err := strconv.ParseBool(v); Flags[name] && err != nil {
			r.Daemon = false // a usage error: the command's to say
		}
	}
	return r
}

// mountOpts reads -o's options into set as the command does (its
// mountOpts): the keys that are flags, with _ for -; it reports false for
// an option the command refuses.
func mountOpts(s string, set map[string]string) bool {
	for _, kv := range strings.Split(s, ",") {
		key, val, hasVal := strings.Cut(kv, "=")
		name := strings.ReplaceAll(key, "_", "-")
		_, known := Flags[name]
		switch {
		case name == "rw" || name == "token" || name == "chroma-token":
			return false
		case !known || name == "o":
			continue // generic, or FUSE's
		case !hasVal:
			val = "true"
		}
		set[name] = val
	}
	return true
}

func is(v string) bool { b, _ := strconv.ParseBool(v); return b }
