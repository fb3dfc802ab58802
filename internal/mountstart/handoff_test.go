package mountstart

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chromafs/chromafs/internal/harness"
)

func TestFirstHop(t *testing.T) {
	none := func(*url.URL) (*url.URL, error) { return nil, nil }
	viaProxy := func(*url.URL) (*url.URL, error) { return url.Parse("http://proxy:3128") }
	for _, c := range []struct {
		url   string
		proxy func(*url.URL) (*url.URL, error)
		want  string
	}{
		{"http://127.0.0.1:8000", none, "127.0.0.1:8000"},
		{"http://chroma.example", none, "chroma.example:80"},
		{"https://chroma.example", none, "chroma.example:443"},
		{"https://chroma.example:8443/base", none, "chroma.example:8443"},
		{"http://[::1]:8000", none, "[::1]:8000"},
		{"https://chroma.example", viaProxy, ""}, // the transport dials the proxy
		{"unix:///run/chroma.sock", none, ""},
		{"127.0.0.1:8000", none, ""},
		{"", none, ""},
	} {
		if got := firstHop(c.url, c.proxy); got != c.want {
			t.Errorf("firstHop(%q) = %q, want %q", c.url, got, c.want)
		}
	}
}

// listener accepts connections on loopback and counts them.
type listener struct {
	net.Listener
	accepted atomic.Int64
	conns    chan net.Conn
}

func listen(t *testing.T) *listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := &listener{Listener: l, conns: make(chan net.Conn, 8)}
	var mu sync.Mutex
	var all []net.Conn
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range all {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			ln.accepted.Add(1)
			mu.Lock()
			all = append(all, c)
			mu.Unlock()
			select {
			case ln.conns <- c:
			default:
			}
		}
	}()
	return ln
}

// handedOver runs a hand-off to addr as Start and a daemon child do, in
// one process (silentParent), the parent sending.
func handedOver(t *testing.T, addr string) *Adopter {
	t.Helper()
	h, a := silentParent(t, addr, addr)
	go h.send(context.Background())
	return a
}

// silentParent is a hand-off whose parent has not sent (yet): the pair
// of a parent that dials parentAddr, the child's adopter of childAddr,
// the parent's copy of the child's end closed as Start closes it. Closing
// h.mine is the parent going away without a word.
func silentParent(t *testing.T, parentAddr, childAddr string) (*handOff, *Adopter) {
	t.Helper()
	h := newHandOff(parentAddr)
	if h == nil {
		t.Fatal("no socket pair")
	}
	// the child's end is a copy of the pair's, as the child's exec gives it one
	fd, err := syscall.Dup(int(h.child.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	h.started()
	return h, newAdopter(childAddr, os.NewFile(uintptr(fd), "child end"))
}

func TestHandOffAdoptsTheParentsConnection(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	a := handedOver(t, addr)
	c, err := a.DialContext(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !a.taken.Load() || a.Said() != "parent" {
		t.Fatalf("the first dial did not take the parent's connection (said %q)", a.Said())
	}
	// it is the connection the parent opened: the one the server accepted
	var srv net.Conn
	select {
	case srv = <-ln.conns:
	case <-time.After(10 * time.Second):
		t.Fatal("the server accepted nothing")
	}
	if _, err := c.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4)
	_ = srv.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(srv, got); err != nil || string(got) != "ping" {
		t.Fatalf("the server read %q, %v through the adopted connection", got, err)
	}
	if n := ln.accepted.Load(); n != 1 {
		t.Fatalf("the server accepted %d connections, want the parent's only", n)
	}
	// the next dial is the child's own
	c2, err := a.DialContext(t.Context(), "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	waitAccepted(t, ln, 2)
}

func waitAccepted(t *testing.T, ln *listener, n int64) {
	t.Helper()
	if harness.Poll(10*time.Second, time.Millisecond, func() bool { return ln.accepted.Load() >= n }) != nil {
		t.Fatalf("the server accepted %d connections, want %d", ln.accepted.Load(), n)
	}
}

func TestHandOffFallsBack(t *testing.T) {
	t.Run("the parent's dial failed: its error, then own dials", func(t *testing.T) {
		ln := listen(t)
		closed := ln.Addr().String()
		ln.Close() // nothing listens there now: the parent's dial is refused
		a := handedOver(t, closed)
		_, err := a.DialContext(t.Context(), "tcp", closed)
		var ne net.Error
		if err == nil || !errors.As(err, &ne) || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("first dial: %v, want the parent's refused dial as a net.Error", err)
		}
		if a.taken.Load() {
			t.Fatal("taken without a connection")
		}
		live := listen(t)
		c, err := a.DialContext(t.Context(), "tcp", live.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	})
	t.Run("another address: dials at once, the parent's connection unused", func(t *testing.T) {
		parent, own := listen(t), listen(t)
		h, a := silentParent(t, parent.Addr().String(), parent.Addr().String()) // the parent never sends: a wait for it would last a.wait
		defer h.mine.Close()
		start := time.Now()
		c, err := a.DialContext(t.Context(), "tcp", own.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if took := time.Since(start); took > time.Second {
			t.Fatalf("a dial to another address waited %v for the parent", took)
		}
		waitAccepted(t, own, 1)
		if a.taken.Load() || parent.accepted.Load() != 0 {
			t.Fatal("the parent's address was used")
		}
	})
	t.Run("the parent dialed another address: neither its connection nor its error", func(t *testing.T) {
		other := listen(t)
		refused := listen(t)
		refusedAddr := refused.Addr().String()
		refused.Close()
		for _, parentAddr := range []string{other.Addr().String(), refusedAddr} {
			own := listen(t)
			h, a := silentParent(t, parentAddr, own.Addr().String())
			go h.send(context.Background())
			c, err := a.DialContext(t.Context(), "tcp", own.Addr().String())
			if err != nil {
				t.Fatalf("parent dialed %s: %v", parentAddr, err)
			}
			c.Close()
			waitAccepted(t, own, 1)
			if a.taken.Load() {
				t.Fatalf("the connection the parent opened to %s was taken for another address", parentAddr)
			}
		}
	})
	t.Run("no word from the parent: own dial", func(t *testing.T) {
		ln := listen(t)
		addr := ln.Addr().String()
		h, a := silentParent(t, addr, addr)
		h.mine.Close() // the parent is gone before sending
		start := time.Now()
		c, err := a.DialContext(t.Context(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if took := time.Since(start); took > time.Second {
			t.Fatalf("the dial waited %v for a parent that was gone", took)
		}
		if a.taken.Load() {
			t.Fatal("taken, with no message")
		}
		waitAccepted(t, ln, 1)
	})
	t.Run("the parent is slow: the dial's context bounds the wait", func(t *testing.T) {
		ln := listen(t)
		addr := ln.Addr().String()
		h, a := silentParent(t, addr, addr)
		defer h.mine.Close() // never sends
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		start := time.Now()
		c, err := a.DialContext(ctx, "tcp", addr)
		if err == nil {
			c.Close()
			t.Fatal("a dial whose context ended succeeded")
		}
		if took := time.Since(start); took > 5*time.Second || a.taken.Load() {
			t.Fatalf("the dial took %v (taken %v): its context did not bound the wait", took, a.taken.Load())
		}
	})

	t.Run("closed before the first dial: own dial, the parent's connection dropped", func(t *testing.T) {
		ln := listen(t)
		addr := ln.Addr().String()
		a := handedOver(t, addr)
		a.Close()
		waitAccepted(t, ln, 1) // the parent's, sent and never taken
		c, err := a.DialContext(t.Context(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if a.taken.Load() {
			t.Fatal("taken after Close")
		}
		waitAccepted(t, ln, 2)
	})
	t.Run("a second dial while the first waits: at once", func(t *testing.T) {
		ln := listen(t)
		addr := ln.Addr().String()
		h, a := silentParent(t, addr, addr)
		defer h.mine.Close() // never sends: the first dial waits
		ctx, cancel := context.WithCancel(t.Context())
		first := make(chan error, 1)
		go func() {
			c, err := a.DialContext(ctx, "tcp", addr)
			if err == nil {
				c.Close()
			}
			first <- err
		}()
		if harness.Poll(10*time.Second, time.Millisecond, a.claimed.Load) != nil {
			t.Fatal("the first dial never began")
		}
		start := time.Now()
		c, err := a.DialContext(t.Context(), "tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
		if took := time.Since(start); took > time.Second {
			t.Fatalf("a second dial waited %v behind the first", took)
		}
		cancel()
		<-first
	})
}

// TestHandOffSocketChecked: the child takes only a descriptor that is a
// socket pair's end of the kind the parent makes.
func TestHandOffSocketChecked(t *testing.T) {
	h := newHandOff("127.0.0.1:1")
	defer h.mine.Close()
	defer h.child.Close()
	if !isHandOffSocket(int(h.child.Fd())) {
		t.Fatal("the pair's end was refused")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	for _, fd := range []int{int(r.Fd()), fds[0], 1 << 20} {
		if isHandOffSocket(fd) {
			t.Errorf("descriptor %d taken for the hand-off's socket", fd)
		}
	}
}

// TestHandOffUnderTLS: the transport does TLS on the adopted connection
// and checks the server's certificate, as on its own.
func TestHandOffUnderTLS(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the strict client's refusal, below
	srv.StartTLS()
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	a := handedOver(t, firstHop(srv.URL, func(*url.URL) (*url.URL, error) { return nil, nil }))
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.DialContext = a.DialContext
	client := &http.Client{Transport: tr}
	for i := 0; i < 3; i++ {
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(body) != "ok" {
			t.Fatalf("answer %q", body)
		}
	}
	if !a.taken.Load() || conns.Load() != 1 {
		t.Fatalf("taken %v, %d connections to %s: want the parent's, reused", a.taken.Load(), conns.Load(), u.Host)
	}
	// a certificate the client does not trust fails on the adopted
	// connection as on any
	b := handedOver(t, firstHop(srv.URL, func(*url.URL) (*url.URL, error) { return nil, nil }))
	strict := &http.Client{Transport: &http.Transport{DialContext: b.DialContext}}
	if resp, err := strict.Get(srv.URL); err == nil {
		resp.Body.Close()
		t.Fatal("an untrusted certificate was accepted on the adopted connection")
	}
	if !b.taken.Load() {
		t.Fatal("the second client did not adopt its parent's connection")
	}
}
