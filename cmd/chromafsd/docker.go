package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"

	"github.com/chromafs/chromafs/daemon"
	"github.com/chromafs/chromafs/dockerplugin"
)

// serveDockerPlugin serves the Docker volume plugin (--docker-plugin) on
// --docker-plugin-socket, its volumes kept in STATE_DIR/docker; the
// function returned stops it. Call it after the daemon restored its
// attachments.
func serveDockerPlugin(log *slog.Logger, o *options, d *daemon.Daemon) (func(), error) {
	if !o.dockerPlugin {
		return func() {}, nil
	}
	p, err := dockerplugin.New(dockerplugin.Config{Daemon: d, Policy: d.Policy, Dir: filepath.Join(o.stateDir, "docker"), Log: log})
	if err != nil {
		return nil, fmt.Errorf("--docker-plugin: %w", err)
	}
	l, err := dockerplugin.Listen(o.dockerSocket)
	if err != nil {
		return nil, err
	}
	go func() {
		if err := p.Serve(l); err != nil && !errors.Is(err, net.ErrClosed) {
			log.Warn("docker plugin server", "err", err)
		}
	}()
	log.Info("serving the docker volume plugin", "socket", o.dockerSocket)
	return func() { _ = l.Close() }, nil
}
