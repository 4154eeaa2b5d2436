package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// The statements the writer runs for every task or instance: results,
// snapshots, completions, submissions and claims. SQLite parses a
// statement each time it is prepared, and at 20,000 tasks a second parsing
// these took a fifth of the writer's time (9 % of a server's CPU). They
// are prepared once, when the store opens, on the writer's only
// connection; a transaction takes them with Tx.StmtContext, which reuses a
// statement already prepared on its connection (and prepares it again on
// a new connection, should database/sql ever replace the writer's).
const (
	insertResultSQL = `
		INSERT INTO runner_actions_done
		    (instance_id, execution_id, attempt, ok, output, error, worker_id, started_at, finished_at, recorded_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (instance_id, execution_id, attempt) DO NOTHING`

	// heldSQL: which of a JSON array of instances (?1) owner (?2) may
	// write at ?3: it holds a live lease on them, and their partition is
	// not fenced by another runloop.
	heldSQL = `
		SELECT instance_id FROM queued_instances q
		WHERE instance_id IN (SELECT value FROM json_each(?1)) AND lock_uuid = ?2 AND lock_expires_at > ?3
		  AND NOT EXISTS (SELECT 1 FROM partitions pt WHERE pt.partition = q.partition AND pt.owner <> ?2)`

	setStateSQL     = `UPDATE runner_instances SET state = ?, updated_at = ? WHERE instance_id = ?`
	setGatheringSQL = `UPDATE runner_instances SET gathering_at = coalesce(gathering_at, ?), updated_at = ? WHERE instance_id = ?`
	setScheduledSQL = `UPDATE queued_instances SET scheduled_at = ? WHERE instance_id = ?`
	// parkSQL releases the lease of instance ?4, due at ?3 unless its wake
	// counter passed ?1 or a cancellation was requested (then at ?2, now).
	parkSQL = `
		UPDATE queued_instances
		SET scheduled_at = CASE WHEN wake > ?1 OR cancel_requested THEN ?2 ELSE ?3 END,
		    lock_uuid = NULL, lock_expires_at = NULL
		WHERE instance_id = ?4`
	// consumeSQL marks signal ?2 of instance ?3 consumed by ?1, unless
	// another consumer took it first.
	consumeSQL = `UPDATE instance_signals SET consumed_by = ?1 WHERE seq = ?2 AND instance_id = ?3 AND consumed_by IS NULL`

	finishSQL = `
		UPDATE runner_instances
		SET status = ?, output = ?, error = ?, state = coalesce(?, state), finished_at = ?, updated_at = ?
		WHERE instance_id = ?`
	dequeueSQL = `DELETE FROM queued_instances WHERE instance_id = ?`

	// insertRunnerSQL and insertQueueSQL queue an instance, or store it
	// claimed (status 'running' and started_at; lock_uuid, lock_expires_at
	// and term) as a claim would leave it.
	insertRunnerSQL = `
		INSERT INTO runner_instances
		    (instance_id, workflow_version_id, status, inputs, state, idempotency_key, created_at, started_at, updated_at,
		     parent_instance_id, parent_execution, parent_attempt)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	insertQueueSQL = `
		INSERT INTO queued_instances (instance_id, scheduled_at, lock_uuid, lock_expires_at, term, created_at, partition)
		VALUES (?, ?, ?, ?, ?, ?, ?)`
	// fencedBySQL: the owner of a partition, if it is fenced.
	fencedBySQL = `SELECT owner FROM partitions WHERE partition = ?`

	// dueSQL: the due rows (?1 now) claimer ?4 of term ?2 may take, up to
	// ?3: scheduled, and not held under a live lease of the same or a
	// newer term — or, in a partition fenced by the claimer, held by
	// another runloop whatever its lease; never in a partition fenced by
	// another runloop. dueInSQL takes them in the partitions of ?5 (a
	// JSON array) only.
	dueSQL   = dueHead + dueTail
	dueInSQL = dueHead + `
		  AND q.partition IN (SELECT value FROM json_each(?5))` + dueTail
	dueHead = `
		SELECT instance_id FROM queued_instances q
		WHERE scheduled_at <= ?1`
	dueTail = `
		  AND (lock_uuid IS NULL OR lock_expires_at <= ?1 OR term < ?2
		       OR (lock_uuid <> ?4 AND q.partition IN (SELECT pt.partition FROM partitions pt WHERE pt.owner = ?4)))
		  AND NOT EXISTS (SELECT 1 FROM partitions pt WHERE pt.partition = q.partition AND pt.owner <> ?4)
		ORDER BY scheduled_at, instance_id
		LIMIT ?3`
	lockSQL = `
		UPDATE queued_instances SET lock_uuid = ?, lock_expires_at = ?, term = ?
		WHERE instance_id IN (SELECT value FROM json_each(?))`
	startSQL = `
		UPDATE runner_instances SET status = 'running', started_at = coalesce(started_at, ?)
		WHERE instance_id IN (SELECT value FROM json_each(?))`
	// claimedSQL runs before startSQL: started_at is set at an instance's
	// first claim, so a value here means an earlier one.
	claimedSQL = `
		SELECT q.instance_id, r.workflow_version_id, r.inputs, r.state, r.created_at, q.lock_expires_at, q.cancel_requested,
		       r.started_at IS NOT NULL, r.gathering_at IS NOT NULL, r.parent_instance_id, r.parent_execution, r.parent_attempt,
		       q.wake, r.paused, r.runs
		FROM queued_instances q JOIN runner_instances r ON r.instance_id = q.instance_id
		WHERE q.instance_id IN (SELECT value FROM json_each(?))
		ORDER BY q.scheduled_at, q.instance_id`
	// latestResultsSQL: the latest attempt of every execution (hydration).
	latestResultsSQL = `
		SELECT instance_id, execution_id, attempt, ok, output, error, worker_id, started_at, finished_at
		FROM (
		    SELECT d.*, row_number() OVER (
		        PARTITION BY d.instance_id, d.execution_id ORDER BY d.attempt DESC, d.id DESC) AS rn
		    FROM runner_actions_done d
		    WHERE d.instance_id IN (SELECT value FROM json_each(?))
		)
		WHERE rn = 1
		ORDER BY instance_id, execution_id`
	// pendingSignalsSQL: the unconsumed signals of the instances of a JSON
	// array, by instance and seq.
	pendingSignalsSQL = `
		SELECT instance_id, seq, name, payload, coalesce(idempotency_key, ''), created_at
		FROM instance_signals
		WHERE instance_id IN (SELECT value FROM json_each(?)) AND consumed_by IS NULL
		ORDER BY instance_id, seq`

	// The statements of RecordSignals, run once per signal or instance of
	// a storm of signals.
	signalWakeSQL   = `SELECT wake FROM queued_instances WHERE instance_id = ?`
	signalByKeySQL  = `SELECT ` + signalColumns + ` FROM instance_signals WHERE instance_id = ? AND idempotency_key = ?`
	signalCountSQL  = `SELECT count(*) FROM instance_signals WHERE instance_id = ? AND consumed_by IS NULL`
	insertSignalSQL = `
		INSERT INTO instance_signals (instance_id, name, payload, idempotency_key, created_at)
		VALUES (?, ?, ?, ?, ?) RETURNING seq`
	// bumpWakeSQL raises the wake counter of instance ?3 by ?1 and makes
	// it due at ?2 (now) at the latest.
	bumpWakeSQL = `
		UPDATE queued_instances SET wake = wake + ?1, scheduled_at = min(scheduled_at, ?2)
		WHERE instance_id = ?3`
)

// writerStmts are the hot statements, prepared on the writer.
type writerStmts struct {
	insertResult, held, setState, setGathering, setScheduled, finish, dequeue,
	insertRunner, insertQueue, fencedBy, due, dueIn, lock, start, claimed, latestResults,
	park, consume, pendingSignals,
	signalWake, signalByKey, signalCount, insertSignal, bumpWake *sql.Stmt

	all []*sql.Stmt // every one prepared, to close
}

// prepareWriter prepares the hot statements on w (before any transaction
// holds its only connection).
func prepareWriter(ctx context.Context, w *sql.DB) (*writerStmts, error) {
	ws := &writerStmts{}
	for _, p := range []struct {
		to    **sql.Stmt
		query string
	}{
		{&ws.insertResult, insertResultSQL}, {&ws.held, heldSQL}, {&ws.setState, setStateSQL}, {&ws.setGathering, setGatheringSQL},
		{&ws.setScheduled, setScheduledSQL}, {&ws.finish, finishSQL}, {&ws.dequeue, dequeueSQL},
		{&ws.insertRunner, insertRunnerSQL}, {&ws.insertQueue, insertQueueSQL}, {&ws.fencedBy, fencedBySQL},
		{&ws.due, dueSQL}, {&ws.dueIn, dueInSQL},
		{&ws.lock, lockSQL}, {&ws.start, startSQL}, {&ws.claimed, claimedSQL}, {&ws.latestResults, latestResultsSQL},
		{&ws.park, parkSQL}, {&ws.consume, consumeSQL}, {&ws.pendingSignals, pendingSignalsSQL},
		{&ws.signalWake, signalWakeSQL}, {&ws.signalByKey, signalByKeySQL}, {&ws.signalCount, signalCountSQL},
		{&ws.insertSignal, insertSignalSQL}, {&ws.bumpWake, bumpWakeSQL},
	} {
		st, err := w.PrepareContext(ctx, p.query)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("preparing %s: %w", p.query, err), ws.close())
		}
		*p.to = st
		ws.all = append(ws.all, st)
	}
	return ws, nil
}

// close closes every statement prepared.
func (ws *writerStmts) close() error {
	var errs []error
	for _, st := range ws.all {
		errs = append(errs, st.Close())
	}
	return errors.Join(errs...)
}
