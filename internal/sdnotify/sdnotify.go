// Package sdnotify tells systemd (Type=notify) a service's state over
// $NOTIFY_SOCKET; outside systemd it does nothing.
package sdnotify

import (
	"log/slog"
	"net"
	"os"
)

// Notify tells systemd (a unit with Type=notify) that the service is ready,
// or why it stopped: "READY=1", "STOPPING=1", "STATUS=...". Outside systemd
// (no NOTIFY_SOCKET) it does nothing.
func Notify(log *slog.Logger, state string) {
	sock := os.Getenv("NOTIFY_SOCKET")
	if sock == "" {
		return
	}
	if sock[0] == '@' { // an abstract socket
		sock = "\x00" + sock[1:]
	}
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		log.Warn("systemd notify", "err", err)
		return
	}
	defer conn.Close()
	_, _ = conn.Write([]byte(state))
}
