package postgres

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
)

// queueSQL inserts the runner rows and the queue rows of a batch in one
// statement. An instance whose idempotency key is taken gets neither row
// (ON CONFLICT … DO NOTHING drops it from `runner`, and only instances in
// `runner` get a queue row). An instance with a claim (an owner) that is
// due at once, in a partition no other runloop fenced, is stored claimed:
// running, started now, leased to the owner under its term, as claimSQL
// would leave it; in a partition fenced by another it is queued unclaimed,
// for the partition's owner to claim. It returns the ids it inserted,
// their creation times and whether each was claimed.
const queueSQL = `-- name: queue_instances
WITH input AS (
    SELECT *, owner IS NOT NULL AND coalesce(scheduled_at, now()) <= now()
              AND NOT EXISTS (SELECT 1 FROM partitions pt WHERE pt.partition = t.partition AND pt.owner <> t.owner) AS claim
    FROM unnest($1::uuid[], $2::bigint[], $3::bytea[], $4::bytea[], $5::timestamptz[], $6::text[],
                $7::uuid[], $8::bigint[], $9::bigint[], $10::integer[], $11::uuid[], $12::text[], $13::bigint[])
         WITH ORDINALITY AS t(instance_id, workflow_version_id, inputs, state, scheduled_at, idempotency_key,
                              owner, term, lease, partition, parent_instance_id, parent_execution, parent_attempt, ord)
),
runner AS (
    INSERT INTO runner_instances (instance_id, workflow_version_id, status, inputs, state, idempotency_key, started_at,
                                  parent_instance_id, parent_execution, parent_attempt)
    SELECT instance_id, workflow_version_id, CASE WHEN claim THEN 'running' ELSE 'queued' END, inputs, state,
           idempotency_key, CASE WHEN claim THEN now() END, parent_instance_id, parent_execution, parent_attempt
    FROM input
    ORDER BY ord
    ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING
    RETURNING instance_id, created_at, status = 'running' AS claimed
),
queue AS (
    INSERT INTO queued_instances (instance_id, scheduled_at, lock_uuid, lock_expires_at, term, partition)
    SELECT i.instance_id, coalesce(i.scheduled_at, now()),
           CASE WHEN i.claim THEN i.owner END,
           CASE WHEN i.claim THEN now() + i.lease * interval '1 microsecond' END,
           CASE WHEN i.claim THEN i.term ELSE 0 END,
           i.partition
    FROM input i JOIN runner r ON r.instance_id = i.instance_id
)
SELECT instance_id, created_at, claimed FROM runner`

// existingKeysSQL finds the instances that hold idempotency keys.
const existingKeysSQL = `-- name: existing_idempotency_keys
SELECT idempotency_key, instance_id, workflow_version_id
FROM runner_instances
WHERE idempotency_key = ANY($1::text[])`

// QueueInstances implements port.Store. Both rows of every instance are
// written by one statement inside one transaction; the call returns after
// the commit, so an instance it acknowledges is durable, and a failed call
// leaves no row behind. A zero ScheduledAt means due at once (the server's
// now()); a nil ID gets a new random one.
//
// Idempotency keys: an instance whose key already names an instance of the
// same workflow version is not queued (Existing). A key that names an
// instance of another version fails the whole call with
// port.ErrIdempotencyConflict, and nothing of the batch is queued.
func (s *Store) QueueInstances(ctx context.Context, in []port.NewInstance) ([]port.Queued, error) {
	if len(in) == 0 {
		return nil, nil
	}
	insts, err := storeutil.PrepareInstances(in, time.Time{}) // zero: the server fills in now()
	if err != nil {
		return nil, err
	}
	dup, err := storeutil.DuplicateKeys(insts)
	if err != nil {
		return nil, err
	}
	cols := newQueueColumns(insts, dup)
	var out []port.Queued
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		fresh, err := insertQueued(ctx, tx, cols)
		if err != nil {
			return err
		}
		holders, err := keyHolders(ctx, tx, takenKeys(insts, dup, fresh))
		if err != nil {
			return err
		}
		out, err = queuedOutcomes(insts, dup, fresh, holders)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("queue %d instances: %w", len(in), s.check(ctx, err))
	}
	return out, nil
}

// queueColumns are the arrays queueSQL inserts: an element per instance of
// the batch, less those whose key an earlier one of the batch has.
type queueColumns struct {
	ids       []uuid.UUID
	versions  []int64
	inputs    [][]byte
	states    [][]byte
	scheduled []pgtype.Timestamptz
	keys      []pgtype.Text
	owners    []pgtype.UUID // NULL: no claim
	terms     []int64
	leases    []int64 // microseconds
	parts     []int32
	parents   []pgtype.UUID // NULL: not a child instance
	execs     []pgtype.Text
	attempts  []pgtype.Int8
}

// newQueueColumns returns the columns of the instances of a prepared batch
// that dup (storeutil.DuplicateKeys) does not send to an earlier one.
func newQueueColumns(insts []port.NewInstance, dup []int) *queueColumns {
	c := &queueColumns{}
	for i, inst := range insts {
		if dup[i] >= 0 {
			continue // the earlier instance with this key stands for it
		}
		c.ids = append(c.ids, inst.ID)
		c.versions = append(c.versions, inst.WorkflowVersionID)
		c.inputs = append(c.inputs, inst.Inputs)
		c.states = append(c.states, inst.State)
		c.scheduled = append(c.scheduled, timestamptz(inst.ScheduledAt))
		c.keys = append(c.keys, pgtype.Text{String: inst.IdempotencyKey, Valid: inst.IdempotencyKey != ""})
		var (
			owner       pgtype.UUID
			term, lease int64
		)
		if cl := inst.Claim; cl != nil {
			owner = pgtype.UUID{Bytes: cl.Owner, Valid: true}
			term, _ = storeutil.Term(cl.Term) // checked by PrepareInstances
			lease = micros(cl.Lease)
		}
		c.owners, c.terms, c.leases = append(c.owners, owner), append(c.terms, term), append(c.leases, lease)
		c.parts = append(c.parts, int32(inst.Partition)) // checked by PrepareInstances
		parent := parentColumnsOf(inst.Parent)
		c.parents, c.execs, c.attempts = append(c.parents, parent.id), append(c.execs, parent.exec), append(c.attempts, parent.attempt)
	}
	return c
}

// insertQueued runs queueSQL and returns what it says of the instances it
// inserted, by id.
func insertQueued(ctx context.Context, tx pgx.Tx, c *queueColumns) (map[uuid.UUID]port.Queued, error) {
	rows, err := tx.Query(ctx, queueSQL, c.ids, c.versions, c.inputs, c.states, c.scheduled, c.keys, c.owners, c.terms,
		c.leases, c.parts, c.parents, c.execs, c.attempts)
	if err != nil {
		return nil, err
	}
	fresh := make(map[uuid.UUID]port.Queued, len(c.ids))
	var q port.Queued
	_, err = pgx.ForEachRow(rows, []any{&q.ID, &q.CreatedAt, &q.Claimed}, func() error {
		if q.Claimed {
			q.CreatedAt = q.CreatedAt.UTC()
		} else {
			q.CreatedAt = time.Time{} // said only of a claimed instance
		}
		fresh[q.ID] = q
		return nil
	})
	if err != nil {
		if isForeignKeyViolation(err, "runner_instances_workflow_version_id_fkey") {
			return nil, fmt.Errorf("unknown workflow version: %w", port.ErrNotFound)
		}
		return nil, err
	}
	return fresh, nil
}

// takenKeys returns the keys of the instances of a batch that were not
// inserted (fresh): they lost to an instance that holds the key.
func takenKeys(insts []port.NewInstance, dup []int, fresh map[uuid.UUID]port.Queued) []string {
	var taken []string
	for i, inst := range insts {
		if _, ok := fresh[inst.ID]; dup[i] < 0 && !ok {
			taken = append(taken, inst.IdempotencyKey)
		}
	}
	return taken
}

// keyHolder is the instance that holds an idempotency key.
type keyHolder struct {
	id      uuid.UUID
	version int64
}

// keyHolders returns the instances that hold the keys, by key.
func keyHolders(ctx context.Context, tx pgx.Tx, keys []string) (map[string]keyHolder, error) {
	holders := make(map[string]keyHolder, len(keys))
	if len(keys) == 0 {
		return holders, nil
	}
	rows, err := tx.Query(ctx, existingKeysSQL, keys)
	if err != nil {
		return nil, err
	}
	var (
		key string
		h   keyHolder
	)
	_, err = pgx.ForEachRow(rows, []any{&key, &h.id, &h.version}, func() error {
		holders[key] = h
		return nil
	})
	if err != nil {
		return nil, err
	}
	return holders, nil
}

// queuedOutcomes returns what became of each instance of a batch: inserted
// (fresh), or standing for an instance that holds its key — an earlier one
// of the batch (dup) or one stored before (holders) of the same workflow
// version. A key held for another version fails the batch, and so does a
// key that nobody inserted nor holds.
func queuedOutcomes(insts []port.NewInstance, dup []int, fresh map[uuid.UUID]port.Queued,
	holders map[string]keyHolder) ([]port.Queued, error) {
	out := make([]port.Queued, len(insts))
	for i, inst := range insts {
		if dup[i] >= 0 {
			out[i] = port.Queued{ID: out[dup[i]].ID, Existing: true}
			continue
		}
		if q, ok := fresh[inst.ID]; ok {
			out[i] = q
			continue
		}
		h, ok := holders[inst.IdempotencyKey]
		if !ok {
			// Inserted by nobody and held by nobody: the key's holder was
			// swept between the two statements. Let the caller retry.
			return nil, fmt.Errorf("instance %s: idempotency key %q vanished while queueing; retry", inst.ID, inst.IdempotencyKey)
		}
		if h.version != inst.WorkflowVersionID {
			return nil, fmt.Errorf("idempotency key %q already names instance %s of workflow version %d, not %d: %w",
				inst.IdempotencyKey, h.id, h.version, inst.WorkflowVersionID, port.ErrIdempotencyConflict)
		}
		out[i] = port.Queued{ID: h.id, Existing: true}
	}
	return out, nil
}

// claimSQL leases due instances ($1 owner, $2 term, $3 lease in
// microseconds, $4 limit; filter narrows the partitions):
//
//   - due: rows whose time has come, oldest first, that nobody holds under
//     a live lease of the same or a newer term — or, in a partition fenced
//     by the claimer, that another runloop holds whatever its lease (the
//     lease of an earlier owner is void). Rows of partitions fenced by
//     another runloop are never taken. SKIP LOCKED makes concurrent
//     claimers take disjoint rows instead of waiting.
//   - claimed: stamp owner, lease end and term on them.
//   - the final UPDATE marks the instances running and returns inputs and
//     snapshot. An UPDATE always acts on (and returns) the latest committed
//     version of a row, so the snapshot is the last one written. Only a
//     claim sets started_at, at its transaction's now(): a value other
//     than this one's is an earlier claim's (HeldBefore).
//
// Both partition tests read the small partitions table once per claim
// (a hashed subplan, or an anti-join on its key), not once per row.
func claimSQL(name, filter string) string {
	return `-- name: ` + name + `
WITH due AS (
    SELECT instance_id
    FROM queued_instances q
    WHERE scheduled_at <= now()` + filter + `
      AND (lock_uuid IS NULL OR lock_expires_at <= now() OR term < $2
           OR (lock_uuid <> $1 AND q.partition IN (SELECT pt.partition FROM partitions pt WHERE pt.owner = $1)))
      AND NOT EXISTS (SELECT 1 FROM partitions pt WHERE pt.partition = q.partition AND pt.owner <> $1)
    ORDER BY scheduled_at
    LIMIT $4
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE queued_instances q
    SET lock_uuid = $1,
        lock_expires_at = now() + $3 * interval '1 microsecond',
        term = $2
    FROM due
    WHERE q.instance_id = due.instance_id
    RETURNING q.instance_id, q.scheduled_at, q.lock_expires_at, q.cancel_requested, q.wake
)
UPDATE runner_instances r
SET status = 'running', started_at = coalesce(r.started_at, now())
FROM claimed c
WHERE r.instance_id = c.instance_id
RETURNING r.instance_id, r.workflow_version_id, r.inputs, r.state, r.created_at, c.lock_expires_at, c.cancel_requested,
          c.scheduled_at, r.started_at <> now(), r.gathering_at IS NOT NULL,
          r.parent_instance_id, r.parent_execution, r.parent_attempt, c.wake, r.paused, r.runs`
}

var (
	// claimAllSQL claims in every partition (ClaimRequest.Partitions nil):
	// it scans queued_instances_scheduled in due order, as before
	// partitions.
	claimAllSQL = claimSQL("claim_instances", "")
	// claimInSQL claims in the partitions of $5: the same scan in due
	// order, the partition filtered on the row (migrations/0004 says why
	// there is no index on it).
	claimInSQL = claimSQL("claim_instances_in", `
      AND q.partition = ANY($5::integer[])`)
)

// hydrateSQL returns the latest result of every execution of the instances
// claimSQL just leased: DISTINCT ON over the (instance, execution, attempt
// DESC) index, no sort. It is the second statement of the claim's batch, so
// it runs in the same transaction — now() is the same, which is how it
// finds exactly the rows claimSQL stamped (lease end = now() + lease) —
// but with a fresh snapshot taken after the claim locked its rows.
//
// That is why it is a statement of its own. A subquery of claimSQL would
// read with claimSQL's snapshot, taken before its row locks: a row whose
// previous owner recorded results and released it while claimSQL was
// running is claimed (the lock re-checks the latest row version), yet those
// results are newer than the snapshot and would be missing. Once the claim
// holds the locks, every write of a previous owner is committed or will be
// refused, so this later snapshot sees them all.
const hydrateSQL = `-- name: claim_hydrate
SELECT DISTINCT ON (d.instance_id, d.execution_id)
       d.instance_id, d.execution_id, d.attempt, d.ok, d.output, d.error, d.worker_id, d.started_at, d.finished_at
FROM queued_instances q
JOIN runner_actions_done d ON d.instance_id = q.instance_id
WHERE q.lock_uuid = $1 AND q.lock_expires_at = now() + $2 * interval '1 microsecond'
ORDER BY d.instance_id, d.execution_id, d.attempt DESC, d.id DESC`

// claimSignalsSQL returns the unconsumed signals of the instances claimSQL
// just leased, by instance and seq: the third statement of the claim's
// batch, for the reason hydrateSQL is the second (a signal recorded while
// the claim ran is committed, with its wake, once the claim holds the
// row). Only rows whose wake counter is above zero can have signals (every
// signal bumps it in the transaction that records it; ReopenInstance
// starts it again at the instance's signal count), so instances that were
// never signalled cost no probe of instance_signals.
const claimSignalsSQL = `-- name: claim_signals
SELECT g.instance_id, g.seq, g.name, g.payload, coalesce(g.idempotency_key, ''), g.created_at
FROM queued_instances q
JOIN instance_signals g ON g.instance_id = q.instance_id AND g.consumed_by IS NULL
WHERE q.lock_uuid = $1 AND q.lock_expires_at = now() + $2 * interval '1 microsecond' AND q.wake > 0
ORDER BY g.instance_id, g.seq`

// ClaimInstances implements port.Store with one pgx batch — one round
// trip, one implicit transaction: the claim, then the hydration of every
// claimed instance, then its unconsumed signals. Instances come oldest-due first; each one's results are
// ordered by execution id.
func (s *Store) ClaimInstances(ctx context.Context, req port.ClaimRequest) ([]port.ClaimedInstance, error) {
	if err := storeutil.CheckClaim(req); err != nil {
		return nil, err
	}
	term, _ := storeutil.Term(req.Term) // checked above
	lease := micros(req.Lease)
	claim, args := claimAllSQL, []any{req.Owner, term, lease, req.Limit}
	if req.Partitions != nil {
		claim, args = claimInSQL, append(args, int32s(req.Partitions))
	}
	c := &claimed{index: make(map[uuid.UUID]int), due: make(map[uuid.UUID]time.Time)}
	b := &pgx.Batch{}
	b.Queue(claim, args...).Query(c.scanClaims)
	b.Queue(hydrateSQL, req.Owner, lease).Query(c.scanResults)
	b.Queue(claimSignalsSQL, req.Owner, lease).Query(c.scanSignals)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("claim instances: %w", s.check(ctx, err))
	}
	return c.inDueOrder(), nil
}

// claimed gathers what the statements of a claim's batch return into the
// instances claimed.
type claimed struct {
	out   []port.ClaimedInstance
	index map[uuid.UUID]int       // position in out
	due   map[uuid.UUID]time.Time // for the order of out
}

// scanClaims reads the instances claimSQL claimed.
func (c *claimed) scanClaims(rows pgx.Rows) error {
	var (
		ci        port.ClaimedInstance
		scheduled time.Time
		parent    parentColumns
	)
	_, err := pgx.ForEachRow(rows, []any{&ci.ID, &ci.WorkflowVersionID, &ci.Inputs, &ci.State, &ci.CreatedAt,
		&ci.LeaseExpiresAt, &ci.CancelRequested, &scheduled, &ci.HeldBefore, &ci.Gathering,
		&parent.id, &parent.exec, &parent.attempt, &ci.Wake, &ci.Paused, &ci.Run}, func() error {
		got := ci
		got.Parent = parent.ref()
		c.due[got.ID] = scheduled
		got.CreatedAt, got.LeaseExpiresAt = got.CreatedAt.UTC(), got.LeaseExpiresAt.UTC()
		c.index[got.ID] = len(c.out)
		c.out = append(c.out, got)
		return nil
	})
	return err
}

// scanResults reads the results hydrateSQL returns into the instances
// claimed.
func (c *claimed) scanResults(rows pgx.Rows) error {
	var (
		id                uuid.UUID
		r                 port.ActionResult
		attempt           int64
		started, finished pgtype.Timestamptz
	)
	_, err := pgx.ForEachRow(rows, []any{&id, &r.ExecutionID, &attempt, &r.OK, &r.Output, &r.Error, &r.WorkerID,
		&started, &finished}, func() error {
		ci := c.instance(id)
		if ci == nil {
			return nil // not claimed by this call (a lease end equal to the microsecond)
		}
		got := r
		got.InstanceID = id
		got.Attempt = uint32(attempt) // the column's CHECK keeps it in range
		got.StartedAt, got.FinishedAt = timeOf(started), timeOf(finished)
		ci.Results = append(ci.Results, got)
		return nil
	})
	return err
}

// scanSignals reads the signals claimSignalsSQL returns into the instances
// claimed.
func (c *claimed) scanSignals(rows pgx.Rows) error {
	var (
		id  uuid.UUID
		sig port.SignalRecord
	)
	_, err := pgx.ForEachRow(rows, []any{&id, &sig.Seq, &sig.Name, &sig.Payload, &sig.IdempotencyKey, &sig.CreatedAt}, func() error {
		ci := c.instance(id)
		if ci == nil {
			return nil // not claimed by this call, as in hydration
		}
		got := sig
		got.InstanceID = id
		got.CreatedAt = got.CreatedAt.UTC()
		ci.Signals = append(ci.Signals, got)
		return nil
	})
	return err
}

// instance returns the instance claimed with this id, nil when this call
// did not claim it.
func (c *claimed) instance(id uuid.UUID) *port.ClaimedInstance {
	i, ok := c.index[id]
	if !ok {
		return nil
	}
	return &c.out[i]
}

// inDueOrder returns the instances claimed in the claim's order, oldest due
// first: the UPDATE returns rows in no particular order.
func (c *claimed) inDueOrder() []port.ClaimedInstance {
	slices.SortFunc(c.out, func(a, b port.ClaimedInstance) int {
		if d := c.due[a.ID].Compare(c.due[b.ID]); d != 0 {
			return d
		}
		return bytes.Compare(a.ID[:], b.ID[:])
	})
	return c.out
}
