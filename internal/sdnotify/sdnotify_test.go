package sdnotify

import (
	"log/slog"
	"net"
	"path/filepath"
	"testing"
	"time"
)

func TestNotify(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	Notify(slog.New(slog.DiscardHandler), "READY=1")
	buf := make([]byte, 64)
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := conn.Read(buf)
	if err != nil || string(buf[:n]) != "READY=1" {
		t.Errorf("systemd got %q, %v", buf[:n], err)
	}
	t.Setenv("NOTIFY_SOCKET", "")
	Notify(slog.New(slog.DiscardHandler), "READY=1") // outside systemd: nothing, no error
}
