package metricsrv

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// TestServe: the registry at /metrics, the profiles' index at
// /debug/pprof/, nothing once stopped; a taken address is an error naming
// the flag.
func TestServe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "chromafs_test_total", Help: "A test counter."})
	c.Add(3)
	reg.MustRegister(c)
	stop, err := Serve(slog.New(slog.DiscardHandler), "--metrics", addr, reg)
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "chromafs_test_total 3") {
		t.Errorf("/metrics: %d %q", code, body)
	}
	if code, body := get("/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Errorf("/debug/pprof/: %d %.200q", code, body)
	}
	if _, err := Serve(slog.New(slog.DiscardHandler), "--metrics", addr, reg); err == nil || !strings.Contains(err.Error(), "--metrics") {
		t.Errorf("a second server on the same address: %v, want an error naming --metrics", err)
	}
	stop()
	if code, _ := get("/metrics"); code != 0 {
		t.Errorf("/metrics after stop: %d, want no answer", code)
	}
}
