package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
)

// Config configures a Store.
type Config struct {
	// Path is the database file, normally inside the node's --data-dir.
	// Its directory is created if missing.
	Path string
	// Logger receives the store's few log lines. nil: no logging.
	Logger *zap.Logger
	// Now is the store's clock (leases, schedules, timestamps). nil:
	// time.Now. One process owns the file, so the Go clock is the clock.
	Now func() time.Time
	// BusyTimeout bounds how long a connection waits for a lock held by
	// another process opening the same file. 0: 10 s.
	BusyTimeout time.Duration
	// MaxReaders bounds the read connections. 0: 4.
	MaxReaders int
}

// WithDefaults returns a copy of c with defaults filled in.
func (c Config) WithDefaults() Config {
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.BusyTimeout == 0 {
		c.BusyTimeout = 10 * time.Second
	}
	if c.MaxReaders == 0 {
		c.MaxReaders = 4
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Path == "":
		return errors.New("sqlite store: Path is required")
	case strings.ContainsRune(c.Path, '?'):
		return fmt.Errorf("sqlite store: Path %q must not contain '?'", c.Path)
	case c.BusyTimeout < 0 || c.MaxReaders < 0:
		return errors.New("sqlite store: BusyTimeout and MaxReaders must not be negative")
	}
	return nil
}

// Store is the SQLite adapter of port.Store, for a mesh with a single
// server. It is safe for concurrent use.
type Store struct {
	w   *sql.DB      // the single writer connection: every write goes through it
	ws  *writerStmts // its hot statements, prepared once
	r   *sql.DB      // read-only connections (WAL lets them read while a write runs)
	now func() time.Time
	log *zap.Logger

	closeOnce sync.Once
	closeErr  error
}

// Ping implements port.Store: the database file answers a read.
func (s *Store) Ping(ctx context.Context) error { return s.r.PingContext(ctx) }

var _ port.Store = (*Store)(nil)

// Open opens (creating if needed) the database file, applies the embedded
// migrations and returns a ready Store. Close it when done.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(cfg.Path), 0o750); err != nil {
		return nil, fmt.Errorf("sqlite store: creating the directory of %s: %w", cfg.Path, err)
	}

	busy := strconv.FormatInt(cfg.BusyTimeout.Milliseconds(), 10)
	// The writer: WAL (readers never block it, nor it them), full fsync on
	// commit (an acknowledged submission survives a power cut), foreign
	// keys on, and BEGIN IMMEDIATE so a write transaction holds the write
	// lock from its first statement.
	w, err := sql.Open("sqlite", cfg.Path+"?_pragma=busy_timeout("+busy+")&_pragma=journal_mode(wal)"+
		"&_pragma=synchronous(full)&_pragma=foreign_keys(1)&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("sqlite store: opening %s: %w", cfg.Path, err)
	}
	// One connection: writes are serialised in this process rather than
	// contending for SQLite's file lock.
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	log := cfg.Logger.Named("store.sqlite")
	if err := migrate(ctx, w, cfg.Now, log); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("sqlite store: migrating %s: %w", cfg.Path, err)
	}

	ws, err := prepareWriter(ctx, w)
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("sqlite store: %s: %w", cfg.Path, err)
	}

	r, err := sql.Open("sqlite", cfg.Path+"?_pragma=busy_timeout("+busy+")&_pragma=query_only(1)")
	if err != nil {
		_ = errors.Join(ws.close(), w.Close())
		return nil, fmt.Errorf("sqlite store: opening %s for reading: %w", cfg.Path, err)
	}
	r.SetMaxOpenConns(cfg.MaxReaders)
	r.SetMaxIdleConns(cfg.MaxReaders)

	return &Store{w: w, ws: ws, r: r, now: cfg.Now, log: log}, nil
}

// Close closes both connection pools. It is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(s.r.Close(), s.ws.close(), s.w.Close())
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("sqlite store: closing: %w", s.closeErr)
		}
	})
	return s.closeErr
}

// write runs fn in a write transaction (BEGIN IMMEDIATE on the single
// writer connection) and commits it. fn's statements run on a context
// without cancellation: the driver watches a cancellable context with a
// goroutine per statement (4–6 % of a busy server's CPU, most of its
// statements being one row each), and a cancelled ctx still ends the
// transaction — database/sql rolls it back, and fn's next statement fails
// — after the statement at hand: on the single in-process writer a
// statement is short, a sweep's bounded batch the longest.
func (s *Store) write(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(context.WithoutCancel(ctx), tx); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	return tx.Commit()
}

// ignoreDone drops the error of rolling back a transaction that is
// already over (its context was cancelled).
func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrate applies the embedded migrations not yet recorded in
// schema_migrations, each with its record in one write transaction. BEGIN
// IMMEDIATE takes SQLite's write lock first, so two processes opening the
// same file take turns.
func migrate(ctx context.Context, w *sql.DB, now func() time.Time, log *zap.Logger) error {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("reading embedded migrations: %w", err)
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })

	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit

	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("creating schema_migrations: %w", err)
	}
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil || !strings.HasSuffix(e.Name(), ".sql") {
			return fmt.Errorf("migration %q: name must be NNNN_name.sql", e.Name())
		}
		var applied bool
		if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM schema_migrations WHERE version = ?)`, version).Scan(&applied); err != nil {
			return fmt.Errorf("reading applied migrations: %w", err)
		}
		if applied {
			continue
		}
		body, err := migrationFiles.ReadFile("migrations/" + e.Name())
		if err != nil {
			return fmt.Errorf("reading migration %q: %w", e.Name(), err)
		}
		if _, err := tx.ExecContext(ctx, string(body)); err != nil {
			return fmt.Errorf("applying migration %s: %w", e.Name(), err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			version, e.Name(), now().UnixMicro()); err != nil {
			return fmt.Errorf("recording migration %s: %w", e.Name(), err)
		}
		log.Info("applied migration", zap.String("migration", e.Name()))
	}
	return tx.Commit()
}

// ------------------------------------------------------------ workflows

// RegisterWorkflow implements port.Store.
func (s *Store) RegisterWorkflow(ctx context.Context, wf port.WorkflowVersion) (port.WorkflowVersion, error) {
	if wf.Name == "" || wf.IRHash == "" {
		return port.WorkflowVersion{}, errors.New("register workflow: name and IR hash are required")
	}
	var got port.WorkflowVersion
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `
			INSERT INTO workflow_versions (workflow_name, workflow_version, ir_hash, ir, created_at)
			VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (workflow_name, workflow_version) DO NOTHING`,
			wf.Name, int64(wf.Version), wf.IRHash, storeutil.NonNil(wf.IR), s.now().UnixMicro()); err != nil {
			return err
		}
		var err error
		got, err = scanWorkflow(tx.QueryRowContext(ctx, selectWorkflow+` WHERE workflow_name = ? AND workflow_version = ?`,
			wf.Name, int64(wf.Version)))
		return err
	})
	if err != nil {
		return port.WorkflowVersion{}, fmt.Errorf("register workflow %s v%d: %w", wf.Name, wf.Version, err)
	}
	if got.IRHash != wf.IRHash {
		return port.WorkflowVersion{}, fmt.Errorf("register workflow %s v%d: stored hash %s, new hash %s: %w",
			wf.Name, wf.Version, got.IRHash, wf.IRHash, port.ErrVersionConflict)
	}
	return got, nil
}

const selectWorkflow = `SELECT id, workflow_name, workflow_version, ir_hash, ir, created_at FROM workflow_versions`

// GetWorkflow implements port.Store.
func (s *Store) GetWorkflow(ctx context.Context, name string, version uint32) (port.WorkflowVersion, error) {
	wf, err := scanWorkflow(s.r.QueryRowContext(ctx, selectWorkflow+` WHERE workflow_name = ? AND workflow_version = ?`, name, int64(version)))
	if err != nil {
		return port.WorkflowVersion{}, fmt.Errorf("get workflow %s v%d: %w", name, version, err)
	}
	return wf, nil
}

// GetWorkflowByID implements port.Store.
func (s *Store) GetWorkflowByID(ctx context.Context, id int64) (port.WorkflowVersion, error) {
	wf, err := scanWorkflow(s.r.QueryRowContext(ctx, selectWorkflow+` WHERE id = ?`, id))
	if err != nil {
		return port.WorkflowVersion{}, fmt.Errorf("get workflow %d: %w", id, err)
	}
	return wf, nil
}

// ListWorkflows implements port.Store.
func (s *Store) ListWorkflows(ctx context.Context, f port.WorkflowFilter) ([]port.WorkflowVersion, error) {
	rows, err := s.r.QueryContext(ctx, selectWorkflow+`
		WHERE ? = '' OR workflow_name = ?
		ORDER BY workflow_name, workflow_version DESC
		LIMIT ?`, f.Name, f.Name, storeutil.ListLimit(f.Limit, storeutil.DefaultWorkflowLimit))
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []port.WorkflowVersion
	for rows.Next() {
		wf, err := scanWorkflow(rows)
		if err != nil {
			return nil, fmt.Errorf("list workflows: %w", err)
		}
		out = append(out, wf)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	return out, nil
}

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanWorkflow(row scanner) (port.WorkflowVersion, error) {
	var (
		wf               port.WorkflowVersion
		version, created int64
	)
	err := row.Scan(&wf.ID, &wf.Name, &version, &wf.IRHash, &wf.IR, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return port.WorkflowVersion{}, port.ErrNotFound
	}
	wf.Version = uint32(version) // the column's CHECK keeps it in range
	wf.CreatedAt = fromMicros(created)
	return wf, err
}
