package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
)

// refreshSQL extends the live leases the owner holds under a term no newer
// than its own, on instances of partitions no other runloop fenced. Rows
// are locked in id order first, so that two refreshes (or a refresh and a
// progress batch) of one owner cannot deadlock.
const refreshSQL = `-- name: refresh_leases
WITH mine AS (
    SELECT instance_id
    FROM queued_instances q
    WHERE instance_id = ANY($2::uuid[])
      AND lock_uuid = $1 AND lock_expires_at > now() AND term <= $3
      AND NOT EXISTS (SELECT 1 FROM partitions pt WHERE pt.partition = q.partition AND pt.owner <> $1)
    ORDER BY instance_id
    FOR NO KEY UPDATE
)
UPDATE queued_instances q
SET lock_expires_at = now() + $4 * interval '1 microsecond'
FROM mine
WHERE q.instance_id = mine.instance_id
RETURNING q.instance_id, q.cancel_requested`

// RefreshLeases implements port.Store. A lease is extended only while it
// is live and still the owner's, and its partition is not fenced by
// another runloop; an expired lease is lost even if nobody took it yet
// (the owner's writes were already being refused), and so is one in a
// partition fenced by another, however live.
func (s *Store) RefreshLeases(ctx context.Context, req port.LeaseRefresh) (port.LeaseStatus, error) {
	if len(req.IDs) == 0 {
		return port.LeaseStatus{}, nil
	}
	if err := storeutil.CheckRefresh(req); err != nil {
		return port.LeaseStatus{}, err
	}
	term, _ := storeutil.Term(req.Term) // checked above
	rows, err := s.pool.Query(ctx, refreshSQL, req.Owner, req.IDs, term, micros(req.Lease))
	if err != nil {
		return port.LeaseStatus{}, fmt.Errorf("refresh leases: %w", s.check(ctx, err))
	}
	var (
		st        port.LeaseStatus
		id        uuid.UUID
		cancelled bool
	)
	kept := make(map[uuid.UUID]bool, len(req.IDs))
	_, err = pgx.ForEachRow(rows, []any{&id, &cancelled}, func() error {
		kept[id] = true
		if cancelled {
			st.CancelRequested = append(st.CancelRequested, id)
		}
		return nil
	})
	if err != nil {
		return port.LeaseStatus{}, fmt.Errorf("refresh leases: %w", s.check(ctx, err))
	}
	for _, id := range req.IDs {
		if !kept[id] {
			st.Lost = append(st.Lost, id)
		}
	}
	return st, nil
}

// ReleaseLeases implements port.Store. The instances keep their status
// (running, if they ever ran) and their schedule; the next claim takes them.
func (s *Store) ReleaseLeases(ctx context.Context, owner uuid.UUID, ids []uuid.UUID) error {
	if len(ids) == 0 {
		return nil
	}
	const q = `-- name: release_leases
		UPDATE queued_instances
		SET lock_uuid = NULL, lock_expires_at = NULL
		WHERE instance_id = ANY($2::uuid[]) AND lock_uuid = $1`
	if _, err := s.pool.Exec(ctx, q, owner, ids); err != nil {
		return fmt.Errorf("release %d leases: %w", len(ids), s.check(ctx, err))
	}
	return nil
}

// ReclaimExpired implements port.Store. Claims already take expired
// leases; clearing them keeps the table honest for observers and lets a
// claim use the cheap "unlocked" branch. The term stays: it is the fencing
// history of the row.
func (s *Store) ReclaimExpired(ctx context.Context, limit int) (int, error) {
	if limit <= 0 {
		return 0, fmt.Errorf("reclaim expired: limit must be positive, got %d", limit)
	}
	const q = `-- name: reclaim_expired
		WITH expired AS (
		    SELECT instance_id
		    FROM queued_instances
		    WHERE lock_uuid IS NOT NULL AND lock_expires_at <= now()
		    ORDER BY lock_expires_at
		    LIMIT $1
		    FOR UPDATE SKIP LOCKED
		)
		UPDATE queued_instances q
		SET lock_uuid = NULL, lock_expires_at = NULL
		FROM expired
		WHERE q.instance_id = expired.instance_id`
	tag, err := s.pool.Exec(ctx, q, limit)
	if err != nil {
		return 0, fmt.Errorf("reclaim expired leases: %w", s.check(ctx, err))
	}
	return int(tag.RowsAffected()), nil
}

// RequestCancel implements port.Store. The flag is set on both the queue
// row (where claims and refreshes read it) and the runner row (which keeps
// it after completion), the wake counter goes up and the instance becomes
// due now.
func (s *Store) RequestCancel(ctx context.Context, id uuid.UUID) error {
	const q = `-- name: request_cancel
		WITH queue AS (
		    UPDATE queued_instances
		    SET cancel_requested = true, scheduled_at = least(scheduled_at, now()), wake = wake + 1
		    WHERE instance_id = $1
		    RETURNING instance_id
		),
		runner AS (
		    UPDATE runner_instances
		    SET cancel_requested = true, updated_at = now()
		    WHERE instance_id IN (SELECT instance_id FROM queue)
		)
		SELECT EXISTS (SELECT 1 FROM queue),
		       (SELECT status FROM runner_instances WHERE instance_id = $1)`
	var (
		live   bool
		status *string
	)
	if err := s.pool.QueryRow(ctx, q, id).Scan(&live, &status); err != nil {
		return fmt.Errorf("request cancel of instance %s: %w", id, s.check(ctx, err))
	}
	switch {
	case live:
		return nil
	case status == nil:
		return fmt.Errorf("request cancel of instance %s: %w", id, port.ErrNotFound)
	default:
		return fmt.Errorf("request cancel of instance %s: already %s: %w", id, *status, port.ErrNotFound)
	}
}

// Sweep implements port.Store. Deleting a runner row cascades to its
// action results and signals (foreign keys ON DELETE CASCADE), in the
// same statement.
func (s *Store) Sweep(ctx context.Context, req port.SweepRequest) (int, error) {
	if req.Before.IsZero() {
		return 0, errors.New("sweep: Before is required")
	}
	limit := req.Limit
	if limit <= 0 {
		limit = storeutil.DefaultSweepLimit
	}
	const q = `-- name: sweep
		WITH victims AS (
		    SELECT instance_id
		    FROM runner_instances
		    WHERE finished_at < $1 AND status IN ('complete', 'failed', 'cancelled')
		    ORDER BY finished_at
		    LIMIT $2
		    FOR UPDATE SKIP LOCKED
		)
		DELETE FROM runner_instances r
		USING victims v
		WHERE r.instance_id = v.instance_id`
	tag, err := s.pool.Exec(ctx, q, req.Before, limit)
	if err != nil {
		return 0, fmt.Errorf("sweep instances finished before %s: %w", req.Before, s.check(ctx, err))
	}
	return int(tag.RowsAffected()), nil
}
