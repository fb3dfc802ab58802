package mountstart

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http/httpproxy"

	"github.com/chromafs/chromafs/internal/netdial"
)

// The first connection of a --daemon mount. A cold mount's critical path
// is its round trips to Chroma: the handshakes of a new connection, then
// the collection, then the tree. The serving process (the child Start
// runs) spends its first ~10 ms starting before it can dial; the parent,
// already running, dials meanwhile and hands the connection over on a
// socket pair (SCM_RIGHTS), with the address it dialed. The child's first
// dial to that address adopts it; the transport does TLS on it as on any
// connection, and checks the server's certificate against the URL's host
// as always. A dial that failed in the parent fails the child's first
// dial with the parent's error, as its own dial would have failed a
// moment later (the mount then fails, or retries, as it would have).
// Whatever else goes wrong (a proxy in the way, another address, no word
// from the parent, a first dial after the mount's first commands) leaves
// the child to dial as it always did.

// ConnEnv names, in a daemon child's environment, the file descriptor of
// its end of the socket pair.
const ConnEnv = "CHROMAFS_DAEMON_CONN_FD"

// FirstHop is the address a connection to the Chroma server at rawURL
// dials first ("host:port"), or "" when there is none to hand over: a
// URL that is not http(s), or a proxy from the environment in the way
// (HTTPS_PROXY, HTTP_PROXY, NO_PROXY, read as net/http's
// ProxyFromEnvironment, the store's transport's, reads them).
func FirstHop(rawURL string) string {
	return firstHop(rawURL, httpproxy.FromEnvironment().ProxyFunc())
}

// firstHop is FirstHop with proxy saying which proxy a URL goes through.
func firstHop(rawURL string, proxy func(*url.URL) (*url.URL, error)) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return ""
	}
	port := u.Port()
	switch {
	case u.Scheme == "http" && port == "":
		port = "80"
	case u.Scheme == "https" && port == "":
		port = "443"
	case u.Scheme != "http" && u.Scheme != "https":
		return ""
	}
	if p, err := proxy(u); err != nil || p != nil {
		return ""
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// handOff is the parent's side: the socket pair's two ends, the child's
// to pass in ExtraFiles.
type handOff struct {
	addr        string
	mine, child *os.File
}

// newHandOff makes the socket pair for a connection to addr, or returns
// nil (no hand-off) when addr is "" or longer than a message carries, or
// the pair cannot be made.
func newHandOff(addr string) *handOff {
	if addr == "" || len(addr) > maxAddr {
		return nil
	}
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return &handOff{addr: addr, mine: os.NewFile(uintptr(fds[0]), "chroma-handoff"), child: os.NewFile(uintptr(fds[1]), "chroma-handoff")}
}

// send dials the address and sends the connection on the pair with the
// address, or the dial's error, then closes its end. The pair holds the
// message until the child reads it, so send may start before the child
// does; run it in a goroutine.
func (h *handOff) send(ctx context.Context) {
	defer h.mine.Close()
	kind, rights, said := byte(handedConn), []byte(nil), ""
	c, err := netdial.Dialer().DialContext(ctx, "tcp", h.addr)
	if err == nil {
		defer c.Close() // the child gets its own descriptor
		var f *os.File
		if f, err = c.(*net.TCPConn).File(); err == nil {
			defer f.Close()
			rights = syscall.UnixRights(int(f.Fd()))
		}
	}
	if err != nil {
		kind, said = handedError, err.Error()[:min(len(err.Error()), maxHandedError)]
	}
	msg := append(append(append([]byte{kind}, h.addr...), 0), said...)
	_ = syscall.Sendmsg(int(h.mine.Fd()), msg, rights, nil, syscall.MSG_NOSIGNAL)
}

// The parent's message: its first byte says what it carries, a
// connection (with the descriptor) or the text of the dial's error (at
// most maxHandedError bytes); then the address it dialed, a NUL byte, and
// that text. An address is at most maxAddr bytes (a host name's 253, a
// port): a longer one is not handed over.
const (
	handedConn     = 1
	handedError    = 2
	maxHandedError = 1024
	maxAddr        = 512
)

// handedDialError is the parent's failed dial, as the child's first
// dial returns it: a net.Error, so the store calls Chroma unreachable as
// it would have for its own dial.
type handedDialError string

func (e handedDialError) Error() string   { return string(e) }
func (e handedDialError) Timeout() bool   { return strings.Contains(string(e), "timeout") }
func (e handedDialError) Temporary() bool { return false }

// started closes the parent's copy of the child's end, once the child
// holds its own (or failed to start).
func (h *handOff) started() {
	if h != nil {
		h.child.Close()
	}
}

// Adopter is the child's side: a dial function for chroma.Config.Dial
// whose first call to addr takes the parent's connection.
type Adopter struct {
	addr    string
	from    *os.File
	claimed atomic.Bool   // the first dial, or Close, has taken from
	wait    time.Duration // the most the first dial waits for the parent
	dial    func(ctx context.Context, network, addr string) (net.Conn, error)
	taken   atomic.Bool // the first dial got the parent's connection
}

// AdopterFromEnv returns the child's adopter of a connection to the
// Chroma server at rawURL when its parent passed a socket pair (ConnEnv,
// in a daemon child only, and only a descriptor that is such a socket),
// else nil.
func AdopterFromEnv(rawURL string) *Adopter {
	v := os.Getenv(ConnEnv)
	_ = os.Unsetenv(ConnEnv) // not for what this process runs
	var fd int
	if v == "" || os.Getenv(DaemonEnv) == "" {
		return nil
	} else if _, err := fmt.Sscan(v, &fd); err != nil || fd < 3 || !isHandOffSocket(fd) {
		return nil
	}
	syscall.CloseOnExec(fd)
	return newAdopter(FirstHop(rawURL), os.NewFile(uintptr(fd), "chroma-handoff"))
}

// isHandOffSocket reports whether fd is a Unix socket of the kind
// newHandOff makes (a descriptor the variable names by mistake, the
// runtime's own, is left alone).
func isHandOffSocket(fd int) bool {
	typ, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TYPE)
	if err != nil || typ != syscall.SOCK_SEQPACKET {
		return false
	}
	domain, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_DOMAIN)
	return err == nil && domain == syscall.AF_UNIX
}

func newAdopter(addr string, from *os.File) *Adopter {
	// the parent's dial is Dialer's, bounded at its timeout; a little more
	// for the message to arrive
	return &Adopter{addr: addr, from: from, wait: netdial.Dialer().Timeout + time.Second, dial: netdial.Dialer().DialContext}
}

// DialContext adopts the parent's connection on its first call, if that
// call is to the address the parent dialed (or fails with the parent's
// error); every other call dials, at once.
func (a *Adopter) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if a.claimed.CompareAndSwap(false, true) {
		if c, err := a.first(ctx, network, addr); c != nil || err != nil {
			return c, err
		}
	}
	return a.dial(ctx, network, addr)
}

func (a *Adopter) first(ctx context.Context, network, addr string) (net.Conn, error) {
	defer a.from.Close()
	if addr != a.addr || a.addr == "" || network != "tcp" && network != "tcp4" && network != "tcp6" {
		return nil, nil
	}
	c, err := a.receive(ctx)
	a.taken.Store(c != nil)
	return c, err
}

// Close gives up the parent's connection if no dial took it: a dial
// after that dials (a connection left idle since the mount started may
// be closed by then).
func (a *Adopter) Close() {
	if a != nil && a.claimed.CompareAndSwap(false, true) {
		a.from.Close()
	}
}

// receive waits for the parent's message, until ctx ends or a.wait
// passes, and returns the connection it carried or the error it
// reported; neither when there was no message, or one it cannot read.
func (a *Adopter) receive(ctx context.Context) (net.Conn, error) {
	deadline := time.Now().Add(a.wait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	fc, err := net.FileConn(a.from)
	if err != nil {
		return nil, nil
	}
	defer fc.Close()
	uc, ok := fc.(*net.UnixConn)
	if !ok {
		return nil, nil
	}
	stop := context.AfterFunc(ctx, func() { _ = uc.SetReadDeadline(time.Now()) })
	defer stop()
	_ = uc.SetReadDeadline(deadline)
	buf, oob := make([]byte, 1+maxAddr+1+maxHandedError), make([]byte, syscall.CmsgSpace(4))
	n, oobn, flags, _, err := uc.ReadMsgUnix(buf, oob)
	fds := receivedFDs(oob[:oobn])
	var kind byte
	var addr, said string
	if err == nil && n >= 1 && flags&(syscall.MSG_TRUNC|syscall.MSG_CTRUNC) == 0 {
		kind = buf[0]
		addr, said, _ = strings.Cut(string(buf[1:n]), "\x00")
	}
	if kind != handedConn || addr != a.addr || len(fds) != 1 {
		for _, fd := range fds {
			_ = syscall.Close(fd)
		}
		if kind == handedError && addr == a.addr {
			return nil, handedDialError(strings.ToValidUTF8(said, ""))
		}
		return nil, nil // a dial to another address is no answer for this one
	}
	f := os.NewFile(uintptr(fds[0]), "chroma-conn")
	defer f.Close() // FileConn holds its own descriptor
	c, err := net.FileConn(f)
	if err != nil {
		return nil, nil
	}
	if _, ok := c.(*net.TCPConn); !ok {
		c.Close()
		return nil, nil
	}
	return c, nil
}

// receivedFDs are the descriptors a message's control data carries, each
// closed on exec.
func receivedFDs(oob []byte) []int {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		got, err := syscall.ParseUnixRights(&msgs[i])
		if err != nil {
			continue
		}
		for _, fd := range got {
			syscall.CloseOnExec(fd)
		}
		fds = append(fds, got...)
	}
	return fds
}

// Said is what the mounted line says of the first connection: "parent"
// when it was the parent's, "own" otherwise (also when this is no
// daemon child, or the mount made no request).
func (a *Adopter) Said() string {
	if a != nil && a.taken.Load() {
		return "parent"
	}
	return "own"
}
