// Command chromafsd is the host daemon: one process serving every view of
// every collection its clients (the chromafs command, orchestrators) ask
// for over a unix socket, placed at their paths for sandboxes to bind.
// See --help and package daemon.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/chromafs/chromafs/csi"
	"github.com/chromafs/chromafs/daemon"
	"github.com/chromafs/chromafs/internal/cli"
	"github.com/chromafs/chromafs/internal/clientcmd"
	"github.com/chromafs/chromafs/internal/metricsrv"
	"github.com/chromafs/chromafs/internal/mountcmd"
	"github.com/chromafs/chromafs/internal/sdnotify"
	"github.com/chromafs/chromafs/internal/tiers"
	"github.com/chromafs/chromafs/policy"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// main runs chromafsd, or, called by their names (the links of its
// image, as busybox does), chromafs-mount and the chromafs client: one
// binary where the three would weigh twice as much.
func main() {
	switch {
	case mountcmd.CalledAs(os.Args[0]):
		os.Exit(mountcmd.Main(version, os.Args))
	case filepath.Base(os.Args[0]) == clientcmd.Name:
		os.Exit(clientcmd.Main(version, os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	o, err := parseFlags(args, os.Stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "chromafsd: %v\n", err)
		return 2
	}
	if o.version {
		fmt.Println(cli.Version("chromafsd", version))
		return 0
	}
	if err := serve(o); err != nil {
		fmt.Fprintf(os.Stderr, "chromafsd: %v\n", err)
		return 1
	}
	return 0
}

// serve runs the daemon until SIGINT or SIGTERM; SIGHUP reads the policy
// again.
func serve(o *options) error {
	log, closeLog, err := setupLogging(o)
	if err != nil {
		return err
	}
	defer closeLog()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)
	d, stop, err := start(log, o)
	defer stop()
	if err != nil {
		return err
	}
	for sig := range sigs {
		if sig != syscall.SIGHUP {
			log.Info("stopping", "signal", sig.String(), "detach", o.detachOnExit)
			sdnotify.Notify(log, "STOPPING=1")
			return nil
		}
		if p, err := policy.Load(o.policyFile); err != nil {
			log.Error("SIGHUP: the policy was not read again; the old one stays", "err", err)
		} else {
			d.SetPolicy(p)
			log.Info("SIGHUP: policy read again", "rules", p.Rules())
		}
	}
	return nil
}

// start opens the tiers, the daemon, its API, its metrics; places again
// the attachments of the daemon before; then serves the front ends (they
// find those attachments) and tells systemd. stop undoes what was done,
// in reverse, also after an error.
func start(log *slog.Logger, o *options) (d *daemon.Daemon, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	pol, err := policy.Load(o.policyFile)
	if err != nil {
		return nil, stop, err
	}
	cfg, closeTiers, err := o.daemonConfig(log, pol)
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, closeTiers)
	if d, err = daemon.New(cfg); err != nil {
		return nil, stop, err
	}
	stops = append(stops, d.Close)
	l, err := daemon.Listen(o.socket, o.socketGID)
	if err != nil {
		return nil, stop, err
	}
	srv := d.Server()
	go func() { _ = srv.Serve(d.Listener(l)) }()
	stops = append(stops, func() { _ = srv.Close() })
	stopMetrics, err := serveMetrics(log, o.metricsAddr, d)
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, stopMetrics)
	began := time.Now()
	n, err := d.Restore(context.Background())
	if err != nil {
		log.Error("the attachments of the daemon before could not be read", "err", err)
	}
	for _, front := range []func(*slog.Logger, *options, *daemon.Daemon) (func(), error){serveDockerPlugin, serveCSI} {
		stopFront, err := front(log, o, d)
		if err != nil {
			return nil, stop, err
		}
		stops = append(stops, stopFront)
	}
	sdnotify.Notify(log, fmt.Sprintf("READY=1\nSTATUS=serving %d attachments on %s", n, o.socket))
	if o.memoryBytes > 0 && o.memoryBytes < o.budgetBytes+o.budgetBytes*15/100+limitSlack {
		log.Warn("--memory-limit is below --memory + 15% + 64MiB: with the budget full, the collector may run without end", "memory", o.budgetBytes, "memory_limit", o.memoryBytes)
	}
	log.Info("serving", "socket", o.socket, "state_dir", o.stateDir, "policy_rules", pol.Rules(), "restored", n, "restore", time.Since(began).Round(time.Millisecond), "pid", os.Getpid())
	return d, stop, nil
}

// serveCSI serves the CSI node plugin at --csi-endpoint ("" none), after
// Restore so that a publish finds the attachments of the daemon before.
func serveCSI(log *slog.Logger, o *options, d *daemon.Daemon) (func(), error) {
	if o.csiEndpoint == "" {
		return func() {}, nil
	}
	p, err := csi.New(d, o.nodeID, version, log)
	if err != nil {
		return nil, err
	}
	l, err := csi.Listen(o.csiEndpoint)
	if err != nil {
		return nil, fmt.Errorf("--csi-endpoint: %w", err)
	}
	log.Info("serving the CSI node plugin", "endpoint", o.csiEndpoint, "driver", csi.DriverName, "node", o.nodeID)
	return p.Serve(l), nil
}

// setupLogging logs to --log-file, or stderr.
func setupLogging(o *options) (*slog.Logger, func(), error) {
	var w io.Writer = os.Stderr
	closeFn := func() {}
	if o.logFile != "" {
		f, err := os.OpenFile(o.logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, nil, fmt.Errorf("--log-file: %w", err)
		}
		w, closeFn = f, func() { f.Close() }
	}
	level := slog.LevelInfo
	if o.debug {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})), closeFn, nil
}

// daemonConfig opens the tiers and gathers the daemon's configuration.
func (o *options) daemonConfig(log *slog.Logger, pol *policy.Policy) (daemon.Config, func(), error) {
	cfg := daemon.Config{
		Conn: o.conn, CacheDir: o.cacheDir, HostRequests: o.hostReqs, MemoryBytes: o.budgetBytes, CountHeap: true, CacheBytes: o.cacheBytes, MemoryLimit: o.memoryBytes,
		Prefetch: o.prefetch, Refresh: o.refresh, PushPages: o.pushPages, LazyAllow: o.lazyPrefixes(), Search: o.search,
		Layout: o.layout, ScanLimit: o.scanLimit, StateDir: o.stateDir, Policy: pol, MaxMounts: o.maxMounts, MaxAttachments: o.maxAttach, APIIdle: o.apiIdle,
		DetachOnExit: o.detachOnExit, Linger: o.linger, Log: log,
	}
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	if host := tiers.Host(log, o.cacheDir, o.diskBytes); host != nil {
		cfg.Host = host
		closers = append(closers, host.Close)
	}
	remote, err := tiers.Redis(log, o.redisURL, o.redisPwFile, o.redisTTL, o.redisTimeout)
	if err != nil {
		closeAll()
		return cfg, nil, err
	}
	if remote != nil {
		cfg.Remote = remote
		closers = append(closers, remote.Close)
	}
	return cfg, closeAll, nil
}

// serveMetrics serves /metrics and Go's profiles (/debug/pprof/) at addr
// ("" none).
func serveMetrics(log *slog.Logger, addr string, d *daemon.Daemon) (func(), error) {
	if addr == "" {
		return func() {}, nil
	}
	reg := prometheus.NewRegistry()
	// the runtime's CPU classes too: go_cpu_classes_gc_total_cpu_seconds_total
	// beside the total and idle ones gives the collector's share of the
	// CPU the daemon used (what a memory budget near its bound costs)
	gc := collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/cpu/classes/`)})
	reg.MustRegister(d.Collector(), collectors.NewGoCollector(gc), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return metricsrv.Serve(log, "--metrics", addr, reg)
}
