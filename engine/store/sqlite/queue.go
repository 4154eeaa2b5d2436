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

// QueueInstances implements port.Store: both rows of every instance in
// one write transaction, acknowledged after the commit (synchronous=FULL:
// on disk). A zero ScheduledAt means due now; a nil ID gets a random one.
// Idempotency keys behave as in the Postgres adapter: an existing key of the
// same workflow version returns that instance (Existing), a key of another
// version fails the whole call with port.ErrIdempotencyConflict. A new
// instance due at once with a Claim is stored leased, as ClaimInstances
// would leave it, unless another runloop fenced its partition: then it is
// queued unclaimed, for the partition's owner.
func (s *Store) QueueInstances(ctx context.Context, in []port.NewInstance) ([]port.Queued, error) {
	if len(in) == 0 {
		return nil, nil
	}
	now := s.now()
	insts, err := storeutil.PrepareInstances(in, now)
	if err != nil {
		return nil, err
	}
	dup, err := storeutil.DuplicateKeys(insts)
	if err != nil {
		return nil, err
	}
	out := make([]port.Queued, len(insts))
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		q := s.newQueueTx(ctx, tx, now)
		for i, inst := range insts {
			if dup[i] >= 0 {
				out[i] = port.Queued{ID: out[dup[i]].ID, Existing: true}
				continue
			}
			var err error
			if out[i], err = q.queue(ctx, inst); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("queue %d instances: %w", len(in), err)
	}
	return out, nil
}

// queueTx queues the instances of a batch in one write transaction,
// remembering the workflow versions and partition fences it looked up.
type queueTx struct {
	tx                  *sql.Tx
	fencedBySQL         *sql.Stmt
	insRunner, insQueue *sql.Stmt
	now                 time.Time
	at                  int64 // every row's creation and update time, and a claimed one's start
	known               map[int64]bool
	fences              map[int]uuid.UUID // partition → owner (uuid.Nil: not fenced), as looked up
}

func (s *Store) newQueueTx(ctx context.Context, tx *sql.Tx, now time.Time) *queueTx {
	return &queueTx{
		tx:          tx,
		fencedBySQL: s.ws.fencedBy,
		insRunner:   tx.StmtContext(ctx, s.ws.insertRunner),
		insQueue:    tx.StmtContext(ctx, s.ws.insertQueue),
		now:         now,
		at:          micros(now),
		known:       make(map[int64]bool),
		fences:      make(map[int]uuid.UUID),
	}
}

// queue queues inst, unless an instance of the same workflow version holds
// its idempotency key, and returns what became of it.
func (q *queueTx) queue(ctx context.Context, inst port.NewInstance) (port.Queued, error) {
	if holder, held, err := q.keyHolder(ctx, inst); err != nil || held {
		return holder, err
	}
	if err := q.checkVersion(ctx, inst); err != nil {
		return port.Queued{}, err
	}
	claimed, err := q.claims(ctx, inst)
	if err != nil {
		return port.Queued{}, err
	}
	if err := q.insert(ctx, inst, claimed); err != nil {
		return port.Queued{}, err
	}
	out := port.Queued{ID: inst.ID, Claimed: claimed}
	if claimed {
		out.CreatedAt = fromMicros(q.at)
	}
	return out, nil
}

// keyHolder returns the instance that holds inst's idempotency key, if one
// does (held); one of another workflow version is an error.
func (q *queueTx) keyHolder(ctx context.Context, inst port.NewInstance) (_ port.Queued, held bool, _ error) {
	if inst.IdempotencyKey == "" {
		return port.Queued{}, false, nil
	}
	var (
		holder  uuid.UUID
		version int64
	)
	err := q.tx.QueryRowContext(ctx, `SELECT instance_id, workflow_version_id FROM runner_instances WHERE idempotency_key = ?`,
		inst.IdempotencyKey).Scan(&holder, &version)
	switch {
	case err == nil && version != inst.WorkflowVersionID:
		return port.Queued{}, false, fmt.Errorf("idempotency key %q already names instance %s of workflow version %d, not %d: %w",
			inst.IdempotencyKey, holder, version, inst.WorkflowVersionID, port.ErrIdempotencyConflict)
	case err == nil:
		return port.Queued{ID: holder, Existing: true}, true, nil
	case !errors.Is(err, sql.ErrNoRows):
		return port.Queued{}, false, err
	}
	return port.Queued{}, false, nil
}

// checkVersion fails with port.ErrNotFound when inst's workflow version
// is not stored.
func (q *queueTx) checkVersion(ctx context.Context, inst port.NewInstance) error {
	if q.known[inst.WorkflowVersionID] {
		return nil
	}
	var exists bool
	if err := q.tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM workflow_versions WHERE id = ?)`,
		inst.WorkflowVersionID).Scan(&exists); err != nil {
		return err
	}
	if !exists {
		return fmt.Errorf("instance %s: unknown workflow version %d: %w", inst.ID, inst.WorkflowVersionID, port.ErrNotFound)
	}
	q.known[inst.WorkflowVersionID] = true
	return nil
}

// claims reports whether inst is stored claimed: it asks for a claim, is
// due at once, and no other runloop fenced its partition.
func (q *queueTx) claims(ctx context.Context, inst port.NewInstance) (bool, error) {
	if inst.Claim == nil || inst.ScheduledAt.After(q.now) {
		return false, nil
	}
	fencer, err := q.fencedBy(ctx, inst.Partition)
	if err != nil {
		return false, err
	}
	return fencer == uuid.Nil || fencer == inst.Claim.Owner, nil
}

// fencedBy returns the owner of partition p, uuid.Nil when it is not
// fenced.
func (q *queueTx) fencedBy(ctx context.Context, p int) (uuid.UUID, error) {
	if owner, ok := q.fences[p]; ok {
		return owner, nil
	}
	var owner uuid.UUID
	err := q.tx.StmtContext(ctx, q.fencedBySQL).QueryRowContext(ctx, p).Scan(&owner)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return uuid.Nil, err
	}
	q.fences[p] = owner
	return owner, nil
}

// insert writes the runner row and the queue row of inst: queued, or,
// claimed, running and leased to the claimer under its term.
func (q *queueTx) insert(ctx context.Context, inst port.NewInstance, claimed bool) error {
	key := sql.NullString{String: inst.IdempotencyKey, Valid: inst.IdempotencyKey != ""}
	var (
		status           = "queued"
		started, expires sql.NullInt64 // NULL unless claimed
		owner            any           // NULL unless claimed
		term             int64
	)
	if claimed {
		status, owner = "running", inst.Claim.Owner
		started = sql.NullInt64{Int64: q.at, Valid: true}
		expires = sql.NullInt64{Int64: micros(q.now.Add(inst.Claim.Lease)), Valid: true}
		term, _ = storeutil.Term(inst.Claim.Term) // checked by PrepareInstances
	}
	var (
		parent  uuid.NullUUID
		exec    sql.NullString
		attempt sql.NullInt64
	)
	if p := inst.Parent; p != nil {
		parent = uuid.NullUUID{UUID: p.InstanceID, Valid: true}
		exec = sql.NullString{String: p.ExecutionID, Valid: true}
		attempt = sql.NullInt64{Int64: int64(p.Attempt), Valid: true}
	}
	if _, err := q.insRunner.ExecContext(ctx, inst.ID, inst.WorkflowVersionID, status, inst.Inputs, inst.State, key,
		q.at, started, q.at, parent, exec, attempt); err != nil {
		return fmt.Errorf("instance %s: %w", inst.ID, err)
	}
	if _, err := q.insQueue.ExecContext(ctx, inst.ID, micros(inst.ScheduledAt), owner, expires, term, q.at, inst.Partition); err != nil {
		return fmt.Errorf("instance %s: %w", inst.ID, err)
	}
	return nil
}

// ClaimInstances implements port.Store. SQLite has no SKIP LOCKED and
// needs none: the claim is one write transaction on the single writer
// connection, so no other write interleaves between choosing the due rows
// and stamping them (nor a fence between reading a partition's owner and
// claiming its rows).
func (s *Store) ClaimInstances(ctx context.Context, req port.ClaimRequest) ([]port.ClaimedInstance, error) {
	if err := storeutil.CheckClaim(req); err != nil {
		return nil, err
	}
	term, _ := storeutil.Term(req.Term) // checked above
	now := s.now()
	expires := now.Add(req.Lease)

	var out []port.ClaimedInstance
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		due, args := s.ws.due, []any{micros(now), term, req.Limit, req.Owner}
		if req.Partitions != nil {
			due, args = s.ws.dueIn, append(args, partitionList(req.Partitions))
		}
		ids, err := scanIDs(tx.StmtContext(ctx, due).QueryContext(ctx, args...))
		if err != nil || len(ids) == 0 {
			return err
		}
		list := idList(ids)
		if _, err := tx.StmtContext(ctx, s.ws.lock).ExecContext(ctx, req.Owner, micros(expires), term, list); err != nil {
			return err
		}
		index, err := s.readClaimed(ctx, tx, list, &out)
		if err != nil {
			return err
		}
		if _, err := tx.StmtContext(ctx, s.ws.start).ExecContext(ctx, micros(now), list); err != nil {
			return err
		}

		results, err := scanResults(tx.StmtContext(ctx, s.ws.latestResults).QueryContext(ctx, list))
		if err != nil {
			return err
		}
		for _, r := range results {
			c := &out[index[r.InstanceID]]
			c.Results = append(c.Results, r)
		}

		signals, err := scanSignals(tx.StmtContext(ctx, s.ws.pendingSignals).QueryContext(ctx, list))
		if err != nil {
			return err
		}
		for _, sig := range signals {
			c := &out[index[sig.InstanceID]]
			c.Signals = append(c.Signals, sig)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim instances: %w", err)
	}
	return out, nil
}

// readClaimed appends the instances of list (a JSON array of ids) to out,
// before startSQL marks them started, and returns each one's position.
func (s *Store) readClaimed(ctx context.Context, tx *sql.Tx, list string, out *[]port.ClaimedInstance) (map[uuid.UUID]int, error) {
	rows, err := tx.StmtContext(ctx, s.ws.claimed).QueryContext(ctx, list)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	index := make(map[uuid.UUID]int)
	for rows.Next() {
		var (
			c                port.ClaimedInstance
			created, expires int64
			parent           parentColumns
		)
		if err := rows.Scan(&c.ID, &c.WorkflowVersionID, &c.Inputs, &c.State, &created, &expires, &c.CancelRequested, &c.HeldBefore, &c.Gathering,
			&parent.id, &parent.exec, &parent.attempt, &c.Wake, &c.Paused, &c.Run); err != nil {
			return nil, err
		}
		c.Parent = parent.ref()
		c.CreatedAt, c.LeaseExpiresAt = fromMicros(created), fromMicros(expires)
		index[c.ID] = len(*out)
		*out = append(*out, c)
	}
	return index, rows.Err()
}

// scanIDs reads the rows of a query returning one column of instance ids
// (and closes them): scanIDs(stmt.QueryContext(ctx, args...)).
func scanIDs(rows *sql.Rows, err error) ([]uuid.UUID, error) {
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var ids []uuid.UUID
	for rows.Next() {
		var id uuid.UUID
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// scanResults reads the rows of a query returning runner_actions_done rows
// (instance, execution, attempt, ok, output, error, worker, started,
// finished) and closes them.
func scanResults(rows *sql.Rows, err error) ([]port.ActionResult, error) {
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []port.ActionResult
	for rows.Next() {
		var (
			r                 port.ActionResult
			attempt           int64
			started, finished sql.NullInt64
		)
		if err := rows.Scan(&r.InstanceID, &r.ExecutionID, &attempt, &r.OK, &r.Output, &r.Error, &r.WorkerID, &started, &finished); err != nil {
			return nil, err
		}
		r.Attempt = uint32(attempt) // the column's CHECK keeps it in range
		r.StartedAt, r.FinishedAt = timeOf(started), timeOf(finished)
		out = append(out, r)
	}
	return out, rows.Err()
}
