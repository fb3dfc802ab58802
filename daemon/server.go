package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/chromafs/chromafs/api"
	"github.com/chromafs/chromafs/internal/peercred"
)

// Listen opens the API's unix socket at path: mode 0660, group gid (-1:
// the daemon's), its directory made 0755 if missing. A socket left by a
// daemon that is gone is replaced; one that answers is not.
func Listen(path string, gid int) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("socket %s: another chromafsd answers there", path)
	}
	if st, err := os.Lstat(path); err == nil && st.Mode()&os.ModeSocket != 0 {
		_ = os.Remove(path)
	}
	old := syscall.Umask(0o117) // the socket is made 0660, never wider for a moment
	l, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			l.Close()
			return nil, fmt.Errorf("socket group: %w", err)
		}
	}
	return l, nil
}

// LookupGroup reads --socket-group: a group name or a gid.
func LookupGroup(s string) (int, error) {
	if n, err := strconv.Atoi(s); err == nil && n >= 0 {
		return n, nil
	}
	g, err := user.LookupGroup(s)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(g.Gid)
}

// Server returns the API's HTTP server: every request carries its peer's
// credentials, read from the connection (a connection whose peer cannot
// be told is refused). Serve it on Listener(l), which bounds the
// connections each peer may hold; its timeouts close the connections
// that idle or trickle.
func (d *Daemon) Server() *http.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/attach", d.handleAttach)
	mux.HandleFunc("POST /v1/detach", d.handleDetach)
	mux.HandleFunc("GET /v1/list", d.handleList)
	mux.HandleFunc("POST /v1/refresh", d.handleRefresh)
	mux.HandleFunc("GET /v1/health", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, http.StatusOK, map[string]bool{"ok": true}) })
	return &http.Server{
		Handler:           d.withPeer(mux),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second, // a body is 64 KiB at most
		// no WriteTimeout: it would run from the request's arrival, and
		// drop the answer of a call that waited and succeeded (an attach
		// that mounted, its caller told it failed); writeJSON bounds the
		// writing of each answer instead
		IdleTimeout:    d.cfg.APIIdle,
		MaxHeaderBytes: 16 << 10,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if pc, ok := c.(*peerConn); ok {
				return peercred.With(ctx, pc.cred)
			}
			cred, err := peercred.FromConn(c)
			if err != nil {
				d.log.Warn("a connection without peer credentials", "err", err)
				return ctx
			}
			return peercred.With(ctx, cred)
		},
	}
}

// Listener wraps the API's listener l so that no user but root holds more
// than Config.MaxConnsPerPeer connections, and all of them together no
// more than Config.MaxConns: a connection past its peer's share is
// answered 503 and closed at once. Root's are never refused (root is
// whom the bounds keep room for).
func (d *Daemon) Listener(l net.Listener) net.Listener {
	return &peerListener{Listener: l, d: d}
}

// withPeer refuses requests whose peer is unknown and logs every call with
// its peer.
func (d *Daemon) withPeer(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cred, ok := peercred.From(r.Context())
		if !ok {
			writeError(w, &Error{Code: api.CodeRefused, Err: errors.New("who is asking is unknown (not a unix socket?)")})
			return
		}
		start := time.Now()
		next.ServeHTTP(w, r)
		d.log.Info("api", "method", r.Method, "path", r.URL.Path, "peer", cred.String(), "took", time.Since(start).Round(time.Microsecond))
	})
}

// maxBody bounds a request's body.
const maxBody = 64 << 10

func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return &Error{Code: api.CodeBadRequest, Err: fmt.Errorf("request body: %w", err)}
	}
	return nil
}

func (d *Daemon) handleAttach(w http.ResponseWriter, r *http.Request) {
	cred, _ := peercred.From(r.Context())
	var req api.AttachRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 4*d.cfg.Conn.Timeout)
	defer cancel()
	a, err := d.Attach(ctx, cred, req)
	if err != nil {
		d.log.Info("attach refused", "collection", req.Collection, "path", req.Path, "peer", cred.String(), "err", err)
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

func (d *Daemon) handleDetach(w http.ResponseWriter, r *http.Request) {
	cred, _ := peercred.From(r.Context())
	var req api.DetachRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if (req.ID == "") == (req.Path == "") {
		writeError(w, &Error{Code: api.CodeBadRequest, Err: errors.New("name the attachment by its id or its path")})
		return
	}
	a, err := d.Detach(cred, req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

func (d *Daemon) handleList(w http.ResponseWriter, r *http.Request) {
	cred, _ := peercred.From(r.Context())
	writeJSON(w, http.StatusOK, d.Status(cred.UID))
}

func (d *Daemon) handleRefresh(w http.ResponseWriter, r *http.Request) {
	cred, _ := peercred.From(r.Context())
	var req api.RefreshRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	n, err := d.Refresh(cred.UID, req.Collection)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, api.RefreshResult{Checked: n})
}

// statusOf is the HTTP status of an API code.
var statusOf = map[string]int{
	api.CodeBadRequest: http.StatusBadRequest, api.CodeRefused: http.StatusForbidden, api.CodeNotFound: http.StatusNotFound,
	api.CodeInUse: http.StatusConflict, api.CodeUnavailable: http.StatusServiceUnavailable, api.CodeInternal: http.StatusInternalServerError,
}

func writeError(w http.ResponseWriter, err error) {
	code := codeOf(err)
	writeJSON(w, statusOf[code], api.Error{Error: err.Error(), Code: code})
}

// answerWithin bounds the writing of an answer: a client that does not
// read it does not hold the connection.
const answerWithin = 10 * time.Second

func writeJSON(w http.ResponseWriter, status int, v any) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(answerWithin))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// connLimiter counts the API connections open per uid.
type connLimiter struct {
	perPeer, total int
	mu             sync.Mutex
	open           map[uint32]int // by uid, root's not counted
	all            int
	refusing       int // refusals being written
}

func newConnLimiter(perPeer, total int) *connLimiter {
	return &connLimiter{perPeer: perPeer, total: total, open: map[uint32]int{}}
}

// admit counts a new connection of uid, or says why it is refused.
func (c *connLimiter) admit(uid uint32) string {
	if uid == 0 {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.open[uid] >= c.perPeer:
		return fmt.Sprintf("uid %d holds %d connections to chromafsd, its bound: close some (a client keeps at most a few)", uid, c.open[uid])
	case c.all >= c.total:
		return fmt.Sprintf("chromafsd holds %d connections of its users, its bound: try again later", c.all)
	}
	c.open[uid]++
	c.all++
	return ""
}

func (c *connLimiter) release(uid uint32) {
	if uid == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[uid]--; c.open[uid] <= 0 {
		delete(c.open, uid)
	}
	c.all--
}

// maxRefusing bounds the refusals written at once; past it a refused
// connection is closed without an answer.
const maxRefusing = 64

// peerListener admits connections through the daemon's connLimiter.
type peerListener struct {
	net.Listener
	d *Daemon
}

func (l *peerListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		cred, err := peercred.FromConn(c)
		if err != nil {
			l.d.log.Warn("a connection without peer credentials", "err", err)
			_ = c.Close()
			continue
		}
		lim := l.d.conns
		if why := lim.admit(cred.UID); why != "" {
			l.refuse(c, why)
			continue
		}
		return &peerConn{Conn: c, cred: cred, lim: lim}, nil
	}
}

// refuse answers c 503 with an API error saying why, and closes it, in a
// goroutine bounded in time and in number.
func (l *peerListener) refuse(c net.Conn, why string) {
	lim := l.d.conns
	lim.mu.Lock()
	busy := lim.refusing >= maxRefusing
	if !busy {
		lim.refusing++
	}
	lim.mu.Unlock()
	if busy {
		_ = c.Close()
		return
	}
	go func() {
		defer func() {
			lim.mu.Lock()
			lim.refusing--
			lim.mu.Unlock()
		}()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		// the request is read (not answered) first: closing a socket with
		// unread data resets it, and the client would see that instead
		buf := make([]byte, 4096)
		_, _ = c.Read(buf)
		body, _ := json.Marshal(api.Error{Error: why, Code: api.CodeUnavailable})
		fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}()
}

// peerConn is an admitted connection: its peer's credentials, read once,
// and its share given back when it closes.
type peerConn struct {
	net.Conn
	cred peercred.Cred
	lim  *connLimiter
	once sync.Once
}

func (c *peerConn) Close() error {
	c.once.Do(func() { c.lim.release(c.cred.UID) })
	return c.Conn.Close()
}
