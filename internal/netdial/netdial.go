// Package netdial is how chromafs dials Chroma: one dialer for the
// store's transport (package chroma) and for chromafs-mount's launcher,
// which dials before the serving process has started and hands it the
// connection (package mountstart). A connection it opens carries the
// dialer's socket options (TCP keep-alives) to whichever process uses it.
package netdial

import (
	"net"
	"time"
)

// Dialer is a bounded connect with TCP keep-alives.
func Dialer() *net.Dialer { return &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second} }
