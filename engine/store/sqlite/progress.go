package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
)

// batchWriter holds the statements of one progress or completion
// transaction. SQLite runs in-process: a prepared statement executed once
// per row inside one transaction costs no round trip, and the transaction
// commits (and fsyncs) once for the whole batch — the group commit.
type batchWriter struct {
	ctx context.Context
	tx  *sql.Tx
	ws  *writerStmts
	now time.Time

	inTx map[*sql.Stmt]*sql.Stmt // the writer's statements taken into tx so far
}

func newBatchWriter(ctx context.Context, tx *sql.Tx, ws *writerStmts, now time.Time) *batchWriter {
	return &batchWriter{ctx: ctx, tx: tx, ws: ws, now: now, inTx: make(map[*sql.Stmt]*sql.Stmt, 4)}
}

// stmt is one of the writer's statements in this transaction (which
// closes it when it ends), taken in on first use: a progress batch never
// finishes an instance, a completion never sets a schedule.
func (b *batchWriter) stmt(st *sql.Stmt) *sql.Stmt {
	in, ok := b.inTx[st]
	if !ok {
		in = b.tx.StmtContext(b.ctx, st)
		b.inTx[st] = in
	}
	return in
}

// lease is an instance and the owner a batch says holds it.
type lease struct{ id, owner uuid.UUID }

// held returns which of leases are live: one statement per owner (a batch
// has one), however many instances. The whole batch is one write
// transaction on the only writer, so the answer cannot change before the
// commit.
func (b *batchWriter) held(leases []lease) (map[lease]bool, error) {
	ids := map[uuid.UUID]*strings.Builder{} // by owner: a JSON array of ids
	for _, l := range leases {
		w := ids[l.owner]
		if w == nil {
			w = &strings.Builder{}
			w.Grow(39*len(leases) + 2)
			w.WriteByte('[')
			ids[l.owner] = w
		} else {
			w.WriteByte(',')
		}
		w.WriteByte('"')
		w.WriteString(l.id.String())
		w.WriteByte('"')
	}
	out := make(map[lease]bool, len(leases))
	for owner, w := range ids {
		w.WriteByte(']')
		rows, err := b.stmt(b.ws.held).QueryContext(b.ctx, w.String(), owner, micros(b.now))
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var id uuid.UUID
			if err := rows.Scan(&id); err != nil {
				_ = rows.Close()
				return nil, err
			}
			out[lease{id, owner}] = true
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// consume marks the signals of instance id consumed, keeping a first
// consumer.
func (b *batchWriter) consume(id uuid.UUID, uses []port.SignalUse) error {
	for _, u := range uses {
		if _, err := b.stmt(b.ws.consume).ExecContext(b.ctx, u.By, u.Seq, id); err != nil {
			return fmt.Errorf("consuming signal %d of %s: %w", u.Seq, id, err)
		}
	}
	return nil
}

// record appends results, ignoring a duplicate (execution, attempt).
func (b *batchWriter) record(id uuid.UUID, results []port.ActionResult) error {
	for _, r := range results {
		if _, err := b.stmt(b.ws.insertResult).ExecContext(b.ctx, id, r.ExecutionID, int64(r.Attempt), r.OK, r.Output, r.Error, r.WorkerID,
			nullMicros(r.StartedAt), nullMicros(r.FinishedAt), micros(b.now)); err != nil {
			return fmt.Errorf("recording result %s#%d of %s: %w", r.ExecutionID, r.Attempt, id, err)
		}
	}
	return nil
}

// PersistProgress implements port.Store: one write transaction for the
// batch; per instance, the lease check, then results and consumed
// signals, then the snapshot, then the schedule or the park. An instance whose lease is gone gets ErrOwnershipLost
// and nothing of it is written.
func (s *Store) PersistProgress(ctx context.Context, batch []port.Progress) ([]error, error) {
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
		b := newBatchWriter(ctx, tx, s.ws, now)
		leases := make([]lease, len(merged.Items))
		for i, p := range merged.Items {
			leases[i] = lease{p.InstanceID, p.Owner}
		}
		held, err := b.held(leases)
		if err != nil {
			return err
		}
		for i, p := range merged.Items {
			if !held[leases[i]] {
				outcomes[i] = storeutil.ErrOwnershipLost(p.InstanceID)
				continue
			}
			if err := b.record(p.InstanceID, p.Results); err != nil {
				return err
			}
			if err := b.consume(p.InstanceID, p.ConsumedSignals); err != nil {
				return err
			}
			if p.State != nil {
				if _, err := b.stmt(s.ws.setState).ExecContext(ctx, p.State, micros(now), p.InstanceID); err != nil {
					return err
				}
			}
			if p.Gathering {
				if _, err := b.stmt(s.ws.setGathering).ExecContext(ctx, micros(now), micros(now), p.InstanceID); err != nil {
					return err
				}
			}
			switch {
			case p.Park != nil:
				until := p.Park.Until
				if until.IsZero() {
					until = storeutil.Far
				}
				if _, err := b.stmt(s.ws.park).ExecContext(ctx, p.Park.WakeSeen, micros(now), micros(until), p.InstanceID); err != nil {
					return err
				}
			case p.ScheduledAt != nil:
				if _, err := b.stmt(s.ws.setScheduled).ExecContext(ctx, micros(*p.ScheduledAt), p.InstanceID); err != nil {
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

// CompleteInstances implements port.Store: one write transaction; per
// instance, the lease check, then the final results and consumed signals,
// the outcome, and the removal from the queue. A completion refused because the instance already
// finished with the same status is a replay of one that committed, and
// counts as written.
func (s *Store) CompleteInstances(ctx context.Context, batch []port.Completion) ([]error, error) {
	if len(batch) == 0 {
		return nil, nil
	}
	if err := storeutil.CheckCompletions(batch); err != nil {
		return nil, fmt.Errorf("complete instances: %w", err)
	}
	outcomes := make([]error, len(batch))
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		now := s.now()
		b := newBatchWriter(ctx, tx, s.ws, now)
		leases := make([]lease, len(batch))
		for i, c := range batch {
			leases[i] = lease{c.InstanceID, c.Owner}
		}
		held, err := b.held(leases)
		if err != nil {
			return err
		}
		for i, c := range batch {
			if !held[leases[i]] {
				replayed, err := finishedAs(ctx, tx, c.InstanceID, c.Status)
				if err != nil {
					return err
				}
				if !replayed {
					outcomes[i] = storeutil.ErrOwnershipLost(c.InstanceID)
				}
				continue
			}
			if err := b.record(c.InstanceID, c.Results); err != nil {
				return err
			}
			if err := b.consume(c.InstanceID, c.ConsumedSignals); err != nil {
				return err
			}
			if _, err := b.stmt(s.ws.finish).ExecContext(ctx, string(c.Status), c.Output, c.Error, c.State, micros(now), micros(now), c.InstanceID); err != nil {
				return err
			}
			if _, err := b.stmt(s.ws.dequeue).ExecContext(ctx, c.InstanceID); err != nil {
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

// finishedAs reports whether the instance is out of the queue and finished
// with status: a completion refused for it replays one that committed.
func finishedAs(ctx context.Context, tx *sql.Tx, id uuid.UUID, status port.InstanceState) (bool, error) {
	var n int
	err := tx.QueryRowContext(ctx, `
		SELECT count(*) FROM runner_instances r
		WHERE r.instance_id = ? AND r.status = ?
		  AND NOT EXISTS (SELECT 1 FROM queued_instances q WHERE q.instance_id = r.instance_id)`, id, string(status)).Scan(&n)
	return n > 0, err
}
