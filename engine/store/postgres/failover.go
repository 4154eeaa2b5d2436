package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
)

// Following the primary. A replicated database (pg_auto_failover, Patroni)
// moves its writable primary from host to host; the store follows it with
// what pgx already does and three things of its own:
//
//   - The DSN lists every host (`postgres://u@h1,h2,h3/db?target_session_attrs=read-write`):
//     pgx tries them in order and keeps only a connection whose
//     transaction_read_only is off. That happens at connect time only.
//   - So a connection is dropped as soon as it says it is not the
//     primary's any more: a write refused as read-only (SQLSTATE 25006, a
//     demoted primary that came back as a standby), a server shutting down
//     (57P01-57P03) or a connection lost. One such error resets the whole
//     pool — every connection of it led to the same host — and the next
//     acquire connects to whichever host is writable now.
//   - A host that does not answer never stalls the store: a connect gives
//     up on a host after ConnectTimeout and tries the next one, and every
//     connection sets TCP_USER_TIMEOUT and keepalives, so a request sent to
//     a black-holed host fails after TCPTimeout instead of the kernel's
//     fifteen minutes of retransmissions.
//
// The errors of such moments are wrapped so that errors.Is(err,
// port.ErrStoreUnavailable) holds: the engine retries its writes and the
// API answers UNAVAILABLE. A write whose connection was lost after it was
// sent (a commit whose acknowledgement was lost in the failover) also
// matches port.ErrOutcomeUnknown: it may have landed. The store's writes
// are idempotent (results are recorded once, a completion replayed is a
// no-op), so the engine retries them all the same and reports nothing done
// before the store has acknowledged it.

// Postgres error codes (SQLSTATE) that mean the call may be retried.
const (
	codeReadOnlyTransaction  = "25006" // read_only_sql_transaction: not the primary (any more)
	codeAdminShutdown        = "57P01" // the server is shutting down (a demotion, a fast stop)
	codeCrashShutdown        = "57P02"
	codeCannotConnectNow     = "57P03" // starting up, in recovery, or shutting down
	codeTooManyConnections   = "53300"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
)

// unavailableError marks a transient error: errors.Is matches
// port.ErrStoreUnavailable, port.ErrOutcomeUnknown when the outcome is
// unknown, and the cause. Its text is the cause's.
type unavailableError struct {
	err     error
	unknown bool
}

func (e *unavailableError) Error() string { return e.err.Error() }

func (e *unavailableError) Unwrap() []error {
	if e.unknown {
		return []error{port.ErrStoreUnavailable, port.ErrOutcomeUnknown, e.err}
	}
	return []error{port.ErrStoreUnavailable, e.err}
}

// classification of an error returned by pgx.
type classification struct {
	transient bool // retry the call
	unknown   bool // a write may have been applied
	reset     bool // the pool's connections are stale: drop them all
}

// classify sorts err (from pgx, for a call made with ctx) into transient
// or not. Only errors known to pass are transient: a statement the server
// rejects (a constraint, bad data, a bug) fails the same way every time.
func classify(ctx context.Context, err error) classification {
	if err == nil || ctx.Err() != nil {
		// The caller gave up (its deadline, its cancellation): that is its
		// error to handle, not the store's state.
		return classification{}
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch code := pgErr.Code; {
		case code == codeReadOnlyTransaction:
			// Refused before anything was written: this host is a standby now.
			return classification{transient: true, reset: true}
		case code == codeAdminShutdown, code == codeCrashShutdown, code == codeCannotConnectNow,
			len(code) == 5 && code[:2] == "08": // connection exceptions
			// A backend terminated while it waited for a synchronous
			// standby has committed locally: the outcome is unknown.
			return classification{transient: true, unknown: true, reset: true}
		case code == codeTooManyConnections, code == codeSerializationFailure, code == codeDeadlockDetected:
			return classification{transient: true}
		}
		return classification{}
	}
	if pgconn.SafeToRetry(err) {
		return classification{transient: true, reset: errors.Is(err, pgconn.ErrConnClosed)}
	}
	var (
		connectErr *pgconn.ConnectError
		netErr     net.Error
	)
	switch {
	case errors.As(err, &connectErr):
		// No host took the connection (or none is writable): nothing was
		// sent.
		return classification{transient: true, reset: true}
	case pgconn.Timeout(err), errors.As(err, &netErr), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, net.ErrClosed), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, context.DeadlineExceeded):
		// The connection broke with the request on the wire.
		return classification{transient: true, unknown: true, reset: true}
	}
	return classification{}
}

// check classifies err (from a call made with ctx); a transient one is
// wrapped (see unavailableError) and, when the pool's connections are
// stale, the pool is reset. Anything else is returned as it is.
func (s *Store) check(ctx context.Context, err error) error {
	c := classify(ctx, err)
	if !c.transient {
		return err
	}
	if c.reset {
		s.conns.reset(s.pool.Reset, err)
	}
	return &unavailableError{err: err, unknown: c.unknown}
}

// connWatch follows the pool's connections: which host the store writes
// to, how many connections were opened after the first, how often the
// writable host changed.
type connWatch struct {
	log   *zap.Logger
	hosts []hostPort // the DSN's hosts, in order

	opened     atomic.Uint64
	failovers  atomic.Uint64
	resets     atomic.Uint64
	lastReset  atomic.Int64 // Unix ns; resets within resetQuiet count once
	mu         sync.Mutex
	writer     string // host:port of the last connection opened ("" before the first)
	writerAddr string // its address as dialled
}

// resetQuiet is how long after a pool reset further errors do not reset it
// again: the connections that failed together were of one moment.
const resetQuiet = 250 * time.Millisecond

type hostPort struct {
	host string
	port uint16
}

func newConnWatch(log *zap.Logger, cfg *pgconn.Config) *connWatch {
	w := &connWatch{log: log}
	w.hosts = append(w.hosts, hostPort{cfg.Host, cfg.Port})
	for _, fb := range cfg.Fallbacks {
		w.hosts = append(w.hosts, hostPort{fb.Host, fb.Port})
	}
	return w
}

// connected records a new connection (pgxpool's AfterConnect).
func (w *connWatch) connected(_ context.Context, conn *pgx.Conn) error {
	addr := conn.PgConn().Conn().RemoteAddr().String()
	name := w.name(addr)
	n := w.opened.Add(1)
	w.mu.Lock()
	prev := w.writer
	w.writer, w.writerAddr = name, addr
	w.mu.Unlock()
	switch {
	case prev == "":
		w.log.Info("connected to the database", zap.String("host", name))
	case prev != name:
		w.failovers.Add(1)
		w.log.Warn("the store writes to another host now: the database failed over", zap.String("host", name),
			zap.String("was", prev))
	default:
		w.log.Debug("connection opened", zap.String("host", name), zap.Uint64("opened", n))
	}
	return nil
}

// name maps a connection's remote address to the DSN host it came from
// (host:port as the DSN spells it), or the address itself.
func (w *connWatch) name(addr string) string {
	ip, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	port, _ := strconv.ParseUint(portText, 10, 16)
	for _, h := range w.hosts {
		if uint64(h.port) != port {
			continue
		}
		if h.host == ip {
			return net.JoinHostPort(h.host, portText)
		}
		if ips, err := net.LookupHost(h.host); err == nil {
			for _, a := range ips {
				if a == ip {
					return net.JoinHostPort(h.host, portText)
				}
			}
		}
	}
	return addr
}

// reset drops the pool's connections after err said they are stale,
// unless that was just done.
func (w *connWatch) reset(reset func(), err error) {
	now := time.Now().UnixNano()
	last := w.lastReset.Load()
	if now-last < int64(resetQuiet) || !w.lastReset.CompareAndSwap(last, now) {
		return
	}
	w.resets.Add(1)
	w.mu.Lock()
	writer := w.writer
	w.mu.Unlock()
	w.log.Warn("dropping the store's connections: the database host stopped answering as the primary; "+
		"reconnecting to whichever host is writable", zap.String("host", writer), zap.Error(err))
	reset()
}

// ConnStats are the store's connection facts, for /readyz and metrics.
type ConnStats struct {
	// Host is the host (host:port, as the DSN names it) of the last
	// connection opened: the writable primary the store uses. Empty
	// before the first connection.
	Host string
	// Reconnects counts connections opened after the first one.
	Reconnects uint64
	// Failovers counts the times a new connection went to another host
	// than the one before: the writable primary moved.
	Failovers uint64
	// Resets counts the times the store dropped every connection because
	// one said the host was no longer the primary (or gone).
	Resets uint64
}

// ConnStats returns the store's connection facts.
func (s *Store) ConnStats() ConnStats {
	w := s.conns
	w.mu.Lock()
	host := w.writer
	w.mu.Unlock()
	return ConnStats{Host: host, Reconnects: max(w.opened.Load(), 1) - 1, Failovers: w.failovers.Load(), Resets: w.resets.Load()}
}

// dialer returns pgx's DialFunc: a per-host connect timeout, keepalives
// and TCP_USER_TIMEOUT (see tcpTimeout), so that a black-holed host costs
// at most ConnectTimeout at connect and TCPTimeout once connected.
func dialer(connectTimeout, tcpTimeout time.Duration) pgconn.DialFunc {
	d := &net.Dialer{
		Timeout: connectTimeout,
		KeepAliveConfig: net.KeepAliveConfig{
			Enable:   true,
			Idle:     max(tcpTimeout/3, time.Second),
			Interval: max(tcpTimeout/6, time.Second),
			Count:    3,
		},
		Control: func(network, _ string, c syscall.RawConn) error {
			return setUserTimeout(network, c, tcpTimeout)
		},
	}
	return d.DialContext
}
