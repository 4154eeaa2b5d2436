package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
)

// batchWriter holds the prepared statements of one progress or completion
// transaction. SQLite runs in-process: a prepared statement executed once
// per row inside one transaction costs no round trip, and the transaction
// commits (and fsyncs) once for the whole batch — the group commit.
type batchWriter struct {
	ctx    context.Context
	now    time.Time
	owned  *sql.Stmt
	result *sql.Stmt
}

func newBatchWriter(ctx context.Context, tx *sql.Tx, now time.Time) (*batchWriter, error) {
	owned, err := tx.PrepareContext(ctx, `
		SELECT EXISTS (SELECT 1 FROM queued_instances
		               WHERE instance_id = ? AND lock_uuid = ? AND lock_expires_at > ?)`)
	if err != nil {
		return nil, err
	}
	result, err := tx.PrepareContext(ctx, `
		INSERT INTO runner_actions_done
		    (instance_id, execution_id, attempt, ok, output, error, worker_id, started_at, finished_at, recorded_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (instance_id, execution_id, attempt) DO NOTHING`)
	if err != nil {
		_ = owned.Close()
		return nil, err
	}
	return &batchWriter{ctx: ctx, now: now, owned: owned, result: result}, nil
}

func (b *batchWriter) close() {
	_ = b.owned.Close()
	_ = b.result.Close()
}

// holds reports whether owner holds a live lease on id. The whole batch is
// one write transaction on the only writer, so the answer cannot change
// before the commit.
func (b *batchWriter) holds(id, owner uuid.UUID) (bool, error) {
	var ok bool
	err := b.owned.QueryRowContext(b.ctx, id, owner, micros(b.now)).Scan(&ok)
	return ok, err
}

// record appends results, ignoring a duplicate (execution, attempt).
func (b *batchWriter) record(id uuid.UUID, results []engine.ActionResult) error {
	for _, r := range results {
		if _, err := b.result.ExecContext(b.ctx, id, r.ExecutionID, int64(r.Attempt), r.OK, r.Output, r.Error, r.WorkerID,
			nullMicros(r.StartedAt), nullMicros(r.FinishedAt), micros(b.now)); err != nil {
			return fmt.Errorf("recording result %s#%d of %s: %w", r.ExecutionID, r.Attempt, id, err)
		}
	}
	return nil
}

// PersistProgress implements engine.Store: one write transaction for the
// batch; per instance, the lease check, then results, then the snapshot,
// then the schedule. An instance whose lease is gone gets ErrOwnershipLost
// and nothing of it is written.
func (s *Store) PersistProgress(ctx context.Context, batch []engine.Progress) ([]error, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	merged, err := storeutil.MergeProgress(batch)
	if err != nil {
		return nil, fmt.Errorf("persist progress: %w", err)
	}
	outcomes := make([]error, len(merged.Items))
	err = s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		now := s.now()
		b, err := newBatchWriter(ctx, tx, now)
		if err != nil {
			return err
		}
		defer b.close()
		for i, p := range merged.Items {
			held, err := b.holds(p.InstanceID, p.Owner)
			if err != nil {
				return err
			}
			if !held {
				outcomes[i] = storeutil.ErrOwnershipLost(p.InstanceID)
				continue
			}
			if err := b.record(p.InstanceID, p.Results); err != nil {
				return err
			}
			if p.State != nil {
				if _, err := tx.ExecContext(ctx, `UPDATE runner_instances SET state = ?, updated_at = ? WHERE instance_id = ?`,
					p.State, micros(now), p.InstanceID); err != nil {
					return err
				}
			}
			if p.ScheduledAt != nil {
				if _, err := tx.ExecContext(ctx, `UPDATE queued_instances SET scheduled_at = ? WHERE instance_id = ?`,
					micros(*p.ScheduledAt), p.InstanceID); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("persist progress of %d instances: %w", len(merged.Items), err)
	}
	return merged.Expand(outcomes), nil
}

// CompleteInstances implements engine.Store: one write transaction; per
// instance, the lease check, then the final results, the outcome, and the
// removal from the queue.
func (s *Store) CompleteInstances(ctx context.Context, batch []engine.Completion) ([]error, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	if err := storeutil.CheckCompletions(batch); err != nil {
		return nil, fmt.Errorf("complete instances: %w", err)
	}
	outcomes := make([]error, len(batch))
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		now := s.now()
		b, err := newBatchWriter(ctx, tx, now)
		if err != nil {
			return err
		}
		defer b.close()
		for i, c := range batch {
			held, err := b.holds(c.InstanceID, c.Owner)
			if err != nil {
				return err
			}
			if !held {
				outcomes[i] = storeutil.ErrOwnershipLost(c.InstanceID)
				continue
			}
			if err := b.record(c.InstanceID, c.Results); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `
				UPDATE runner_instances
				SET status = ?, output = ?, error = ?, state = coalesce(?, state), finished_at = ?, updated_at = ?
				WHERE instance_id = ?`,
				string(c.Status), c.Output, c.Error, c.State, micros(now), micros(now), c.InstanceID); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM queued_instances WHERE instance_id = ?`, c.InstanceID); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("complete %d instances: %w", len(batch), err)
	}
	return outcomes, nil
}
