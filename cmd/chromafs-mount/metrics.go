package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chromafs/chromafs/chroma"
	"github.com/chromafs/chromafs/content"
	"github.com/chromafs/chromafs/hostcache"
)

// serveMetrics exposes the mount's counters in the Prometheus format, and
// Go's profiles under /debug/pprof/. It returns a function that stops the
// server. Bind it to a loopback address.
func serveMetrics(addr string, engine *content.Engine, store *chroma.Store, host *hostcache.Cache) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	reg := prometheus.NewRegistry()
	counter := func(name, help string, get func(content.Stats) int64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(get(engine.Stats())) }))
	}
	gauge := func(name, help string, get func(content.Stats) int64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return float64(get(engine.Stats())) }))
	}
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "chromafs_chroma_requests_total", Help: "HTTP requests sent to Chroma (every page of a paged get counts)."},
		func() float64 { return float64(store.Requests()) }))
	counter("chromafs_fetches_total", "Content fetches started by reads and prefetch.", func(s content.Stats) int64 { return s.Fetches })
	counter("chromafs_fetch_errors_total", "Content fetch attempts that failed.", func(s content.Stats) int64 { return s.FetchErrors })
	counter("chromafs_cache_hits_total", "Chunk cache hits.", func(s content.Stats) int64 { return s.Cache.Hits })
	counter("chromafs_cache_misses_total", "Chunk cache misses.", func(s content.Stats) int64 { return s.Cache.Misses })
	counter("chromafs_cache_evictions_total", "Chunk cache evictions.", func(s content.Stats) int64 { return s.Cache.Evictions })
	counter("chromafs_loads_total", "De-duplicated content loads.", func(s content.Stats) int64 { return s.Loads })
	counter("chromafs_loads_shared_total", "Reads served by another read's load.", func(s content.Stats) int64 { return s.Shared })
	counter("chromafs_fetched_bytes_total", "Content bytes fetched from Chroma.", func(s content.Stats) int64 { return s.FetchedBytes })
	counter("chromafs_prefetched_pages_total", "Pages loaded by prefetch.", func(s content.Stats) int64 { return s.PrefetchPages })
	gauge("chromafs_cache_bytes", "Bytes held in the chunk cache.", func(s content.Stats) int64 { return s.Cache.Bytes })
	gauge("chromafs_cache_max_bytes", "Size of the chunk cache.", func(s content.Stats) int64 { return s.Cache.MaxBytes })
	if host != nil {
		registerHostMetrics(reg, host)
	}

	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Warn("metrics server", "err", err)
		}
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

// registerHostMetrics exposes the host tier's counters of this process.
func registerHostMetrics(reg *prometheus.Registry, host *hostcache.Cache) {
	for name, m := range map[string]struct {
		help string
		get  func(hostcache.Stats) int64
	}{
		"hits":          {"Pages served by the host cache.", func(s hostcache.Stats) int64 { return s.Hits }},
		"misses":        {"Host cache lookups that found no usable entry.", func(s hostcache.Stats) int64 { return s.Misses }},
		"corrupt":       {"Host cache entries dropped because they failed verification.", func(s hostcache.Stats) int64 { return s.Corrupt }},
		"errors":        {"Host cache reads and writes that failed (the read fell through).", func(s hostcache.Stats) int64 { return s.Errors }},
		"writes":        {"Pages written to the host cache.", func(s hostcache.Stats) int64 { return s.Writes }},
		"evictions":     {"Host cache entries evicted by this process.", func(s hostcache.Stats) int64 { return s.Evictions }},
		"read_bytes":    {"Page bytes served by the host cache.", func(s hostcache.Stats) int64 { return s.BytesRead }},
		"written_bytes": {"Page bytes written to the host cache.", func(s hostcache.Stats) int64 { return s.BytesWritten }},
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "chromafs_host_cache_" + name + "_total", Help: m.help},
			func() float64 { return float64(m.get(host.Stats())) }))
	}
}
