package postgres

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
)

// Config configures a Store.
type Config struct {
	// DSN is a libpq connection string or URL, e.g.
	// "postgres://robonet@db:5432/robonet?sslmode=verify-full".
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
}

// WithDefaults returns a copy of c with defaults filled in.
func (c Config) WithDefaults() Config {
	if c.MaxConns == 0 {
		c.MaxConns = 10
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
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
	return nil
}
