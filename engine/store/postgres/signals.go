package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
)

// signalColumns are the columns scanSignal reads from instance_signals g.
const signalColumns = `g.seq, g.instance_id, g.name, g.payload, coalesce(g.idempotency_key, ''), g.created_at, g.consumed_by`

// scanSignal reads one row of signalColumns.
func scanSignal(row pgx.CollectableRow) (engine.SignalRecord, error) {
	var (
		rec engine.SignalRecord
		by  pgtype.Text
	)
	err := row.Scan(&rec.Seq, &rec.InstanceID, &rec.Name, &rec.Payload, &rec.IdempotencyKey, &rec.CreatedAt, &by)
	rec.CreatedAt = rec.CreatedAt.UTC()
	rec.Consumed, rec.ConsumedBy = by.Valid, by.String
	return rec, err
}

// RecordSignal implements engine.Store in one transaction. It locks the
// instance's queue row first, so that every recording, consumption (a
// progress batch locks the row too) and park of the instance is ordered:
// the idempotency key and the count of unconsumed signals are read after
// the lock, each by a statement of its own (READ COMMITTED: with a
// snapshot that sees whatever committed before the lock was granted).
// The insert and the wake bump commit together, so a claim or park that
// sees the new wake sees the signal.
func (s *Store) RecordSignal(ctx context.Context, sig engine.NewSignal) (engine.SignalRecord, int64, bool, error) {
	sig, err := storeutil.PrepareSignal(sig)
	if err != nil {
		return engine.SignalRecord{}, 0, false, err
	}
	op := fmt.Sprintf("record signal %q for", sig.Name)
	var (
		rec      engine.SignalRecord
		wake     int64
		existing bool
		status   string // of an instance that is not live
	)
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		const lock = `-- name: signal_lock
			SELECT wake FROM queued_instances WHERE instance_id = $1 FOR NO KEY UPDATE`
		err := tx.QueryRow(ctx, lock, sig.InstanceID).Scan(&wake)
		if errors.Is(err, pgx.ErrNoRows) {
			const q = `-- name: signal_status
				SELECT status FROM runner_instances WHERE instance_id = $1`
			if err := tx.QueryRow(ctx, q, sig.InstanceID).Scan(&status); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			return errNotLive
		}
		if err != nil {
			return err
		}
		if sig.IdempotencyKey != "" {
			const q = `-- name: signal_by_key
				SELECT ` + signalColumns + ` FROM instance_signals g WHERE g.instance_id = $1 AND g.idempotency_key = $2`
			rows, err := tx.Query(ctx, q, sig.InstanceID, sig.IdempotencyKey)
			if err != nil {
				return err
			}
			rec, err = pgx.CollectExactlyOneRow(rows, scanSignal)
			if err == nil {
				existing = true
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		if sig.MaxPending > 0 {
			const q = `-- name: signal_pending
				SELECT count(*) FROM instance_signals WHERE instance_id = $1 AND consumed_by IS NULL`
			var n int
			if err := tx.QueryRow(ctx, q, sig.InstanceID).Scan(&n); err != nil {
				return err
			}
			if n >= sig.MaxPending {
				return fmt.Errorf("%d unconsumed signals, the limit: %w", n, engine.ErrTooManySignals)
			}
		}
		const q = `-- name: signal_insert
			WITH ins AS (
			    INSERT INTO instance_signals (instance_id, name, payload, idempotency_key)
			    VALUES ($1, $2, $3, $4)
			    RETURNING seq, created_at
			),
			queue AS (
			    UPDATE queued_instances
			    SET wake = wake + 1, scheduled_at = least(scheduled_at, now())
			    WHERE instance_id = $1
			    RETURNING wake
			)
			SELECT ins.seq, ins.created_at, queue.wake FROM ins, queue`
		key := pgtype.Text{String: sig.IdempotencyKey, Valid: sig.IdempotencyKey != ""}
		if err := tx.QueryRow(ctx, q, sig.InstanceID, sig.Name, sig.Payload, key).Scan(&rec.Seq, &rec.CreatedAt, &wake); err != nil {
			return err
		}
		rec.InstanceID, rec.Name, rec.Payload, rec.IdempotencyKey = sig.InstanceID, sig.Name, sig.Payload, sig.IdempotencyKey
		rec.CreatedAt = rec.CreatedAt.UTC()
		return nil
	})
	switch {
	case errors.Is(err, errNotLive):
		return engine.SignalRecord{}, 0, false, storeutil.NotLive(op, sig.InstanceID, status)
	case err != nil:
		return engine.SignalRecord{}, 0, false, fmt.Errorf("%s instance %s: %w", op, sig.InstanceID, s.check(ctx, err))
	}
	return rec, wake, existing, nil
}

// errNotLive ends a transaction that found no queue row for the instance.
var errNotLive = errors.New("instance is not live")

// ListSignals implements engine.Store: every signal by seq, and whether
// the instance exists (an unknown one is ErrNotFound, a known one without
// signals has none), in one batch: one round trip.
func (s *Store) ListSignals(ctx context.Context, id uuid.UUID) ([]engine.SignalRecord, error) {
	const list = `-- name: list_signals
		SELECT ` + signalColumns + `
		FROM instance_signals g
		WHERE g.instance_id = $1
		ORDER BY g.seq`
	const known = `-- name: instance_known
		SELECT EXISTS (SELECT 1 FROM runner_instances WHERE instance_id = $1)`
	var (
		out   []engine.SignalRecord
		found bool
	)
	b := &pgx.Batch{}
	b.Queue(known, id).QueryRow(func(row pgx.Row) error { return row.Scan(&found) })
	b.Queue(list, id).Query(func(rows pgx.Rows) error {
		var err error
		out, err = pgx.CollectRows(rows, scanSignal)
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("signals of instance %s: %w", id, s.check(ctx, err))
	}
	if !found {
		return nil, fmt.Errorf("signals of instance %s: %w", id, engine.ErrNotFound)
	}
	return out, nil
}

// SetPaused implements engine.Store: one statement, like RequestCancel.
// The flag lives on the runner row (reads and claims show it); the queue
// row's wake counter goes up, and on resume the instance is due now.
func (s *Store) SetPaused(ctx context.Context, id uuid.UUID, paused bool) (int64, error) {
	const q = `-- name: set_paused
		WITH queue AS (
		    UPDATE queued_instances
		    SET wake = wake + 1,
		        scheduled_at = CASE WHEN $2 THEN scheduled_at ELSE least(scheduled_at, now()) END
		    WHERE instance_id = $1
		    RETURNING instance_id, wake
		),
		runner AS (
		    UPDATE runner_instances
		    SET paused = $2, updated_at = now()
		    WHERE instance_id IN (SELECT instance_id FROM queue)
		)
		SELECT (SELECT wake FROM queue),
		       (SELECT status FROM runner_instances WHERE instance_id = $1)`
	op := "resume"
	if paused {
		op = "pause"
	}
	var (
		wake   *int64
		status *string
	)
	if err := s.pool.QueryRow(ctx, q, id, paused).Scan(&wake, &status); err != nil {
		return 0, fmt.Errorf("%s instance %s: %w", op, id, s.check(ctx, err))
	}
	switch {
	case wake != nil:
		return *wake, nil
	case status == nil:
		return 0, storeutil.NotLive(op, id, "")
	default:
		return 0, storeutil.NotLive(op, id, *status)
	}
}

// ReopenInstance implements engine.Store in one transaction: the runner
// row is locked and its status judged, then rewritten and given a queue
// row. The queue row's wake counter starts at the instance's signal count,
// so it is above zero whenever an unconsumed signal may wait
// (claimSignalsSQL reads only such rows).
func (s *Store) ReopenInstance(ctx context.Context, req engine.ReopenRequest) (engine.Reopened, error) {
	if err := storeutil.CheckReopen(req); err != nil {
		return engine.Reopened{}, err
	}
	var (
		out     engine.Reopened
		refused bool
	)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		const lock = `-- name: reopen_lock
			SELECT status FROM runner_instances WHERE instance_id = $1 FOR UPDATE`
		var status string
		err := tx.QueryRow(ctx, lock, req.ID).Scan(&status)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		out.Status = engine.InstanceStatus(status)
		if out.Status != engine.StatusFailed && out.Status != engine.StatusCancelled {
			refused = true
			return nil
		}
		const q = `-- name: reopen
			WITH runner AS (
			    UPDATE runner_instances
			    SET status = 'running', state = $2, output = NULL, error = '', finished_at = NULL,
			        gathering_at = NULL, cancel_requested = false, paused = false, runs = runs + 1, updated_at = now()
			    WHERE instance_id = $1
			    RETURNING runs
			),
			queue AS (
			    INSERT INTO queued_instances (instance_id, scheduled_at, partition, wake)
			    SELECT $1, now(), $3, (SELECT count(*) FROM instance_signals WHERE instance_id = $1)
			    FROM runner
			)
			SELECT runs FROM runner`
		return tx.QueryRow(ctx, q, req.ID, storeutil.NonNil(req.State), int32(req.Partition)).Scan(&out.Run) // CheckReopen bounds the partition
	})
	switch {
	case err != nil:
		return engine.Reopened{}, fmt.Errorf("reopen instance %s: %w", req.ID, s.check(ctx, err))
	case refused:
		return engine.Reopened{}, storeutil.ReopenRefused(req.ID, out.Status)
	}
	return out, nil
}
