package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
)

// database is a throwaway database on the bench's Postgres server: each
// scenario runs on a fresh one, so no scenario measures another's rows.
type database struct {
	admin string // the DSN given to the bench
	name  string
	dsn   string // the DSN of this database
}

// newDatabase creates a database named robonet_bench_<random>.
func newDatabase(ctx context.Context, admin string) (*database, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	d := &database{admin: admin, name: "robonet_bench_" + hex.EncodeToString(b[:])}
	u, err := url.Parse(admin)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, fmt.Errorf("--postgres %q: want a URL, postgres://user@host:port/db?sslmode=disable", redact(admin))
	}
	u.Path = "/" + d.name
	d.dsn = u.String()
	if err := d.exec(ctx, admin, "CREATE DATABASE "+d.name); err != nil {
		return nil, fmt.Errorf("creating a database for the bench (the role needs CREATEDB): %w", err)
	}
	return d, nil
}

// drop removes the database, disconnecting whoever is still on it.
func (d *database) drop(ctx context.Context) error {
	return d.exec(ctx, d.admin, "DROP DATABASE IF EXISTS "+d.name+" WITH (FORCE)")
}

func (d *database) exec(ctx context.Context, dsn, sql string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", redact(dsn), err)
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	_, err = conn.Exec(ctx, sql)
	return err
}

// walLSN is the server's current write-ahead log position: the difference
// of two is the bytes the server wrote to its log between them (every
// table and index change, the durable cost of the work).
func walLSN(ctx context.Context, dsn string) (int64, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var n int64
	err = conn.QueryRow(ctx, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint").Scan(&n)
	return n, err
}

// resultRowBytes is the mean size of a stored task result row
// (runner_actions_done), the durable minimum per task.
func resultRowBytes(ctx context.Context, dsn string) (float64, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	var n *float64
	err = conn.QueryRow(ctx, "SELECT avg(pg_column_size(a.*)) FROM runner_actions_done a").Scan(&n)
	if err != nil || n == nil {
		return 0, err
	}
	return *n, nil
}

// The COPY reference: rows shaped like runner_actions_done (with its
// unique index) written with COPY in large transactions on several
// connections, as fast as the server takes them — the physical limit for
// one durable row per task on this Postgres.
const (
	copyBatch = 5000
	copyConns = 4
)

const copyTable = `
CREATE TABLE bench_actions_done (
    id           bigserial PRIMARY KEY,
    instance_id  uuid NOT NULL,
    execution_id text COLLATE "C" NOT NULL,
    attempt      bigint NOT NULL,
    ok           boolean NOT NULL,
    output       bytea,
    error        text NOT NULL DEFAULT '',
    worker_id    text NOT NULL DEFAULT '',
    started_at   timestamptz,
    finished_at  timestamptz,
    recorded_at  timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX bench_actions_done_execution ON bench_actions_done (instance_id, execution_id, attempt DESC);`

// copyReference writes rows rows and returns rows per second.
func copyReference(ctx context.Context, dsn string, rows int) (float64, error) {
	setup, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer func() { _ = setup.Close(context.WithoutCancel(ctx)) }()
	if _, err := setup.Exec(ctx, copyTable); err != nil {
		return 0, fmt.Errorf("creating the COPY reference's table: %w", err)
	}
	conns := make([]*pgx.Conn, copyConns)
	for i := range conns {
		if conns[i], err = pgx.Connect(ctx, dsn); err != nil {
			return 0, err
		}
		defer func() { _ = conns[i].Close(context.WithoutCancel(ctx)) }()
	}
	cols := []string{"instance_id", "execution_id", "attempt", "ok", "output", "worker_id", "started_at", "finished_at"}
	output := []byte(`{"echo":"a result of about the size of an echo task's"}`)
	batches := make(chan int)
	var g errgroup.Group
	start := time.Now()
	for _, c := range conns {
		g.Go(func() error {
			var first error // keep taking batches, so that the sender never blocks
			for n := range batches {
				inst := uuid.New()
				now := time.Now()
				src := make([][]any, n)
				for i := range src {
					src[i] = []any{inst, fmt.Sprintf("t%d", i), int64(1), true, output, "w1/core/1", now, now}
				}
				if _, err := c.CopyFrom(ctx, pgx.Identifier{"bench_actions_done"}, cols, pgx.CopyFromRows(src)); err != nil && first == nil {
					first = err
				}
			}
			return first
		})
	}
	for left := rows; left > 0; left -= copyBatch {
		batches <- min(left, copyBatch)
	}
	close(batches)
	if err := g.Wait(); err != nil {
		return 0, fmt.Errorf("the COPY reference: %w", err)
	}
	return float64(rows) / time.Since(start).Seconds(), nil
}

// redact hides a DSN's password.
func redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		if i := strings.Index(dsn, "password="); i >= 0 {
			return dsn[:i] + "password=xxx"
		}
		return dsn
	}
	return u.Redacted()
}
