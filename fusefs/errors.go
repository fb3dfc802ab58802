package fusefs

import (
	"context"
	"errors"
	"syscall"
)

// toErrno is the one place where errors become FUSE status codes. A tree
// miss never reaches it (Lookup answers ENOENT itself), so nothing that
// went wrong on the server can look like a missing file.
func toErrno(err error) syscall.Errno {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	default:
		return syscall.EIO
	}
}
