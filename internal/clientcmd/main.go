// Package clientcmd is the command chromafs, the client of chromafsd, the
// host daemon: it asks for a view of a collection at a path (attach),
// takes it away (detach), lists what the daemon serves and asks it to
// check for new trees. It carries nothing of chroma-go, so it starts in a
// few milliseconds (cmd/chromafs); chromafsd's binary runs it too when
// called by its name (one binary for chromafsd's image). See --help.
package clientcmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/internal/cli"
)

// version is the command's version, Main's.
var version = "dev"

// Name is the command's name: chromafsd's binary runs Main when it is
// called by it.
const Name = "chromafs"

// Main runs the command with args (without the command's name) and
// returns its exit status. v is the binary's version.
func Main(v string, args []string, stdout, stderr io.Writer) int {
	version = v
	return run(args, stdout, stderr)
}

const usage = `Usage: chromafs [--socket PATH] COMMAND [flags] [ARGS]

Asks chromafsd, the host daemon, for views of Chroma collections: the
daemon holds the collections, the token and the caches; a view at a path
is a read-only directory for one conversation, to hand to a sandbox
(bwrap --ro-bind PATH /docs, or docker run --mount type=bind,src=PATH,...).

Commands:
    attach --collection NAME [--groups a,b] [--private] [--access-log FILE] PATH
             place a view at PATH (created if missing: an empty directory
             you own); prints the attachment's id once PATH answers
    detach PATH|ID
             take an attachment away (its view's mount lingers for the
             daemon's --linger, warm for the view's next attach)
    list [--json]
             collections, views (and their lingering mounts) and
             attachments, with files, cached pages, reads, bytes and errors
    refresh [COLLECTION]
             check collections for a new tree now

The socket is --socket, else env CHROMAFS_SOCKET, else
/run/chromafs/chromafsd.sock (root) or $XDG_RUNTIME_DIR/chromafs/chromafsd.sock.

Exit status: 0 done; 1 the daemon refused or failed (one line says why:
unknown collection, refused by the policy, PATH in use, daemon
unreachable); 2 a usage error.

Flags:
`

func run(args []string, stdout, stderr io.Writer) int {
	fs := cli.New("chromafs", usage, stdout)
	socket := fs.String("socket", "", "chromafsd's socket (default: env CHROMAFS_SOCKET, else the daemon's default)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(stderr, "chromafs: %v\n", err)
		return 2
	}
	if *showVersion {
		fmt.Fprintln(stdout, cli.Version("chromafs", version))
		return 0
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "chromafs: want a command: attach, detach, list or refresh (see --help)")
		return 2
	}
	sock := *socket
	if sock == "" {
		sock = os.Getenv(api.SocketEnv)
	}
	if sock == "" {
		sock = api.DefaultSocket()
	}
	if sock == "" {
		fmt.Fprintln(stderr, "chromafs: no socket: pass --socket, set CHROMAFS_SOCKET, or XDG_RUNTIME_DIR for the default")
		return 2
	}
	cmd, ok := commands[fs.Arg(0)]
	if !ok {
		fmt.Fprintf(stderr, "chromafs: unknown command %q: want attach, detach, list or refresh (see --help)\n", fs.Arg(0))
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return cmd(ctx, &env{client: api.NewClient(sock), stdout: stdout, stderr: stderr}, fs.Args()[1:])
}

// env is what a command works with.
type env struct {
	client         *api.Client
	stdout, stderr io.Writer
}

// fail prints the one line of a failed call and returns its exit status.
func (e *env) fail(what string, err error) int {
	fmt.Fprintf(e.stderr, "chromafs %s: %v\n", what, err)
	return 1
}

// usageError prints a usage error and returns 2.
func (e *env) usageError(what string, err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(e.stderr, "chromafs %s: %v\n", what, err)
	return 2
}

var commands = map[string]func(context.Context, *env, []string) int{
	"attach":  attach,
	"detach":  detach,
	"list":    list,
	"refresh": refresh,
}
