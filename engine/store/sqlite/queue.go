package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
)

// QueueInstances implements engine.Store: both rows of every instance in
// one write transaction, acknowledged after the commit (synchronous=FULL:
// on disk). A zero ScheduledAt means due now; a nil ID gets a random one.
// Idempotency keys behave as in the Postgres adapter: an existing key of the
// same workflow version returns that instance (Existing), a key of another
// version fails the whole call with engine.ErrIdempotencyConflict. A new
// instance due at once with a Claim is stored leased, as ClaimInstances
// would leave it, unless another runloop fenced its partition: then it is
// queued unclaimed, for the partition's owner.
func (s *Store) QueueInstances(ctx context.Context, in []engine.NewInstance) ([]engine.Queued, error) {
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
	out := make([]engine.Queued, len(insts))
	at := micros(now) // every row's creation and update time, and a claimed one's start
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		insRunner, insQueue := tx.StmtContext(ctx, s.ws.insertRunner), tx.StmtContext(ctx, s.ws.insertQueue)

		known := make(map[int64]bool)
		fences := make(map[int]uuid.UUID) // partition → owner (uuid.Nil: not fenced), as looked up
		fencedBy := func(p int) (uuid.UUID, error) {
			if owner, ok := fences[p]; ok {
				return owner, nil
			}
			var owner uuid.UUID
			err := tx.StmtContext(ctx, s.ws.fencedBy).QueryRowContext(ctx, p).Scan(&owner)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return uuid.Nil, err
			}
			fences[p] = owner
			return owner, nil
		}
		for i, inst := range insts {
			if dup[i] >= 0 {
				out[i] = engine.Queued{ID: out[dup[i]].ID, Existing: true}
				continue
			}
			if inst.IdempotencyKey != "" {
				var (
					holder  uuid.UUID
					version int64
				)
				err := tx.QueryRowContext(ctx, `SELECT instance_id, workflow_version_id FROM runner_instances WHERE idempotency_key = ?`,
					inst.IdempotencyKey).Scan(&holder, &version)
				switch {
				case err == nil && version != inst.WorkflowVersionID:
					return fmt.Errorf("idempotency key %q already names instance %s of workflow version %d, not %d: %w",
						inst.IdempotencyKey, holder, version, inst.WorkflowVersionID, engine.ErrIdempotencyConflict)
				case err == nil:
					out[i] = engine.Queued{ID: holder, Existing: true}
					continue
				case !errors.Is(err, sql.ErrNoRows):
					return err
				}
			}
			if !known[inst.WorkflowVersionID] {
				var exists bool
				if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM workflow_versions WHERE id = ?)`,
					inst.WorkflowVersionID).Scan(&exists); err != nil {
					return err
				}
				if !exists {
					return fmt.Errorf("instance %s: unknown workflow version %d: %w", inst.ID, inst.WorkflowVersionID, engine.ErrNotFound)
				}
				known[inst.WorkflowVersionID] = true
			}
			key := sql.NullString{String: inst.IdempotencyKey, Valid: inst.IdempotencyKey != ""}
			var (
				status           = "queued"
				started, expires sql.NullInt64 // NULL unless claimed
				owner            any           // NULL unless claimed
				term             int64
			)
			claimed := inst.Claim != nil && !inst.ScheduledAt.After(now)
			if claimed {
				fencer, err := fencedBy(inst.Partition)
				if err != nil {
					return err
				}
				claimed = fencer == uuid.Nil || fencer == inst.Claim.Owner
			}
			if claimed {
				status, owner = "running", inst.Claim.Owner
				started = sql.NullInt64{Int64: at, Valid: true}
				expires = sql.NullInt64{Int64: micros(now.Add(inst.Claim.Lease)), Valid: true}
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
			if _, err := insRunner.ExecContext(ctx, inst.ID, inst.WorkflowVersionID, status, inst.Inputs, inst.State, key,
				at, started, at, parent, exec, attempt); err != nil {
				return fmt.Errorf("instance %s: %w", inst.ID, err)
			}
			if _, err := insQueue.ExecContext(ctx, inst.ID, micros(inst.ScheduledAt), owner, expires, term, at, inst.Partition); err != nil {
				return fmt.Errorf("instance %s: %w", inst.ID, err)
			}
			out[i] = engine.Queued{ID: inst.ID, Claimed: claimed}
			if claimed {
				out[i].CreatedAt = fromMicros(at)
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("queue %d instances: %w", len(in), err)
	}
	return out, nil
}

// ClaimInstances implements engine.Store. SQLite has no SKIP LOCKED and
// needs none: the claim is one write transaction on the single writer
// connection, so no other write interleaves between choosing the due rows
// and stamping them (nor a fence between reading a partition's owner and
// claiming its rows).
func (s *Store) ClaimInstances(ctx context.Context, req engine.ClaimRequest) ([]engine.ClaimedInstance, error) {
	if err := storeutil.CheckClaim(req); err != nil {
		return nil, err
	}
	term, _ := storeutil.Term(req.Term) // checked above
	now := s.now()
	expires := now.Add(req.Lease)

	var out []engine.ClaimedInstance
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
func (s *Store) readClaimed(ctx context.Context, tx *sql.Tx, list string, out *[]engine.ClaimedInstance) (map[uuid.UUID]int, error) {
	rows, err := tx.StmtContext(ctx, s.ws.claimed).QueryContext(ctx, list)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	index := make(map[uuid.UUID]int)
	for rows.Next() {
		var (
			c                engine.ClaimedInstance
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
func scanResults(rows *sql.Rows, err error) ([]engine.ActionResult, error) {
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []engine.ActionResult
	for rows.Next() {
		var (
			r                 engine.ActionResult
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
