package postgres

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
)

// ownedCTE and resultsCTE open every progress and completion statement.
// `owned` row-locks the queue rows of the instances the caller ($1 ids, $2
// owners) may write: its lease is live, and the instance's partition is
// not fenced by another runloop (the range_id check). The lock keeps a
// concurrent claim from taking them over until the statement commits.
// `results` then appends the action results of owned instances only, in
// input order, ignoring a duplicate (instance, execution, attempt).
//
// Every write of the batch is one statement, gated on `owned`: the lease
// and the fence are read once, with one snapshot, so an instance is
// written whole or not at all even when a fence commits while the batch
// runs. (Statements of their own would each read the partitions table
// afresh, and a fence committed between two of them would leave an
// instance's results written and its snapshot refused.)
const ownedCTE = `owned AS (
    SELECT q.instance_id
    FROM queued_instances q
    JOIN unnest($1::uuid[], $2::uuid[]) AS i(instance_id, owner) ON i.instance_id = q.instance_id
    WHERE q.lock_uuid = i.owner AND q.lock_expires_at > now()
      AND NOT EXISTS (SELECT 1 FROM partitions pt WHERE pt.partition = q.partition AND pt.owner <> i.owner)
    ORDER BY q.instance_id
    FOR NO KEY UPDATE OF q
)`

const resultsCTE = `results AS (
    INSERT INTO runner_actions_done
        (instance_id, execution_id, attempt, ok, output, error, worker_id, started_at, finished_at)
    SELECT r.instance_id, r.execution_id, r.attempt, r.ok, r.output, r.error, r.worker_id, r.started_at, r.finished_at
    FROM unnest($3::uuid[], $4::text[], $5::bigint[], $6::boolean[], $7::bytea[], $8::text[], $9::text[],
                $10::timestamptz[], $11::timestamptz[])
         WITH ORDINALITY AS r(instance_id, execution_id, attempt, ok, output, error, worker_id, started_at, finished_at, ord)
    WHERE r.instance_id IN (SELECT instance_id FROM owned)
    ORDER BY r.ord
    ON CONFLICT (instance_id, execution_id, attempt) DO NOTHING
)`

// consumedCTE marks signals consumed ($a instances, $b seqs, $c
// consumers, the parameter numbers given), for owned instances only and
// only the signals of the instance named: a signal consumed already keeps
// its first consumer.
func consumedCTE(a, b, c int) string {
	return fmt.Sprintf(`consumed AS (
    UPDATE instance_signals g
    SET consumed_by = u.consumed_by
    FROM unnest($%d::uuid[], $%d::bigint[], $%d::text[]) AS u(instance_id, seq, consumed_by)
    WHERE g.seq = u.seq AND g.instance_id = u.instance_id AND g.consumed_by IS NULL
      AND u.instance_id IN (SELECT instance_id FROM owned)
)`, a, b, c)
}

// persistSQL writes a progress batch: results, then consumed signals
// ($21 … $23), then the snapshots and GATHERING marks ($12 ids, $13
// states, $16 whether a state is given, $17 whether the instance reached
// GATHERING: one update per row, since a row updated twice in one
// statement keeps only one of the updates), then the queue rows ($14
// ids; $15 the next due time, or $18 park: release the lease, due at $19
// (NULL: never) unless the wake counter passed $20 or a cancellation was
// requested) of owned instances. It returns the owned ids.
//
// The park reads wake and cancel_requested from the row it updates, not
// from a subquery: under READ COMMITTED an UPDATE that finds its row
// changed since its snapshot (a RecordSignal, SetPaused or RequestCancel
// that committed meanwhile, which `owned` then waited for) evaluates its
// SET on the newest version of the row, while a subquery would read the
// snapshot and miss the wake. A wake that commits after this statement
// waits for its row lock and finds the row parked, which it makes due.
var persistSQL = `-- name: persist_progress
WITH ` + ownedCTE + `,
` + resultsCTE + `,
` + consumedCTE(21, 22, 23) + `,
state AS (
    UPDATE runner_instances r
    SET state = CASE WHEN s.has_state THEN s.state ELSE r.state END,
        gathering_at = CASE WHEN s.gathering THEN coalesce(r.gathering_at, now()) ELSE r.gathering_at END,
        updated_at = now()
    FROM unnest($12::uuid[], $13::bytea[], $16::boolean[], $17::boolean[]) AS s(instance_id, state, has_state, gathering)
    WHERE r.instance_id = s.instance_id AND s.instance_id IN (SELECT instance_id FROM owned)
),
queue AS (
    UPDATE queued_instances q
    SET scheduled_at = CASE
            WHEN NOT s.park THEN s.scheduled_at
            WHEN q.wake > s.wake_seen OR q.cancel_requested THEN now()
            ELSE coalesce(s.until, 'infinity')
        END,
        lock_uuid = CASE WHEN s.park THEN NULL ELSE q.lock_uuid END,
        lock_expires_at = CASE WHEN s.park THEN NULL ELSE q.lock_expires_at END
    FROM unnest($14::uuid[], $15::timestamptz[], $18::boolean[], $19::timestamptz[], $20::bigint[])
         AS s(instance_id, scheduled_at, park, until, wake_seen)
    WHERE q.instance_id = s.instance_id AND s.instance_id IN (SELECT instance_id FROM owned)
)
SELECT instance_id FROM owned`

// completeSQL records the outcome of owned instances ($12 … $16 in the
// order of $1), after their final results and consumed signals ($17 …
// $19), and removes them from the claim table. It returns the owned ids.
var completeSQL = `-- name: complete_instances
WITH ` + ownedCTE + `,
` + resultsCTE + `,
` + consumedCTE(17, 18, 19) + `,
runner AS (
    UPDATE runner_instances r
    SET status = c.status,
        output = c.output,
        error = c.error,
        state = CASE WHEN c.has_state THEN c.state ELSE r.state END,
        finished_at = now(),
        updated_at = now()
    FROM unnest($1::uuid[], $12::text[], $13::bytea[], $14::text[], $15::boolean[], $16::bytea[])
         AS c(instance_id, status, output, error, has_state, state)
    WHERE r.instance_id = c.instance_id AND c.instance_id IN (SELECT instance_id FROM owned)
),
dequeue AS (
    DELETE FROM queued_instances q
    WHERE q.instance_id IN (SELECT instance_id FROM owned)
)
SELECT instance_id FROM owned`

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

// PersistProgress implements port.Store. The whole batch is one
// statement (persistSQL): one round trip, one transaction, writes in the
// order of the design — results and consumed signals, then snapshots, then
// schedules or parks — each a
// multi-row step over unnest()ed arrays (group commit), all gated on the
// caller's lease and its partition's fence. An instance whose lease is
// gone, or whose partition another runloop fenced, gets ErrOwnershipLost
// and nothing of it is written, its results included.
func (s *Store) PersistProgress(ctx context.Context, batch []port.Progress) ([]error, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	merged, err := storeutil.MergeProgress(batch)
	if err != nil {
		return nil, fmt.Errorf("persist progress: %w", s.check(ctx, err))
	}

	var (
		ids, owners []uuid.UUID
		results     resultColumns
		stateIDs    []uuid.UUID
		states      [][]byte
		hasState    []bool
		gathering   []bool
		queueIDs    []uuid.UUID
		scheduled   []pgtype.Timestamptz // NULL for a park
		park        []bool
		until       []pgtype.Timestamptz // NULL: no deadline
		wakeSeen    []int64
		consumed    signalUses
	)
	for _, p := range merged.Items {
		ids = append(ids, p.InstanceID)
		owners = append(owners, p.Owner)
		for _, r := range p.Results {
			results.add(p.InstanceID, r)
		}
		if p.State != nil || p.Gathering {
			stateIDs = append(stateIDs, p.InstanceID)
			states = append(states, p.State)
			hasState = append(hasState, p.State != nil)
			gathering = append(gathering, p.Gathering)
		}
		consumed.add(p.InstanceID, p.ConsumedSignals)
		switch {
		case p.Park != nil:
			queueIDs = append(queueIDs, p.InstanceID)
			scheduled = append(scheduled, pgtype.Timestamptz{})
			park = append(park, true)
			until = append(until, timestamptz(p.Park.Until))
			wakeSeen = append(wakeSeen, p.Park.WakeSeen)
		case p.ScheduledAt != nil:
			queueIDs = append(queueIDs, p.InstanceID)
			scheduled = append(scheduled, pgtype.Timestamptz{Time: *p.ScheduledAt, Valid: true})
			park = append(park, false)
			until = append(until, pgtype.Timestamptz{})
			wakeSeen = append(wakeSeen, 0)
		}
	}

	args := append([]any{ids, owners}, results.args()...)
	args = append(args, stateIDs, states, queueIDs, scheduled, hasState, gathering, park, until, wakeSeen)
	rows, err := s.pool.Query(ctx, persistSQL, append(args, consumed.args()...)...)
	var owned map[uuid.UUID]bool
	if err == nil {
		owned, err = collectIDs(rows)
	}
	if err != nil {
		return nil, fmt.Errorf("persist progress of %d instances: %w", len(merged.Items), s.check(ctx, err))
	}
	return merged.Expand(outcomes(merged.Items, owned)), nil
}

// CompleteInstances implements port.Store: one statement (completeSQL,
// one round trip, one transaction) that writes the final results, then
// the outcome and finished_at in runner_instances, then deletes the queue
// rows — gated on the caller's lease and fence like PersistProgress. A
// completion refused because the instance already finished with the same
// status is a replay of one that committed, and counts as written (a
// second query, only when something was refused).
func (s *Store) CompleteInstances(ctx context.Context, batch []port.Completion) ([]error, error) {
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
		consumed    signalUses
	)
	items := make([]port.Progress, len(batch)) // for outcomes()
	for i, c := range batch {
		items[i] = port.Progress{InstanceID: c.InstanceID, Owner: c.Owner}
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
		consumed.add(c.InstanceID, c.ConsumedSignals)
	}

	args := append([]any{ids, owners}, results.args()...)
	args = append(args, statuses, outputs, errs, hasState, states)
	rows, err := s.pool.Query(ctx, completeSQL, append(args, consumed.args()...)...)
	var owned map[uuid.UUID]bool
	if err == nil {
		owned, err = collectIDs(rows)
	}
	if err != nil {
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
func outcomes(items []port.Progress, owned map[uuid.UUID]bool) []error {
	out := make([]error, len(items))
	for i, p := range items {
		if !owned[p.InstanceID] {
			out[i] = storeutil.ErrOwnershipLost(p.InstanceID)
		}
	}
	return out
}
