package postgres

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// Config configures a Store.
type Config struct {
	// DSN is a libpq connection string or URL, e.g.
	// "postgres://robonet@db:5432/robonet?sslmode=verify-full". A
	// replicated database lists every host, with
	// target_session_attrs=read-write so that only the primary is kept:
	// "postgres://robonet@pg1,pg2,pg3/robonet?target_session_attrs=read-write".
	DSN string
	// MaxConns bounds the connection pool. 0: a default of 10.
	MaxConns int32
	// Logger receives the store's few log lines (migrations, close).
	// nil: no logging.
	Logger *zap.Logger
	// Schema, if set, is created if missing and becomes the search_path of
	// every connection: the store's tables live there. Tests use a schema
	// per test; production normally leaves it empty (the server's default
	// search_path).
	Schema string
	// Tracer, if set, traces every query (e.g. OpenTelemetry, or a test
	// that needs to act between two statements).
	Tracer pgx.QueryTracer

	// ConnectTimeout bounds a connection attempt to one host of the DSN
	// before the next one is tried, when the DSN sets no connect_timeout.
	// 0: a default of 3 s.
	ConnectTimeout time.Duration
	// TCPTimeout is how long a request may go unacknowledged by the
	// database host's TCP stack before the connection counts as lost
	// (TCP_USER_TIMEOUT; keepalives probe idle connections on the same
	// scale). It does not bound a slow query on a live host. 0: a default
	// of 10 s.
	TCPTimeout time.Duration
	// OpenTimeout is how long Open keeps trying while the database cannot
	// be reached or is failing over (a node started during a failover
	// waits for the new primary instead of exiting). 0: a default of
	// 1 minute; negative: one try.
	OpenTimeout time.Duration
	// HealthInterval is how often the store reads the primary's
	// replication state (ReplicationStats; a loud log line when writes
	// wait for a synchronous standby that is not there). 0: a default of
	// 5 s; negative: never.
	HealthInterval time.Duration
}

// WithDefaults returns a copy of c with defaults filled in.
func (c Config) WithDefaults() Config {
	if c.MaxConns == 0 {
		c.MaxConns = 10
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.ConnectTimeout == 0 {
		c.ConnectTimeout = 3 * time.Second
	}
	if c.TCPTimeout == 0 {
		c.TCPTimeout = 10 * time.Second
	}
	if c.OpenTimeout == 0 {
		c.OpenTimeout = time.Minute
	}
	if c.HealthInterval == 0 {
		c.HealthInterval = 5 * time.Second
	}
	return c
}

func (c Config) validate() error {
	if c.DSN == "" {
		return errors.New("postgres store: DSN is required")
	}
	if c.MaxConns < 0 {
		return fmt.Errorf("postgres store: MaxConns must not be negative, got %d", c.MaxConns)
	}
	if c.ConnectTimeout < 0 || c.TCPTimeout < 0 {
		return fmt.Errorf("postgres store: ConnectTimeout and TCPTimeout must not be negative, got %s and %s", c.ConnectTimeout, c.TCPTimeout)
	}
	return nil
}
