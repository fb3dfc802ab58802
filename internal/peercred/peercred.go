// Package peercred says who is at the other end of a unix socket, as the
// kernel recorded it when the peer connected (SO_PEERCRED, SO_PEERGROUPS):
// the only identity a privileged daemon may trust. Nothing the client
// sends about itself is used.
package peercred

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Cred is a peer's identity at connect time.
type Cred struct {
	PID    int32
	UID    uint32
	GID    uint32
	Groups []uint32 // supplementary groups (SO_PEERGROUPS)
}

func (c Cred) String() string {
	return "uid=" + strconv.FormatUint(uint64(c.UID), 10) + " gid=" + strconv.FormatUint(uint64(c.GID), 10) + " pid=" + strconv.Itoa(int(c.PID))
}

// FromConn reads the credentials of c's peer; c must be a unix socket.
func FromConn(c net.Conn) (Cred, error) {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Cred{}, fmt.Errorf("peer credentials: %T is not a unix socket", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Cred{}, fmt.Errorf("peer credentials: %w", err)
	}
	var cred Cred
	var cerr error
	err = raw.Control(func(fd uintptr) {
		u, err := unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
		if err != nil {
			cerr = fmt.Errorf("SO_PEERCRED: %w", err)
			return
		}
		cred = Cred{PID: u.Pid, UID: u.Uid, GID: u.Gid}
		cred.Groups, cerr = peerGroups(int(fd))
	})
	if err == nil {
		err = cerr
	}
	if err != nil {
		return Cred{}, fmt.Errorf("peer credentials: %w", err)
	}
	return cred, nil
}

// peerGroups reads SO_PEERGROUPS, growing the buffer the kernel says it
// needs (ERANGE).
func peerGroups(fd int) ([]uint32, error) {
	n := 64
	for range 4 {
		buf := make([]uint32, n)
		size := uint32(len(buf) * 4)
		_, _, e := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0)
		switch {
		case e == 0:
			return buf[:size/4], nil
		case errors.Is(e, unix.ERANGE):
			n = int(size/4) + 1
		default:
			return nil, fmt.Errorf("SO_PEERGROUPS: %w", e)
		}
	}
	return nil, errors.New("SO_PEERGROUPS: the group list keeps growing")
}

type key struct{}

// With returns ctx carrying c (an HTTP server's ConnContext puts it there).
func With(ctx context.Context, c Cred) context.Context { return context.WithValue(ctx, key{}, c) }

// From returns the credentials With put in ctx.
func From(ctx context.Context) (Cred, bool) {
	c, ok := ctx.Value(key{}).(Cred)
	return c, ok
}
