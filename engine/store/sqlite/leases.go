package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
)

// RefreshLeases implements port.Store: extends the live leases the owner
// holds under a term no newer than its own, on instances of partitions no
// other runloop fenced; the rest are lost.
func (s *Store) RefreshLeases(ctx context.Context, req port.LeaseRefresh) (port.LeaseStatus, error) {
	if len(req.IDs) == 0 {
		return port.LeaseStatus{}, nil
	}
	if err := storeutil.CheckRefresh(req); err != nil {
		return port.LeaseStatus{}, err
	}
	term, _ := storeutil.Term(req.Term) // checked above
	var st port.LeaseStatus
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		now := s.now()
		rows, err := tx.QueryContext(ctx, `
			UPDATE queued_instances AS q SET lock_expires_at = ?1
			WHERE instance_id IN (SELECT value FROM json_each(?2))
			  AND lock_uuid = ?3 AND lock_expires_at > ?4 AND term <= ?5
			  AND NOT EXISTS (SELECT 1 FROM partitions pt WHERE pt.partition = q.partition AND pt.owner <> ?3)
			RETURNING instance_id, cancel_requested`,
			micros(now.Add(req.Lease)), idList(req.IDs), req.Owner, micros(now), term)
		if err != nil {
			return err
		}
		defer func() { _ = rows.Close() }()
		kept := make(map[uuid.UUID]bool, len(req.IDs))
		for rows.Next() {
			var (
				id        uuid.UUID
				cancelled bool
			)
			if err := rows.Scan(&id, &cancelled); err != nil {
				return err
			}
			kept[id] = true
			if cancelled {
				st.CancelRequested = append(st.CancelRequested, id)
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, id := range req.IDs {
			if !kept[id] {
				st.Lost = append(st.Lost, id)
			}
		}
		return nil
	})
	if err != nil {
		return port.LeaseStatus{}, fmt.Errorf("refresh leases: %w", err)
	}
	return st, nil
}

// ReleaseLeases implements port.Store.
func (s *Store) ReleaseLeases(ctx context.Context, owner uuid.UUID, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
			UPDATE queued_instances SET lock_uuid = NULL, lock_expires_at = NULL
			WHERE instance_id IN (SELECT value FROM json_each(?)) AND lock_uuid = ?`, idList(ids), owner)
		return err
	})
	if err != nil {
		return fmt.Errorf("release %d leases: %w", len(ids), err)
	}
	return nil
}

// ReclaimExpired implements port.Store. The term stays on the row.
func (s *Store) ReclaimExpired(ctx context.Context, limit int) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("reclaim expired: limit must be positive, got %d", limit)
	}
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `
			UPDATE queued_instances SET lock_uuid = NULL, lock_expires_at = NULL
			WHERE instance_id IN (
			    SELECT instance_id FROM queued_instances
			    WHERE lock_uuid IS NOT NULL AND lock_expires_at <= ?
			    ORDER BY lock_expires_at
			    LIMIT ?)`, micros(s.now()), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("reclaim expired leases: %w", err)
	}
	return int(n), nil
}

// RequestCancel implements port.Store.
func (s *Store) RequestCancel(ctx context.Context, id uuid.UUID) error {
	var (
		live   bool
		status sql.NullString // of an instance that is not live; NULL: unknown
	)
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		now := micros(s.now())
		res, err := tx.ExecContext(ctx, `
			UPDATE queued_instances SET cancel_requested = 1, scheduled_at = min(scheduled_at, ?), wake = wake + 1
			WHERE instance_id = ?`, now, id)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return err
		}
		if live = n == 1; live {
			_, err = tx.ExecContext(ctx, `UPDATE runner_instances SET cancel_requested = 1, updated_at = ? WHERE instance_id = ?`, now, id)
			return err
		}
		err = tx.QueryRowContext(ctx, `SELECT status FROM runner_instances WHERE instance_id = ?`, id).Scan(&status)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		return err
	})
	switch {
	case err != nil:
		return fmt.Errorf("request cancel of instance %s: %w", id, err)
	case live:
		return nil
	case !status.Valid:
		return fmt.Errorf("request cancel of instance %s: %w", id, port.ErrNotFound)
	default:
		return fmt.Errorf("request cancel of instance %s: already %s: %w", id, status.String, port.ErrNotFound)
	}
}

// Sweep implements port.Store. Deleting a runner row cascades to its
// action results and signals (foreign keys are on).
func (s *Store) Sweep(ctx context.Context, req port.SweepRequest) (int, error) {
	if req.Before.IsZero() {
		return 0, errors.New("sweep: Before is required")
	}
	limit := req.Limit
	if limit <= 0 {
		limit = storeutil.DefaultSweepLimit
	}
	var n int64
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `
			DELETE FROM runner_instances
			WHERE instance_id IN (
			    SELECT instance_id FROM runner_instances
			    WHERE finished_at < ? AND status IN ('complete', 'failed', 'cancelled')
			    ORDER BY finished_at
			    LIMIT ?)`, micros(req.Before), limit)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("sweep instances finished before %s: %w", req.Before, err)
	}
	return int(n), nil
}
