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
// version fails the whole call with engine.ErrIdempotencyConflict.
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
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		insRunner, err := tx.PrepareContext(ctx, `
			INSERT INTO runner_instances
			    (instance_id, workflow_version_id, status, inputs, state, idempotency_key, created_at, updated_at)
			VALUES (?, ?, 'queued', ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer func() { _ = insRunner.Close() }()
		insQueue, err := tx.PrepareContext(ctx, `
			INSERT INTO queued_instances (instance_id, scheduled_at, created_at) VALUES (?, ?, ?)`)
		if err != nil {
			return err
		}
		defer func() { _ = insQueue.Close() }()

		known := make(map[int64]bool)
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
			if _, err := insRunner.ExecContext(ctx, inst.ID, inst.WorkflowVersionID, inst.Inputs, inst.State, key,
				micros(now), micros(now)); err != nil {
				return fmt.Errorf("instance %s: %w", inst.ID, err)
			}
			if _, err := insQueue.ExecContext(ctx, inst.ID, micros(inst.ScheduledAt), micros(now)); err != nil {
				return fmt.Errorf("instance %s: %w", inst.ID, err)
			}
			out[i] = engine.Queued{ID: inst.ID}
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
// and stamping them.
func (s *Store) ClaimInstances(ctx context.Context, req engine.ClaimRequest) ([]engine.ClaimedInstance, error) {
	if err := storeutil.CheckClaim(req); err != nil {
		return nil, err
	}
	term, _ := storeutil.Term(req.Term) // checked above
	now := s.now()
	expires := now.Add(req.Lease)

	var out []engine.ClaimedInstance
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		// The due rows: scheduled, and not held under a live lease of the
		// same or a newer term.
		ids, err := queryIDs(ctx, tx, `
			SELECT instance_id FROM queued_instances
			WHERE scheduled_at <= ?1
			  AND (lock_uuid IS NULL OR lock_expires_at <= ?1 OR term < ?2)
			ORDER BY scheduled_at, instance_id
			LIMIT ?3`, micros(now), term, req.Limit)
		if err != nil || len(ids) == 0 {
			return err
		}
		list := idList(ids)
		if _, err := tx.ExecContext(ctx, `
			UPDATE queued_instances SET lock_uuid = ?, lock_expires_at = ?, term = ?
			WHERE instance_id IN (SELECT value FROM json_each(?))`,
			req.Owner, micros(expires), term, list); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `
			UPDATE runner_instances SET status = 'running', started_at = coalesce(started_at, ?)
			WHERE instance_id IN (SELECT value FROM json_each(?))`, micros(now), list); err != nil {
			return err
		}

		rows, err := tx.QueryContext(ctx, `
			SELECT q.instance_id, r.workflow_version_id, r.inputs, r.state, r.created_at, q.lock_expires_at, q.cancel_requested
			FROM queued_instances q JOIN runner_instances r ON r.instance_id = q.instance_id
			WHERE q.instance_id IN (SELECT value FROM json_each(?))
			ORDER BY q.scheduled_at, q.instance_id`, list)
		if err != nil {
			return err
		}
		defer func() { _ = rows.Close() }()
		index := make(map[uuid.UUID]int, len(ids))
		for rows.Next() {
			var (
				c                engine.ClaimedInstance
				created, expires int64
			)
			if err := rows.Scan(&c.ID, &c.WorkflowVersionID, &c.Inputs, &c.State, &created, &expires, &c.CancelRequested); err != nil {
				return err
			}
			c.CreatedAt, c.LeaseExpiresAt = fromMicros(created), fromMicros(expires)
			index[c.ID] = len(out)
			out = append(out, c)
		}
		if err := rows.Err(); err != nil {
			return err
		}

		// Hydration: the latest attempt of every execution.
		results, err := queryResults(ctx, tx, `
			SELECT instance_id, execution_id, attempt, ok, output, error, worker_id, started_at, finished_at
			FROM (
			    SELECT d.*, row_number() OVER (
			        PARTITION BY d.instance_id, d.execution_id ORDER BY d.attempt DESC, d.id DESC) AS rn
			    FROM runner_actions_done d
			    WHERE d.instance_id IN (SELECT value FROM json_each(?))
			)
			WHERE rn = 1
			ORDER BY instance_id, execution_id`, list)
		if err != nil {
			return err
		}
		for _, r := range results {
			c := &out[index[r.InstanceID]]
			c.Results = append(c.Results, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim instances: %w", err)
	}
	return out, nil
}

// queryer is a *sql.DB or *sql.Tx.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// queryIDs runs a query returning one column of instance ids.
func queryIDs(ctx context.Context, q queryer, query string, args ...any) ([]uuid.UUID, error) {
	rows, err := q.QueryContext(ctx, query, args...)
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

// queryResults runs a query returning runner_actions_done rows (instance,
// execution, attempt, ok, output, error, worker, started, finished).
func queryResults(ctx context.Context, q queryer, query string, args ...any) ([]engine.ActionResult, error) {
	rows, err := q.QueryContext(ctx, query, args...)
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
