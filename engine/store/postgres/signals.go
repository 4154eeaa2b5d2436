package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
)

// signalColumns are the columns scanSignal reads from instance_signals g.
const signalColumns = `g.seq, g.instance_id, g.name, g.payload, coalesce(g.idempotency_key, ''), g.created_at, g.consumed_by`

// scanSignal reads one row of signalColumns.
func scanSignal(row pgx.CollectableRow) (port.SignalRecord, error) {
	var (
		rec port.SignalRecord
		by  pgtype.Text
	)
	err := row.Scan(&rec.Seq, &rec.InstanceID, &rec.Name, &rec.Payload, &rec.IdempotencyKey, &rec.CreatedAt, &by)
	rec.CreatedAt = rec.CreatedAt.UTC()
	rec.Consumed, rec.ConsumedBy = by.Valid, by.String
	return rec, err
}

// RecordSignal implements port.Store: RecordSignals of one signal.
func (s *Store) RecordSignal(ctx context.Context, sig port.NewSignal) (port.SignalRecord, int64, bool, error) {
	return storeutil.OneSignal(s.RecordSignals(ctx, []port.NewSignal{sig}))
}

// signalLockSQL locks the queue rows of a batch's instances ($1), in id
// order: two batches (and PersistProgress's `owned`, which locks in the
// same order) that share instances take turns instead of deadlocking.
const signalLockSQL = `-- name: signal_lock
SELECT instance_id, wake FROM queued_instances
WHERE instance_id = ANY($1::uuid[])
ORDER BY instance_id
FOR NO KEY UPDATE`

// signalStatusSQL reads the status of instances ($1: those the lock did
// not find, not live), for the refusal's message.
const signalStatusSQL = `-- name: signal_status
SELECT instance_id, status FROM runner_instances WHERE instance_id = ANY($1::uuid[])`

// signalByKeySQL reads the signals that hold the keys ($2) of instances
// ($1).
const signalByKeySQL = `-- name: signal_by_key
SELECT ` + signalColumns + `
FROM instance_signals g
JOIN unnest($1::uuid[], $2::text[]) AS k(instance_id, idempotency_key)
     ON g.instance_id = k.instance_id AND g.idempotency_key = k.idempotency_key`

// signalPendingSQL counts the unconsumed signals of instances ($1).
const signalPendingSQL = `-- name: signal_pending
SELECT instance_id, count(*) FROM instance_signals
WHERE instance_id = ANY($1::uuid[]) AND consumed_by IS NULL
GROUP BY instance_id`

// signalInsertSQL inserts a batch's signals ($1 … $4) in input order, so
// their Seqs increase in that order, and bumps each instance's ($5) wake
// counter by its count ($6), making it due now. It returns the Seqs and
// creation times, by Seq.
const signalInsertSQL = `-- name: signal_insert
WITH ins AS (
    INSERT INTO instance_signals (instance_id, name, payload, idempotency_key)
    SELECT s.instance_id, s.name, s.payload, s.idempotency_key
    FROM unnest($1::uuid[], $2::text[], $3::bytea[], $4::text[])
         WITH ORDINALITY AS s(instance_id, name, payload, idempotency_key, ord)
    ORDER BY s.ord
    RETURNING seq, created_at
),
queue AS (
    UPDATE queued_instances q
    SET wake = q.wake + w.n, scheduled_at = least(q.scheduled_at, now())
    FROM unnest($5::uuid[], $6::bigint[]) AS w(instance_id, n)
    WHERE q.instance_id = w.instance_id
)
SELECT seq, created_at FROM ins ORDER BY seq`

// RecordSignals implements port.Store in one transaction (one commit for
// the batch). It locks the batch's queue rows first (signalLockSQL), so
// that every recording, consumption (a progress batch locks the rows too)
// and park of an instance is ordered: the statuses, idempotency keys and
// counts of unconsumed signals are read after the lock, each by a
// statement of its own (READ COMMITTED: with a snapshot that sees whatever
// committed before the lock was granted), pipelined in one round trip
// after it. storeutil.SignalBatch decides; one statement then inserts
// the signals and bumps the wake counters, so a claim or park that sees
// a new wake sees its signals.
func (s *Store) RecordSignals(ctx context.Context, sigs []port.NewSignal) ([]port.SignalOutcome, error) {
	if len(sigs) == 0 {
		return nil, nil
	}
	b := storeutil.NewSignalBatch(sigs)
	if b.Empty() {
		return b.Outcomes(), nil
	}
	var out []port.SignalOutcome
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		st, err := signalState(ctx, tx, b)
		if err != nil {
			return err
		}
		inserts, bumps := b.Plan(st)
		var (
			ids, bumpIDs []uuid.UUID
			names        []string
			payloads     [][]byte
			keys         []pgtype.Text
			ns           []int64
			seqs         []int64
			created      []time.Time
		)
		if len(inserts) > 0 {
			for _, sig := range inserts {
				ids, names, payloads = append(ids, sig.InstanceID), append(names, sig.Name), append(payloads, sig.Payload)
				keys = append(keys, pgtype.Text{String: sig.IdempotencyKey, Valid: sig.IdempotencyKey != ""})
			}
			for _, w := range bumps {
				bumpIDs, ns = append(bumpIDs, w.InstanceID), append(ns, w.N)
			}
			rows, _ := tx.Query(ctx, signalInsertSQL, ids, names, payloads, keys, bumpIDs, ns)
			var seq int64
			var at time.Time
			if _, err := pgx.ForEachRow(rows, []any{&seq, &at}, func() error {
				seqs, created = append(seqs, seq), append(created, at.UTC())
				return nil
			}); err != nil {
				return err
			}
		}
		out, err = b.Recorded(seqs, created)
		return err
	})
	if err != nil {
		return nil, b.Fail(s.check(ctx, err))
	}
	return out, nil
}

// signalState reads what b's plan needs (storeutil.SignalState): the lock
// first, then, pipelined in one round trip, only the reads the batch
// needs — statuses when an instance is not live, keys, counts for a cap.
// (A batch that needs none, or a read that is not needed, would cost the
// server more than the round trip it saves: reading statuses in the same
// pipeline as the lock doubled the time of a single RecordSignal.)
func signalState(ctx context.Context, tx pgx.Tx, b *storeutil.SignalBatch) (storeutil.SignalState, error) {
	st := storeutil.SignalState{Wake: map[uuid.UUID]int64{}, Status: map[uuid.UUID]string{},
		Keyed: map[storeutil.SignalKey]port.SignalRecord{}, Pending: map[uuid.UUID]int{}}
	ids := b.IDs()
	rows, _ := tx.Query(ctx, signalLockSQL, ids)
	var (
		id   uuid.UUID
		wake int64
	)
	if _, err := pgx.ForEachRow(rows, []any{&id, &wake}, func() error { st.Wake[id] = wake; return nil }); err != nil {
		return st, err
	}
	batch := &pgx.Batch{}
	if len(st.Wake) < len(ids) {
		var dead []uuid.UUID
		for _, id := range ids {
			if _, live := st.Wake[id]; !live {
				dead = append(dead, id)
			}
		}
		batch.Queue(signalStatusSQL, dead).Query(func(rows pgx.Rows) error {
			var (
				id     uuid.UUID
				status string
			)
			_, err := pgx.ForEachRow(rows, []any{&id, &status}, func() error { st.Status[id] = status; return nil })
			return err
		})
	}
	if keys := b.Keys(st.Wake); len(keys) > 0 {
		kids, knames := make([]uuid.UUID, len(keys)), make([]string, len(keys))
		for i, k := range keys {
			kids[i], knames[i] = k.InstanceID, k.Key
		}
		batch.Queue(signalByKeySQL, kids, knames).Query(func(rows pgx.Rows) error {
			recs, err := pgx.CollectRows(rows, scanSignal)
			for _, rec := range recs {
				st.Keyed[storeutil.SignalKey{InstanceID: rec.InstanceID, Key: rec.IdempotencyKey}] = rec
			}
			return err
		})
	}
	if capped := b.Capped(st.Wake); len(capped) > 0 {
		batch.Queue(signalPendingSQL, capped).Query(func(rows pgx.Rows) error {
			var (
				id uuid.UUID
				n  int
			)
			_, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error { st.Pending[id] = n; return nil })
			return err
		})
	}
	if batch.Len() == 0 {
		return st, nil
	}
	return st, tx.SendBatch(ctx, batch).Close()
}

// ListSignals implements port.Store: every signal by seq, and whether
// the instance exists (an unknown one is ErrNotFound, a known one without
// signals has none), in one batch: one round trip.
func (s *Store) ListSignals(ctx context.Context, id uuid.UUID) ([]port.SignalRecord, error) {
	const list = `-- name: list_signals
		SELECT ` + signalColumns + `
		FROM instance_signals g
		WHERE g.instance_id = $1
		ORDER BY g.seq`
	const known = `-- name: instance_known
		SELECT EXISTS (SELECT 1 FROM runner_instances WHERE instance_id = $1)`
	var (
		out   []port.SignalRecord
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
		return nil, fmt.Errorf("signals of instance %s: %w", id, port.ErrNotFound)
	}
	return out, nil
}

// SetPaused implements port.Store: one statement, like RequestCancel.
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

// ReopenInstance implements port.Store in one transaction: the runner
// row is locked and its status judged, then rewritten and given a queue
// row. The queue row's wake counter starts at the instance's signal count,
// so it is above zero whenever an unconsumed signal may wait
// (claimSignalsSQL reads only such rows).
func (s *Store) ReopenInstance(ctx context.Context, req port.ReopenRequest) (port.Reopened, error) {
	if err := storeutil.CheckReopen(req); err != nil {
		return port.Reopened{}, err
	}
	var (
		out     port.Reopened
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
		out.Status = port.InstanceState(status)
		if out.Status != port.StateFailed && out.Status != port.StateCancelled {
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
		return port.Reopened{}, fmt.Errorf("reopen instance %s: %w", req.ID, s.check(ctx, err))
	case refused:
		return port.Reopened{}, storeutil.ReopenRefused(req.ID, out.Status)
	}
	return out, nil
}
