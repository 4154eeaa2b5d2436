package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
)

// FencePartitions implements port.Store in one write transaction: every
// partition is judged before any is written (one stale partition fails the
// call with nothing changed), then the ones to take are written. The
// single writer serialises fences with each other and with every write
// they gate.
func (s *Store) FencePartitions(ctx context.Context, req port.FenceRequest) error {
	parts, err := storeutil.CheckFence(req)
	if err != nil || len(parts) == 0 {
		return err
	}
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var take []int
		for _, p := range parts {
			stored, err := scanPartition(tx.QueryRowContext(ctx,
				`SELECT partition, owner, epoch, fenced_at FROM partitions WHERE partition = ?`, p))
			var row *port.PartitionOwner
			switch {
			case err == nil:
				row = &stored
			case !errors.Is(err, sql.ErrNoRows):
				return err
			}
			switch storeutil.JudgeFence(row, req.Owner, req.Epochs[p]) {
			case storeutil.FenceStale:
				return storeutil.ErrStaleEpoch(*row, req.Epochs[p])
			case storeutil.FenceTake:
				take = append(take, p)
			}
		}
		now := micros(s.now())
		for _, p := range take {
			epoch, _ := storeutil.Epoch(req.Epochs[p]) // checked by CheckFence
			if _, err := tx.ExecContext(ctx, `
				INSERT INTO partitions (partition, owner, epoch, fenced_at) VALUES (?, ?, ?, ?)
				ON CONFLICT (partition) DO UPDATE
				SET owner = excluded.owner, epoch = excluded.epoch, fenced_at = excluded.fenced_at`,
				p, req.Owner, epoch, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fence %d partitions for %s: %w", len(parts), req.Owner, err)
	}
	return nil
}

// Partitions implements port.Store.
func (s *Store) Partitions(ctx context.Context) ([]port.PartitionOwner, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT partition, owner, epoch, fenced_at FROM partitions ORDER BY partition`)
	if err != nil {
		return nil, fmt.Errorf("read partitions: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var out []port.PartitionOwner
	for rows.Next() {
		p, err := scanPartition(rows)
		if err != nil {
			return nil, fmt.Errorf("read partitions: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read partitions: %w", err)
	}
	return out, nil
}

func scanPartition(row scanner) (port.PartitionOwner, error) {
	var (
		p            port.PartitionOwner
		epoch, fence int64
	)
	err := row.Scan(&p.Partition, &p.Owner, &epoch, &fence)
	p.Epoch = uint64(epoch) // the column's CHECK keeps it positive
	p.FencedAt = fromMicros(fence)
	return p, err
}
