package mountcmd

import (
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chromafs/chromafs/content"
	"github.com/chromafs/chromafs/fusefs"
	"github.com/chromafs/chromafs/hostcache"
	"github.com/chromafs/chromafs/internal/metricsrv"
	"github.com/chromafs/chromafs/redistier"
	"github.com/chromafs/chromafs/refresh"
	"github.com/chromafs/chromafs/search"
)

// serveMetrics exposes the registry that registry builds (the mount's
// counters in the Prometheus format) at addr, and Go's profiles under
// /debug/pprof/ (package metricsrv). It returns a function that stops the
// server. Bind it to a loopback address; without one ("") it does nothing.
func serveMetrics(log *slog.Logger, addr string, registry func() *prometheus.Registry) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	return metricsrv.Serve(log, "--metrics-addr", addr, registry())
}

// registry holds the mount's metrics: which mount it is, Chroma's
// requests, the engine's, the kernel cache's, live refresh's and the
// tiers' counters, and the load latencies.
func (m *mounted) registry(mp, collection string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(m.latency)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "chromafs_mount_info",
		Help:        "Always 1: which mount this process serves, and its pid (chromafs-mount --reload MOUNTPOINT signals it).",
		ConstLabels: prometheus.Labels{"mountpoint": mp, "collection": collection, "pid": strconv.Itoa(os.Getpid())}},
		func() float64 { return 1 }))
	store := m.col.Store()
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "chromafs_chroma_requests_total", Help: "HTTP requests sent to Chroma (every page of a paged get counts)."},
		func() float64 { return float64(store.Requests()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "chromafs_mount_chroma_requests", Help: "Requests to Chroma the mount waited for before it answered."},
		func() float64 { return float64(m.criticalRequests.Load()) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "chromafs_mount_chroma_round_trips", Help: "Round trips to Chroma the mount waited for before it answered, one after another (requests sent at once count once)."},
		func() float64 { return float64(m.criticalTrips.Load()) }))
	registerEngineMetrics(reg, m.engine)
	counters[fusefs.PushStats]{
		"pushed":  {"Prefetched pages handed to the kernel's page cache.", func(s fusefs.PushStats) int64 { return s.Pushed }},
		"listed":  {"Pages handed to the kernel's page cache by a listing under a directory being read (grep -r).", func(s fusefs.PushStats) int64 { return s.Listed }},
		"dropped": {"Pages not handed to the kernel because the queue was full.", func(s fusefs.PushStats) int64 { return s.Dropped }},
		"refused": {"Pages the kernel did not take (inode forgotten).", func(s fusefs.PushStats) int64 { return s.Refused }},
	}.register(reg, "chromafs_kernel_cache", m.fsys.PushStats)
	registerRefreshMetrics(reg, m.refresher)
	if m.access != nil {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "chromafs_access_log_dropped_total", Help: "Access log events dropped because the log's file did not keep up (a line in the log counts them too)."},
			func() float64 { return float64(m.access.Dropped()) }))
	}
	if m.host != nil {
		registerHostMetrics(reg, m.host)
	}
	if m.remote != nil {
		registerRedisMetrics(reg, m.remote)
	}
	if m.search != nil {
		registerSearchMetrics(reg, m.search)
	}
	return reg
}

// registerSearchMetrics exposes the searcher's counters and the costs of
// its lexical index.
func registerSearchMetrics(reg *prometheus.Registry, s *search.Searcher) {
	counter := func(name, help string, get func(search.Stats) float64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return get(s.Stats()) }))
	}
	gauge := func(name, help string, get func(search.Stats) float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return get(s.Stats()) }))
	}
	counter("chromafs_searches_total", "Searches run (not answered from the results kept).", func(st search.Stats) float64 { return float64(st.Searches) })
	counter("chromafs_search_failures_total", "Searches that failed (EIO; the reason is logged).", func(st search.Stats) float64 { return float64(st.Failures) })
	counter("chromafs_search_chroma_queries_total", "Queries by embedding sent to Chroma.", func(st search.Stats) float64 { return float64(st.ChromaQueries) })
	gauge("chromafs_search_index_ready", "1 once the lexical index of the tree served is loaded or built.", func(st search.Stats) float64 { return b2f(st.Index.Ready) })
	gauge("chromafs_search_index_build_seconds", "How long the lexical index took to load (from the host tier) or build.", func(st search.Stats) float64 { return st.Index.BuildSeconds })
	gauge("chromafs_search_index_built", "1 when the lexical index was built here, 0 when read from the host tier.", func(st search.Stats) float64 { return b2f(st.Index.Source == "built") })
	gauge("chromafs_search_index_memory_bytes", "Heap the lexical index holds (estimate).", func(st search.Stats) float64 { return float64(st.Index.MemoryBytes) })
	gauge("chromafs_search_index_host_bytes", "Bytes of the lexical index as kept in the host tier (before its compression).", func(st search.Stats) float64 { return float64(st.Index.HostBytes) })
	gauge("chromafs_search_index_pages", "Pages in the lexical index.", func(st search.Stats) float64 { return float64(st.Index.Pages) })
	gauge("chromafs_search_index_passages", "Passages in the lexical index.", func(st search.Stats) float64 { return float64(st.Index.Passages) })
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// registerEngineMetrics exposes the read engine's counters and gauges.
func registerEngineMetrics(reg *prometheus.Registry, engine *content.Engine) {
	counter := func(name, help string, get func(content.Stats) int64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
			func() float64 { return float64(get(engine.Stats())) }))
	}
	gauge := func(name, help string, get func(content.Stats) int64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help},
			func() float64 { return float64(get(engine.Stats())) }))
	}
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
}

// newLatency is the histogram of load latencies by tier (host: a host
// cache lookup; remote: a Redis lookup; source: one request to Chroma),
// fed by the engine.
func newLatency() *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "chromafs_load_seconds",
		Help:    "Latency of content loads by tier: host (a host cache lookup), remote (a Redis lookup), source (one request to Chroma).",
		Buckets: []float64{0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1, 3, 10},
	}, []string{"tier"})
}

// counters are a tier's counters: name -> help and how to read it from a
// snapshot of the tier's stats.
type counters[S any] map[string]struct {
	help string
	get  func(S) int64
}

// register exposes each counter as <prefix>_<name>_total, read from a fresh
// snapshot on every scrape.
func (cs counters[S]) register(reg *prometheus.Registry, prefix string, snapshot func() S) {
	for name, c := range cs {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: prefix + "_" + name + "_total", Help: c.help},
			func() float64 { return float64(c.get(snapshot())) }))
	}
}

// registerHostMetrics exposes the host tier's counters of this process.
func registerHostMetrics(reg *prometheus.Registry, host *hostcache.Cache) {
	counters[hostcache.Stats]{
		"hits":          {"Pages served by the host cache.", func(s hostcache.Stats) int64 { return s.Hits }},
		"misses":        {"Host cache lookups that found no usable entry.", func(s hostcache.Stats) int64 { return s.Misses }},
		"corrupt":       {"Host cache entries dropped because they failed verification.", func(s hostcache.Stats) int64 { return s.Corrupt }},
		"errors":        {"Host cache reads and writes that failed (the read fell through).", func(s hostcache.Stats) int64 { return s.Errors }},
		"writes":        {"Pages written to the host cache.", func(s hostcache.Stats) int64 { return s.Writes }},
		"evictions":     {"Host cache entries evicted by this process.", func(s hostcache.Stats) int64 { return s.Evictions }},
		"read_bytes":    {"Page bytes served by the host cache.", func(s hostcache.Stats) int64 { return s.BytesRead }},
		"written_bytes": {"Page bytes written to the host cache.", func(s hostcache.Stats) int64 { return s.BytesWritten }},
	}.register(reg, "chromafs_host_cache", host.Stats)
}

// registerRedisMetrics exposes the Redis tier's counters of this process.
func registerRedisMetrics(reg *prometheus.Registry, remote *redistier.Tier) {
	counters[redistier.Stats]{
		"hits":    {"Pages served by Redis.", func(s redistier.Stats) int64 { return s.Hits }},
		"misses":  {"Redis lookups that found no usable entry.", func(s redistier.Stats) int64 { return s.Misses }},
		"corrupt": {"Redis entries dropped because they failed verification.", func(s redistier.Stats) int64 { return s.Corrupt }},
		"errors":  {"Redis operations that failed or timed out (then reads, or writes, skip it for a second).", func(s redistier.Stats) int64 { return s.Errors }},
		"writes":  {"Pages written to Redis.", func(s redistier.Stats) int64 { return s.Writes }},
		"skipped": {"Redis operations skipped: reads while resting after a failure; writes with the queue full, or left when Close's time was up.", func(s redistier.Stats) int64 { return s.Skipped }},
	}.register(reg, "chromafs_redis_cache", remote.Stats)
}

// registerRefreshMetrics exposes live refresh: counters, the time of the
// last refresh and poll, and the served version as a label.
func registerRefreshMetrics(reg *prometheus.Registry, r *refresh.Refresher) {
	counters[refresh.Stats]{
		"polls":         {"Checks of the collection's tree stamp.", func(s refresh.Stats) int64 { return s.Polls }},
		"refreshes":     {"New tree versions swapped in without a remount.", func(s refresh.Stats) int64 { return s.Refreshes }},
		"failures":      {"Polls or tree loads that failed (the current version stayed).", func(s refresh.Stats) int64 { return s.Failures }},
		"invalidations": {"Kernel cache entries (names, listings, attributes) invalidated by refreshes.", func(s refresh.Stats) int64 { return s.Invalidated }},
	}.register(reg, "chromafs_tree", r.Stats)
	unix := func(t time.Time) float64 {
		if t.IsZero() {
			return 0
		}
		return float64(t.UnixNano()) / 1e9
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "chromafs_tree_last_refresh_timestamp_seconds", Help: "When the served tree version was swapped in (0: loaded at mount)."},
		func() float64 { return unix(r.Stats().LastRefresh) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "chromafs_tree_last_poll_timestamp_seconds", Help: "When the tree stamp was last checked successfully."},
		func() float64 { return unix(r.Stats().LastPoll) }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "chromafs_tree_files", Help: "Files in the served tree version."},
		func() float64 { return float64(r.Stats().Files) }))
	reg.MustRegister(&versionCollector{r: r})
}

// versionCollector exposes chromafs_tree_info{version="..."} 1 for the
// served version.
type versionCollector struct{ r *refresh.Refresher }

var treeInfo = prometheus.NewDesc("chromafs_tree_info", "The served tree version (label), always 1.", []string{"version"}, nil)

func (c *versionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- treeInfo }
func (c *versionCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(treeInfo, prometheus.GaugeValue, 1, c.r.Stats().Version)
}
