package peercred

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestFromConn(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := net.Dial("unix", sock)
		if err == nil {
			defer c.Close()
			buf := make([]byte, 1)
			_, _ = c.Read(buf)
		}
	}()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cred, err := FromConn(c)
	if err != nil {
		t.Fatal(err)
	}
	if cred.UID != uint32(os.Getuid()) || cred.GID != uint32(os.Getgid()) || cred.PID != int32(os.Getpid()) {
		t.Errorf("cred %v, want this process's", cred)
	}
	groups, _ := os.Getgroups()
	for _, g := range groups {
		if !slices.Contains(cred.Groups, uint32(g)) {
			t.Errorf("group %d missing from %v", g, cred.Groups)
		}
	}
	if _, err := FromConn(&net.TCPConn{}); err == nil {
		t.Error("a TCP connection gave credentials")
	}
	ctx := With(t.Context(), cred)
	if got, ok := From(ctx); !ok || got.UID != cred.UID {
		t.Errorf("From: %v %v", got, ok)
	}
}
