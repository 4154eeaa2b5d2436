package postgres

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
)

// Store is the Postgres adapter of port.Store. It is safe for concurrent
// use by many goroutines and by many nodes sharing one database.
type Store struct {
	pool  *pgxpool.Pool
	log   *zap.Logger
	conns *connWatch
	repl  replWatch

	stopHealth context.CancelFunc
	healthDone chan struct{}
	closeOnce  sync.Once
}

var _ port.Store = (*Store)(nil)

// Ping implements port.Store: one round trip to the server.
func (s *Store) Ping(ctx context.Context) error { return s.check(ctx, s.pool.Ping(ctx)) }

// Open connects to Postgres, applies the embedded migrations (several nodes
// may open at once: an advisory lock makes them take turns) and returns a
// ready Store. While the database cannot be reached or has no writable
// primary, it keeps trying for cfg.OpenTimeout. Close it when done.
func Open(ctx context.Context, cfg Config) (*Store, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(cfg.DSN)
	if err != nil {
		return nil, fmt.Errorf("postgres store: parsing DSN: %w", err)
	}
	pcfg.MaxConns = cfg.MaxConns
	if cfg.Schema != "" {
		pcfg.ConnConfig.RuntimeParams["search_path"] = pgx.Identifier{cfg.Schema}.Sanitize()
	}
	if cfg.Tracer != nil {
		pcfg.ConnConfig.Tracer = cfg.Tracer
	}
	connectTimeout := pcfg.ConnConfig.ConnectTimeout // the DSN's connect_timeout
	if connectTimeout == 0 {
		connectTimeout = cfg.ConnectTimeout
	}
	pcfg.ConnConfig.ConnectTimeout = connectTimeout
	pcfg.ConnConfig.DialFunc = dialer(connectTimeout, cfg.TCPTimeout)
	log := cfg.Logger.Named("store.postgres")
	s := &Store{log: log, conns: newConnWatch(log, &pcfg.ConnConfig.Config), healthDone: make(chan struct{})}
	pcfg.AfterConnect = s.conns.connected
	if s.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return nil, fmt.Errorf("postgres store: connecting: %w", err)
	}
	if err := s.migrateWhenReachable(ctx, cfg); err != nil {
		s.pool.Close()
		return nil, fmt.Errorf("postgres store: migrating: %w", err)
	}
	hctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stopHealth = stop
	go s.watchReplication(hctx, cfg.HealthInterval)
	return s, nil
}

// migrateWhenReachable applies the migrations, trying again while the
// database is unavailable, for up to cfg.OpenTimeout.
func (s *Store) migrateWhenReachable(ctx context.Context, cfg Config) error {
	deadline := time.Now().Add(cfg.OpenTimeout)
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := s.check(ctx, migrate(ctx, s.pool, cfg.Schema, s.log))
		if err == nil || !errors.Is(err, port.ErrStoreUnavailable) || time.Now().Add(backoff).After(deadline) {
			return err
		}
		if attempt == 1 || attempt%10 == 0 {
			s.log.Warn("the database is not available yet; retrying", zap.Int("attempt", attempt),
				zap.Duration("giving_up_in", time.Until(deadline).Round(time.Second)), zap.Error(err))
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// Close stops the replication watch and closes the connection pool,
// waiting for connections in use to be returned. It is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.stopHealth()
		<-s.healthDone
		s.pool.Close()
		s.log.Debug("closed")
	})
	return nil
}

// Pool returns the store's connection pool, for tests and tools that need
// to look at the tables directly.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// RegisterWorkflow implements port.Store. The insert and the read-back
// race safely with a concurrent registration: ON CONFLICT waits for the
// other transaction and then sees its row.
func (s *Store) RegisterWorkflow(ctx context.Context, wf port.WorkflowVersion) (port.WorkflowVersion, error) {
	if wf.Name == "" || wf.IRHash == "" {
		return port.WorkflowVersion{}, errors.New("register workflow: name and IR hash are required")
	}
	const q = `-- name: register_workflow
		WITH ins AS (
		    INSERT INTO workflow_versions (workflow_name, workflow_version, ir_hash, ir)
		    VALUES ($1, $2, $3, $4)
		    ON CONFLICT (workflow_name, workflow_version) DO NOTHING
		    RETURNING id, workflow_name, workflow_version, ir_hash, ir, created_at
		)
		SELECT * FROM ins
		UNION ALL
		SELECT id, workflow_name, workflow_version, ir_hash, ir, created_at
		FROM workflow_versions
		WHERE workflow_name = $1 AND workflow_version = $2 AND NOT EXISTS (SELECT 1 FROM ins)`
	got, err := s.queryWorkflow(ctx, q, wf.Name, int64(wf.Version), wf.IRHash, storeutil.NonNil(wf.IR))
	if err != nil {
		return port.WorkflowVersion{}, fmt.Errorf("register workflow %s v%d: %w", wf.Name, wf.Version, s.check(ctx, err))
	}
	if got.IRHash != wf.IRHash {
		return port.WorkflowVersion{}, fmt.Errorf("register workflow %s v%d: stored hash %s, new hash %s: %w",
			wf.Name, wf.Version, got.IRHash, wf.IRHash, port.ErrVersionConflict)
	}
	return got, nil
}

// GetWorkflow implements port.Store.
func (s *Store) GetWorkflow(ctx context.Context, name string, version uint32) (port.WorkflowVersion, error) {
	const q = `-- name: get_workflow
		SELECT id, workflow_name, workflow_version, ir_hash, ir, created_at
		FROM workflow_versions WHERE workflow_name = $1 AND workflow_version = $2`
	wf, err := s.queryWorkflow(ctx, q, name, int64(version))
	if err != nil {
		return port.WorkflowVersion{}, fmt.Errorf("get workflow %s v%d: %w", name, version, s.check(ctx, err))
	}
	return wf, nil
}

// GetWorkflowByID implements port.Store.
func (s *Store) GetWorkflowByID(ctx context.Context, id int64) (port.WorkflowVersion, error) {
	const q = `-- name: get_workflow_by_id
		SELECT id, workflow_name, workflow_version, ir_hash, ir, created_at
		FROM workflow_versions WHERE id = $1`
	wf, err := s.queryWorkflow(ctx, q, id)
	if err != nil {
		return port.WorkflowVersion{}, fmt.Errorf("get workflow %d: %w", id, s.check(ctx, err))
	}
	return wf, nil
}

// ListWorkflows implements port.Store.
func (s *Store) ListWorkflows(ctx context.Context, f port.WorkflowFilter) ([]port.WorkflowVersion, error) {
	const q = `-- name: list_workflows
		SELECT id, workflow_name, workflow_version, ir_hash, ir, created_at
		FROM workflow_versions
		WHERE $1 = '' OR workflow_name = $1
		ORDER BY workflow_name, workflow_version DESC
		LIMIT $2`
	rows, err := s.pool.Query(ctx, q, f.Name, storeutil.ListLimit(f.Limit, storeutil.DefaultWorkflowLimit))
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", s.check(ctx, err))
	}
	out, err := pgx.CollectRows(rows, scanWorkflow)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", s.check(ctx, err))
	}
	return out, nil
}

// queryWorkflow runs a query returning at most one workflow row.
func (s *Store) queryWorkflow(ctx context.Context, q string, args ...any) (port.WorkflowVersion, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return port.WorkflowVersion{}, err
	}
	wf, err := pgx.CollectExactlyOneRow(rows, scanWorkflow)
	if errors.Is(err, pgx.ErrNoRows) {
		return port.WorkflowVersion{}, port.ErrNotFound
	}
	return wf, err
}

func scanWorkflow(row pgx.CollectableRow) (port.WorkflowVersion, error) {
	var (
		wf      port.WorkflowVersion
		version int64
	)
	err := row.Scan(&wf.ID, &wf.Name, &version, &wf.IRHash, &wf.IR, &wf.CreatedAt)
	wf.Version = uint32(version) // the column's CHECK keeps it in range
	wf.CreatedAt = wf.CreatedAt.UTC()
	return wf, err
}
