package postgres

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
)

// insertResultsSQL is the first statement of every progress and completion
// batch. `owned` row-locks the queue rows of the instances whose lease the
// caller ($1 ids, $2 owners) still holds; the lock keeps a concurrent claim
// from taking them over until the batch commits, so the later statements of
// the batch see the same set. Results are then inserted for owned instances
// only, in input order (the order of their ids), ignoring a duplicate
// (instance, execution, attempt). It returns the owned ids.
const insertResultsSQL = `-- name: persist_results
WITH owned AS (
    SELECT q.instance_id
    FROM queued_instances q
    JOIN unnest($1::uuid[], $2::uuid[]) AS i(instance_id, owner) ON i.instance_id = q.instance_id
    WHERE q.lock_uuid = i.owner AND q.lock_expires_at > now()
    ORDER BY q.instance_id
    FOR NO KEY UPDATE OF q
),
results AS (
    INSERT INTO runner_actions_done
        (instance_id, execution_id, attempt, ok, output, error, worker_id, started_at, finished_at)
    SELECT r.instance_id, r.execution_id, r.attempt, r.ok, r.output, r.error, r.worker_id, r.started_at, r.finished_at
    FROM unnest($3::uuid[], $4::text[], $5::bigint[], $6::boolean[], $7::bytea[], $8::text[], $9::text[],
                $10::timestamptz[], $11::timestamptz[])
         WITH ORDINALITY AS r(instance_id, execution_id, attempt, ok, output, error, worker_id, started_at, finished_at, ord)
    WHERE r.instance_id IN (SELECT instance_id FROM owned)
    ORDER BY r.ord
    ON CONFLICT (instance_id, execution_id, attempt) DO NOTHING
)
SELECT instance_id FROM owned`

// leaseHeld is the lease gate of every later statement of a batch: the
// queue row of instance i is held by i.owner under a live lease. Inside the
// batch's transaction now() is fixed and `owned` holds the row locks, so it
// agrees with the first statement.
const leaseHeld = `EXISTS (
    SELECT 1 FROM queued_instances q
    WHERE q.instance_id = i.instance_id AND q.lock_uuid = i.owner AND q.lock_expires_at > now())`

// updateStateSQL writes the snapshots of owned instances.
const updateStateSQL = `-- name: persist_state
UPDATE runner_instances r
SET state = i.state, updated_at = now()
FROM unnest($1::uuid[], $2::uuid[], $3::bytea[]) AS i(instance_id, owner, state)
WHERE r.instance_id = i.instance_id AND ` + leaseHeld

// updateScheduleSQL writes the next due time of owned instances.
const updateScheduleSQL = `-- name: persist_schedule
UPDATE queued_instances q
SET scheduled_at = i.scheduled_at
FROM unnest($1::uuid[], $2::uuid[], $3::timestamptz[]) AS i(instance_id, owner, scheduled_at)
WHERE q.instance_id = i.instance_id AND q.lock_uuid = i.owner AND q.lock_expires_at > now()`

// completeRunnerSQL records the outcome of owned instances.
const completeRunnerSQL = `-- name: complete_runner
UPDATE runner_instances r
SET status = i.status,
    output = i.output,
    error = i.error,
    state = CASE WHEN i.has_state THEN i.state ELSE r.state END,
    finished_at = now(),
    updated_at = now()
FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::bytea[], $5::text[], $6::boolean[], $7::bytea[])
     AS i(instance_id, owner, status, output, error, has_state, state)
WHERE r.instance_id = i.instance_id AND ` + leaseHeld

// replayedSQL finds, among instances whose completion was refused, those
// the store already records finished with the same status: the refused
// call was the replay of a completion that had committed (its
// acknowledgement was lost), and it counts as written.
const replayedSQL = `-- name: complete_replayed
SELECT r.instance_id
FROM runner_instances r
JOIN unnest($1::uuid[], $2::text[]) AS i(instance_id, status) ON i.instance_id = r.instance_id
WHERE r.status = i.status
  AND NOT EXISTS (SELECT 1 FROM queued_instances q WHERE q.instance_id = r.instance_id)`

// dequeueSQL removes owned instances from the claim table.
const dequeueSQL = `-- name: complete_dequeue
DELETE FROM queued_instances q
USING unnest($1::uuid[], $2::uuid[]) AS i(instance_id, owner)
WHERE q.instance_id = i.instance_id AND q.lock_uuid = i.owner AND q.lock_expires_at > now()`

// PersistProgress implements engine.Store. The whole batch is one pgx
// batch: one round trip, one implicit transaction, statements in the order
// of the design — results, then snapshots, then schedules — each of them a
// single multi-row statement over unnest()ed arrays (group commit), each
// gated on the caller's lease. An instance whose lease is gone gets
// ErrOwnershipLost and nothing of it is written, its results included.
func (s *Store) PersistProgress(ctx context.Context, batch []engine.Progress) ([]error, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	merged, err := storeutil.MergeProgress(batch)
	if err != nil {
		return nil, fmt.Errorf("persist progress: %w", s.check(ctx, err))
	}

	var (
		ids, owners           []uuid.UUID
		results               resultColumns
		stateIDs, stateOwners []uuid.UUID
		states                [][]byte
		schedIDs, schedOwners []uuid.UUID
		scheduled             []pgtype.Timestamptz
	)
	for _, p := range merged.Items {
		ids = append(ids, p.InstanceID)
		owners = append(owners, p.Owner)
		for _, r := range p.Results {
			results.add(p.InstanceID, r)
		}
		if p.State != nil {
			stateIDs = append(stateIDs, p.InstanceID)
			stateOwners = append(stateOwners, p.Owner)
			states = append(states, p.State)
		}
		if p.ScheduledAt != nil {
			schedIDs = append(schedIDs, p.InstanceID)
			schedOwners = append(schedOwners, p.Owner)
			scheduled = append(scheduled, pgtype.Timestamptz{Time: *p.ScheduledAt, Valid: true})
		}
	}

	b := &pgx.Batch{}
	var owned map[uuid.UUID]bool
	b.Queue(insertResultsSQL, append([]any{ids, owners}, results.args()...)...).Query(func(rows pgx.Rows) error {
		var err error
		owned, err = collectIDs(rows)
		return err
	})
	if len(stateIDs) > 0 {
		b.Queue(updateStateSQL, stateIDs, stateOwners, states)
	}
	if len(schedIDs) > 0 {
		b.Queue(updateScheduleSQL, schedIDs, schedOwners, scheduled)
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("persist progress of %d instances: %w", len(merged.Items), s.check(ctx, err))
	}
	return merged.Expand(outcomes(merged.Items, owned)), nil
}

// CompleteInstances implements engine.Store: one pgx batch (one round trip,
// one transaction) that writes the final results, then the outcome and
// finished_at in runner_instances, then deletes the queue rows — each
// statement gated on the caller's lease like PersistProgress. A completion
// refused because the instance already finished with the same status is a
// replay of one that committed, and counts as written (a second query,
// only when something was refused).
func (s *Store) CompleteInstances(ctx context.Context, batch []engine.Completion) ([]error, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	if err := storeutil.CheckCompletions(batch); err != nil {
		return nil, fmt.Errorf("complete instances: %w", s.check(ctx, err))
	}

	var (
		ids, owners []uuid.UUID
		results     resultColumns
		statuses    []string
		outputs     [][]byte
		errs        []string
		hasState    []bool
		states      [][]byte
	)
	items := make([]engine.Progress, len(batch)) // for outcomes()
	for i, c := range batch {
		items[i] = engine.Progress{InstanceID: c.InstanceID, Owner: c.Owner}
		ids = append(ids, c.InstanceID)
		owners = append(owners, c.Owner)
		for _, r := range c.Results {
			results.add(c.InstanceID, r)
		}
		statuses = append(statuses, string(c.Status))
		outputs = append(outputs, c.Output)
		errs = append(errs, c.Error)
		hasState = append(hasState, c.State != nil)
		states = append(states, c.State)
	}

	b := &pgx.Batch{}
	var owned map[uuid.UUID]bool
	b.Queue(insertResultsSQL, append([]any{ids, owners}, results.args()...)...).Query(func(rows pgx.Rows) error {
		var err error
		owned, err = collectIDs(rows)
		return err
	})
	b.Queue(completeRunnerSQL, ids, owners, statuses, outputs, errs, hasState, states)
	b.Queue(dequeueSQL, ids, owners)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("complete %d instances: %w", len(batch), s.check(ctx, err))
	}
	var refusedIDs []uuid.UUID
	var refusedStatuses []string
	for i, id := range ids {
		if !owned[id] {
			refusedIDs, refusedStatuses = append(refusedIDs, id), append(refusedStatuses, statuses[i])
		}
	}
	if len(refusedIDs) > 0 {
		rows, err := s.pool.Query(ctx, replayedSQL, refusedIDs, refusedStatuses)
		if err == nil {
			var replayed map[uuid.UUID]bool
			if replayed, err = collectIDs(rows); err == nil {
				for id := range replayed {
					owned[id] = true
				}
			}
		}
		if err != nil {
			return nil, fmt.Errorf("complete %d instances: reading the ones refused: %w", len(batch), s.check(ctx, err))
		}
	}
	return outcomes(items, owned), nil
}

// collectIDs reads a column of instance ids into a set.
func collectIDs(rows pgx.Rows) (map[uuid.UUID]bool, error) {
	set := make(map[uuid.UUID]bool)
	var id uuid.UUID
	_, err := pgx.ForEachRow(rows, []any{&id}, func() error {
		set[id] = true
		return nil
	})
	return set, err
}

// outcomes is nil for every owned item and ErrOwnershipLost for the rest.
func outcomes(items []engine.Progress, owned map[uuid.UUID]bool) []error {
	out := make([]error, len(items))
	for i, p := range items {
		if !owned[p.InstanceID] {
			out[i] = storeutil.ErrOwnershipLost(p.InstanceID)
		}
	}
	return out
}
