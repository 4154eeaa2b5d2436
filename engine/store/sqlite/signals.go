package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
)

// signalColumns are the columns scanSignal reads from instance_signals.
const signalColumns = `seq, instance_id, name, payload, coalesce(idempotency_key, ''), created_at, consumed_by`

// scanSignal reads one row of signalColumns.
func scanSignal(row scanner) (port.SignalRecord, error) {
	var (
		rec     port.SignalRecord
		created int64
		by      sql.NullString
	)
	err := row.Scan(&rec.Seq, &rec.InstanceID, &rec.Name, &rec.Payload, &rec.IdempotencyKey, &created, &by)
	rec.CreatedAt = fromMicros(created)
	rec.Consumed, rec.ConsumedBy = by.Valid, by.String
	return rec, err
}

// scanSignals reads the rows of pendingSignalsSQL (instance, seq, name,
// payload, key, created: unconsumed signals) and closes them.
func scanSignals(rows *sql.Rows, err error) ([]port.SignalRecord, error) {
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []port.SignalRecord
	for rows.Next() {
		var (
			rec     port.SignalRecord
			created int64
		)
		if err := rows.Scan(&rec.InstanceID, &rec.Seq, &rec.Name, &rec.Payload, &rec.IdempotencyKey, &created); err != nil {
			return nil, err
		}
		rec.CreatedAt = fromMicros(created)
		out = append(out, rec)
	}
	return out, rows.Err()
}

// liveStatus returns the status of an instance that has no queue row ("":
// unknown), for storeutil.NotLive.
func liveStatus(ctx context.Context, tx *sql.Tx, id uuid.UUID) (string, error) {
	var status string
	err := tx.QueryRowContext(ctx, `SELECT status FROM runner_instances WHERE instance_id = ?`, id).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return status, err
}

// RecordSignal implements port.Store: RecordSignals of one signal.
func (s *Store) RecordSignal(ctx context.Context, sig port.NewSignal) (port.SignalRecord, int64, bool, error) {
	return storeutil.OneSignal(s.RecordSignals(ctx, []port.NewSignal{sig}))
}

// RecordSignals implements port.Store: one write transaction on the only
// writer (one commit, one fsync, for the whole batch), so the reads of the
// wake counters, keys and unconsumed signals, the inserts and the wake
// bumps see no other write in between. storeutil.SignalBatch decides.
func (s *Store) RecordSignals(ctx context.Context, sigs []port.NewSignal) ([]port.SignalOutcome, error) {
	if len(sigs) == 0 {
		return nil, nil
	}
	b := storeutil.NewSignalBatch(sigs)
	if b.Empty() {
		return b.Outcomes(), nil
	}
	var out []port.SignalOutcome
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		st, err := s.signalState(ctx, tx, b)
		if err != nil {
			return err
		}
		inserts, bumps := b.Plan(st)
		now := micros(s.now())
		seqs, created := make([]int64, len(inserts)), make([]time.Time, len(inserts))
		insert := tx.StmtContext(ctx, s.ws.insertSignal)
		for k, sig := range inserts {
			key := sql.NullString{String: sig.IdempotencyKey, Valid: sig.IdempotencyKey != ""}
			if err := insert.QueryRowContext(ctx, sig.InstanceID, sig.Name, sig.Payload, key, now).Scan(&seqs[k]); err != nil {
				return err
			}
			created[k] = fromMicros(now)
		}
		bump := tx.StmtContext(ctx, s.ws.bumpWake)
		for _, w := range bumps {
			if _, err := bump.ExecContext(ctx, w.N, now, w.InstanceID); err != nil {
				return err
			}
		}
		out, err = b.Recorded(seqs, created)
		return err
	})
	if err != nil {
		return nil, b.Fail(err)
	}
	return out, nil
}

// signalState reads what b's plan needs (storeutil.SignalState), one
// prepared query per instance or key: the writer's reads are in-process.
func (s *Store) signalState(ctx context.Context, tx *sql.Tx, b *storeutil.SignalBatch) (storeutil.SignalState, error) {
	st := storeutil.SignalState{Wake: map[uuid.UUID]int64{}, Status: map[uuid.UUID]string{},
		Keyed: map[storeutil.SignalKey]port.SignalRecord{}, Pending: map[uuid.UUID]int{}}
	wake := tx.StmtContext(ctx, s.ws.signalWake)
	for _, id := range b.IDs() {
		var w int64
		err := wake.QueryRowContext(ctx, id).Scan(&w)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			status, err := liveStatus(ctx, tx, id)
			if err != nil {
				return st, err
			}
			if status != "" {
				st.Status[id] = status
			}
		case err != nil:
			return st, err
		default:
			st.Wake[id] = w
		}
	}
	byKey := tx.StmtContext(ctx, s.ws.signalByKey)
	for _, k := range b.Keys(st.Wake) {
		rec, err := scanSignal(byKey.QueryRowContext(ctx, k.InstanceID, k.Key))
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return st, err
		default:
			st.Keyed[k] = rec
		}
	}
	count := tx.StmtContext(ctx, s.ws.signalCount)
	for _, id := range b.Capped(st.Wake) {
		var n int
		if err := count.QueryRowContext(ctx, id).Scan(&n); err != nil {
			return st, err
		}
		st.Pending[id] = n
	}
	return st, nil
}

// ListSignals implements port.Store: every signal by seq, in one read
// transaction with the check that the instance exists (unknown:
// ErrNotFound).
func (s *Store) ListSignals(ctx context.Context, id uuid.UUID) ([]port.SignalRecord, error) {
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("signals of instance %s: %w", id, err)
	}
	defer func() { _ = tx.Rollback() }()
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM runner_instances WHERE instance_id = ?)`, id).Scan(&exists); err != nil {
		return nil, fmt.Errorf("signals of instance %s: %w", id, err)
	}
	if !exists {
		return nil, fmt.Errorf("signals of instance %s: %w", id, port.ErrNotFound)
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+signalColumns+` FROM instance_signals WHERE instance_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("signals of instance %s: %w", id, err)
	}
	defer func() { _ = rows.Close() }()
	var out []port.SignalRecord
	for rows.Next() {
		rec, err := scanSignal(rows)
		if err != nil {
			return nil, fmt.Errorf("signals of instance %s: %w", id, err)
		}
		out = append(out, rec)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("signals of instance %s: %w", id, err)
	}
	return out, nil
}

// SetPaused implements port.Store: the flag on the runner row, the wake
// counter on the queue row, and on resume the instance due now.
func (s *Store) SetPaused(ctx context.Context, id uuid.UUID, paused bool) (int64, error) {
	op := "resume"
	if paused {
		op = "pause"
	}
	var (
		wake   int64
		live   bool
		status string
	)
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		now := micros(s.now())
		err := tx.QueryRowContext(ctx, `
			UPDATE queued_instances
			SET wake = wake + 1, scheduled_at = CASE WHEN ?1 THEN scheduled_at ELSE min(scheduled_at, ?2) END
			WHERE instance_id = ?3 RETURNING wake`, paused, now, id).Scan(&wake)
		if errors.Is(err, sql.ErrNoRows) {
			status, err = liveStatus(ctx, tx, id)
			return err
		}
		if err != nil {
			return err
		}
		live = true
		_, err = tx.ExecContext(ctx, `UPDATE runner_instances SET paused = ?, updated_at = ? WHERE instance_id = ?`, paused, now, id)
		return err
	})
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s instance %s: %w", op, id, err)
	case !live:
		return 0, storeutil.NotLive(op, id, status)
	}
	return wake, nil
}

// ReopenInstance implements port.Store: one write transaction that
// judges the status, rewrites the runner row and queues the instance again.
// The queue row's wake counter starts at the instance's signal count, as
// in the Postgres adapter.
func (s *Store) ReopenInstance(ctx context.Context, req port.ReopenRequest) (port.Reopened, error) {
	if err := storeutil.CheckReopen(req); err != nil {
		return port.Reopened{}, err
	}
	var (
		out     port.Reopened
		refused bool
	)
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		status, err := liveStatus(ctx, tx, req.ID)
		if err != nil {
			return err
		}
		out.Status = port.InstanceState(status)
		if out.Status != port.StateFailed && out.Status != port.StateCancelled {
			refused = true
			return nil
		}
		now := micros(s.now())
		if err := tx.QueryRowContext(ctx, `
			UPDATE runner_instances
			SET status = 'running', state = ?, output = NULL, error = '', finished_at = NULL,
			    gathering_at = NULL, cancel_requested = 0, paused = 0, runs = runs + 1, updated_at = ?
			WHERE instance_id = ? RETURNING runs`, storeutil.NonNil(req.State), now, req.ID).Scan(&out.Run); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `
			INSERT INTO queued_instances (instance_id, scheduled_at, created_at, partition, wake)
			VALUES (?1, ?2, ?2, ?3, (SELECT count(*) FROM instance_signals WHERE instance_id = ?1))`, req.ID, now, req.Partition)
		return err
	})
	switch {
	case err != nil:
		return port.Reopened{}, fmt.Errorf("reopen instance %s: %w", req.ID, err)
	case refused:
		return port.Reopened{}, storeutil.ReopenRefused(req.ID, out.Status)
	}
	return out, nil
}
