package postgres

import (
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout sets TCP_USER_TIMEOUT on a TCP socket: data sent and not
// acknowledged for d fails the connection (RFC 5482), where Linux would
// otherwise retransmit for about fifteen minutes to a host that vanished.
func setUserTimeout(network string, c syscall.RawConn, d time.Duration) error {
	if d <= 0 || (network != "tcp" && network != "tcp4" && network != "tcp6") {
		return nil
	}
	var serr error
	err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds())) //nolint:gosec // fd from the runtime
	})
	if err != nil {
		return err
	}
	return serr
}
