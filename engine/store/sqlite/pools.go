package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
)

// RecordPoolStats implements port.Store.
func (s *Store) RecordPoolStats(ctx context.Context, pools []port.PoolStatus) error {
	if len(pools) == 0 {
		return nil
	}
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, p := range pools {
			if _, err := tx.ExecContext(ctx, `
				INSERT INTO worker_status (pool_id, worker_id, capability, node, slots, in_flight, tasks_completed, tasks_failed,
				    throughput_per_min, latency_p50_ms, latency_p99_ms, updated_at)
				VALUES (?, '', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (pool_id, worker_id) DO UPDATE SET capability = excluded.capability, node = excluded.node,
				    slots = excluded.slots, in_flight = excluded.in_flight, tasks_completed = excluded.tasks_completed,
				    tasks_failed = excluded.tasks_failed, throughput_per_min = excluded.throughput_per_min,
				    latency_p50_ms = excluded.latency_p50_ms, latency_p99_ms = excluded.latency_p99_ms, updated_at = excluded.updated_at`,
				p.Node+"/"+p.Pool, p.Capability, p.Node, p.Slots, p.Busy, int64(p.Completed), int64(p.Failed), //nolint:gosec // counts fit
				float64(p.PerMinute), storeutil.Millis(p.LatencyP50), storeutil.Millis(p.LatencyP99), micros(p.UpdatedAt)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("record pool stats: %w", err)
	}
	return nil
}

// ListPoolStats implements port.Store.
func (s *Store) ListPoolStats(ctx context.Context) ([]port.PoolStatus, error) {
	rows, err := s.r.QueryContext(ctx, `
		SELECT pool_id, node, capability, slots, in_flight, tasks_completed, tasks_failed, throughput_per_min,
		    latency_p50_ms, latency_p99_ms, updated_at
		FROM worker_status WHERE worker_id = '' ORDER BY node, capability, pool_id`)
	if err != nil {
		return nil, fmt.Errorf("list pool stats: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []port.PoolStatus
	for rows.Next() {
		var (
			p                 port.PoolStatus
			id                string
			completed, failed int64
			perMin, p50, p99  float64
			updated           int64
		)
		if err := rows.Scan(&id, &p.Node, &p.Capability, &p.Slots, &p.Busy, &completed, &failed, &perMin, &p50, &p99, &updated); err != nil {
			return nil, fmt.Errorf("list pool stats: %w", err)
		}
		p.Pool = id[min(len(id), len(p.Node)+1):]
		p.Completed, p.Failed, p.PerMinute = uint64(completed), uint64(failed), int(perMin) //nolint:gosec // stored from uint64
		p.LatencyP50, p.LatencyP99 = storeutil.FromMillis(p50), storeutil.FromMillis(p99)
		p.UpdatedAt = fromMicros(updated)
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list pool stats: %w", err)
	}
	return out, nil
}
