package chroma

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolSharesConnections: stores opened with one pool share its
// connections, and its heartbeat opens one before any store asks, so two
// collections' first requests open no connection; stores of their own
// open one each.
func TestPoolSharesConnections(t *testing.T) {
	var conns, idle, heartbeats, gets atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/v2/heartbeat":
			if r.Header.Get("X-Chroma-Token") != "tok" {
				t.Error("the heartbeat did not carry the token")
			}
			heartbeats.Add(1)
			_, _ = w.Write([]byte(`{"nanosecond heartbeat": 1}`))
		case strings.HasSuffix(r.URL.Path, "/get"):
			gets.Add(1)
			_, _ = w.Write([]byte(`{"ids": [], "documents": [], "metadatas": [], "include": ["metadatas"]}`))
		default:
			http.NotFound(w, r)
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			conns.Add(1)
		case http.StateIdle:
			idle.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	t.Setenv("CHROMA_TOKEN", "tok")
	cfg := Config{URL: srv.URL, Collection: "col", Tenant: DefaultTenant, Database: DefaultDatabase, Timeout: 5 * time.Second, MaxBody: DefaultMaxBody}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	ask := func(cfg Config, ids ...string) {
		t.Helper()
		for _, id := range ids {
			st, err := OpenByID(cfg, id)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.TreeInfo(context.Background()); !errors.Is(err, ErrNoTree) {
				t.Fatalf("tree info of %s: %v, want ErrNoTree", id, err)
			}
			_ = st.Close()
		}
	}

	pool := NewPool(cfg, time.Hour, nil)
	deadline := time.Now().Add(10 * time.Second)
	for idle.Load() == 0 && time.Now().Before(deadline) { // the heartbeat answered
		time.Sleep(time.Millisecond)
	}
	// the client puts the connection back once it has read the answer's
	// end, on a goroutine of its own: give it that moment
	time.Sleep(50 * time.Millisecond)
	pooled := cfg
	pooled.Pool = pool
	ask(pooled, "id-1", "id-2")
	if conns.Load() != 1 || heartbeats.Load() != 1 || gets.Load() != 2 {
		t.Fatalf("pooled: %d connections for %d heartbeats and %d gets, want 1 for 1 and 2", conns.Load(), heartbeats.Load(), gets.Load())
	}
	pool.Close() // stops the heartbeat, closes the idle connection

	conns.Store(0)
	ask(cfg, "id-3", "id-4")
	if conns.Load() != 2 {
		t.Fatalf("stores of their own opened %d connections, want 2 (the control)", conns.Load())
	}
}
