package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
)

// RecordPoolStats implements port.Store: one batch, one transaction.
func (s *Store) RecordPoolStats(ctx context.Context, pools []port.PoolStatus) error {
	if len(pools) == 0 {
		return nil
	}
	const q = `-- name: record_pool_stats
		INSERT INTO worker_status (pool_id, worker_id, capability, node, slots, in_flight, tasks_completed, tasks_failed,
		    throughput_per_min, latency_p50_ms, latency_p99_ms, updated_at)
		VALUES ($1, '', $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
		ON CONFLICT (pool_id, worker_id) DO UPDATE SET capability = excluded.capability, node = excluded.node,
		    slots = excluded.slots, in_flight = excluded.in_flight, tasks_completed = excluded.tasks_completed,
		    tasks_failed = excluded.tasks_failed, throughput_per_min = excluded.throughput_per_min,
		    latency_p50_ms = excluded.latency_p50_ms, latency_p99_ms = excluded.latency_p99_ms, updated_at = excluded.updated_at`
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		b := &pgx.Batch{}
		for _, p := range pools {
			b.Queue(q, p.Node+"/"+p.Pool, p.Capability, p.Node, p.Slots, p.Busy, int64(p.Completed), int64(p.Failed), //nolint:gosec // counts fit
				float64(p.PerMinute), storeutil.Millis(p.LatencyP50), storeutil.Millis(p.LatencyP99), p.UpdatedAt)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("record pool stats: %w", s.check(ctx, err))
	}
	return nil
}

// ListPoolStats implements port.Store.
func (s *Store) ListPoolStats(ctx context.Context) ([]port.PoolStatus, error) {
	rows, err := s.pool.Query(ctx, `-- name: list_pool_stats
		SELECT pool_id, node, capability, slots, in_flight, tasks_completed, tasks_failed, throughput_per_min,
		    latency_p50_ms, latency_p99_ms, updated_at
		FROM worker_status WHERE worker_id = '' ORDER BY node, capability, pool_id`)
	if err != nil {
		return nil, fmt.Errorf("list pool stats: %w", s.check(ctx, err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (port.PoolStatus, error) {
		var (
			p                 port.PoolStatus
			id                string
			completed, failed int64
			perMin, p50, p99  float64
		)
		if err := row.Scan(&id, &p.Node, &p.Capability, &p.Slots, &p.Busy, &completed, &failed, &perMin, &p50, &p99, &p.UpdatedAt); err != nil {
			return p, err
		}
		p.Pool = id[min(len(id), len(p.Node)+1):]
		p.Completed, p.Failed, p.PerMinute = uint64(completed), uint64(failed), int(perMin) //nolint:gosec // stored from uint64
		p.LatencyP50, p.LatencyP99 = storeutil.FromMillis(p50), storeutil.FromMillis(p99)
		p.UpdatedAt = p.UpdatedAt.UTC()
		return p, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list pool stats: %w", s.check(ctx, err))
	}
	return out, nil
}
