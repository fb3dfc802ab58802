package fusefs

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"testing"
)

func TestToErrno(t *testing.T) {
	tests := []struct {
		err  error
		want syscall.Errno
	}{
		{nil, 0},
		{fmt.Errorf("read: %w", context.Canceled), syscall.EINTR},
		{fmt.Errorf("read: %w", context.DeadlineExceeded), syscall.EIO},
		{errors.New("page chunks inconsistent"), syscall.EIO},
		{fmt.Errorf("no such page on the server: %w", errors.New("not found")), syscall.EIO}, // never ENOENT
	}
	for _, tc := range tests {
		if got := toErrno(tc.err); got != tc.want {
			t.Errorf("toErrno(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
