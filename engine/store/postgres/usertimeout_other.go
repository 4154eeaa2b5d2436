//go:build !linux

package postgres

import (
	"syscall"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT does not exist: the
// keepalives alone detect a vanished host there.
func setUserTimeout(string, syscall.RawConn, time.Duration) error { return nil }
