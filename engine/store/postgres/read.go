package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
	"github.com/robonet/robonet/engine/value"
)

// instanceColumns are the columns scanInstance reads, from runner_instances
// r joined with workflow_versions w.
const instanceColumns = `r.instance_id, r.workflow_version_id, w.workflow_name, w.workflow_version, r.status,
	r.inputs, r.state, r.output, r.error, coalesce(r.idempotency_key, ''), r.created_at, r.started_at,
	r.finished_at, r.cancel_requested, r.gathering_at IS NOT NULL,
	r.parent_instance_id, r.parent_execution, r.parent_attempt, r.paused, r.runs`

// listColumns are instanceColumns without the instance's inputs, snapshot
// and output (NULL in their place): a listing needs none of them, and a
// large instance's snapshot is megabytes.
const listColumns = `r.instance_id, r.workflow_version_id, w.workflow_name, w.workflow_version, r.status,
	NULL::bytea, NULL::bytea, NULL::bytea, r.error, coalesce(r.idempotency_key, ''), r.created_at, r.started_at,
	r.finished_at, r.cancel_requested, r.gathering_at IS NOT NULL,
	r.parent_instance_id, r.parent_execution, r.parent_attempt, r.paused, r.runs`

func scanInstance(row pgx.CollectableRow) (port.InstanceRecord, error) {
	var (
		rec               port.InstanceRecord
		version           int64
		status            string
		started, finished pgtype.Timestamptz
		parent            parentColumns
	)
	err := row.Scan(&rec.ID, &rec.WorkflowVersionID, &rec.WorkflowName, &version, &status,
		&rec.Inputs, &rec.State, &rec.Output, &rec.Error, &rec.IdempotencyKey, &rec.CreatedAt, &started,
		&finished, &rec.CancelRequested, &rec.Gathering, &parent.id, &parent.exec, &parent.attempt, &rec.Paused, &rec.Run)
	rec.Parent = parent.ref()
	rec.WorkflowVersion = uint32(version) // CHECK keeps it in range
	rec.Status = port.InstanceState(status)
	rec.Gathering = rec.Gathering && rec.Status == port.StateRunning
	rec.Paused = rec.Paused && !rec.Status.Terminal()
	rec.CreatedAt = rec.CreatedAt.UTC()
	rec.StartedAt = timePtr(started)
	rec.FinishedAt = timePtr(finished)
	return rec, err
}

// GetInstance implements port.Store.
func (s *Store) GetInstance(ctx context.Context, id uuid.UUID) (port.InstanceRecord, error) {
	q := `-- name: get_instance
		SELECT ` + instanceColumns + `
		FROM runner_instances r JOIN workflow_versions w ON w.id = r.workflow_version_id
		WHERE r.instance_id = $1`
	rows, err := s.pool.Query(ctx, q, id)
	if err != nil {
		return port.InstanceRecord{}, fmt.Errorf("get instance %s: %w", id, s.check(ctx, err))
	}
	rec, err := pgx.CollectExactlyOneRow(rows, scanInstance)
	if errors.Is(err, pgx.ErrNoRows) {
		return port.InstanceRecord{}, fmt.Errorf("get instance %s: %w", id, port.ErrNotFound)
	}
	if err != nil {
		return port.InstanceRecord{}, fmt.Errorf("get instance %s: %w", id, s.check(ctx, err))
	}
	return rec, nil
}

// ListInstances implements port.Store: newest first by (created_at,
// instance_id), keyset paging (the page token is the last row's key), one
// extra row fetched to know whether another page follows. The WHERE clause
// holds only the filters in use, so the planner can pick the matching
// index.
func (s *Store) ListInstances(ctx context.Context, f port.InstanceFilter) (port.InstancePage, error) {
	if err := storeutil.CheckStatuses(f.Statuses); err != nil {
		return port.InstancePage{}, fmt.Errorf("list instances: %w", s.check(ctx, err))
	}
	key, paged, err := storeutil.DecodePageToken(f.PageToken)
	if err != nil {
		return port.InstancePage{}, fmt.Errorf("list instances: %w", s.check(ctx, err))
	}
	limit := storeutil.ListLimit(f.Limit, storeutil.DefaultInstanceLimit)

	var (
		where []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	if f.WorkflowName != "" {
		where = append(where, "w.workflow_name = "+arg(f.WorkflowName))
	}
	if len(f.Statuses) > 0 {
		statuses := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			statuses[i] = string(st)
		}
		where = append(where, "r.status = ANY("+arg(statuses)+"::text[])")
	}
	if f.IDPrefix != "" {
		lo, hi, ok := storeutil.IDPrefixRange(f.IDPrefix)
		if !ok {
			return port.InstancePage{}, fmt.Errorf("list instances: id prefix %q: want hex digits: %w", value.QuoteClipped(f.IDPrefix, 64), port.ErrInvalidArgument)
		}
		where = append(where, "r.instance_id BETWEEN "+arg(lo)+" AND "+arg(hi))
	}
	if !f.CreatedAfter.IsZero() {
		where = append(where, "r.created_at >= "+arg(f.CreatedAfter))
	}
	if paged {
		where = append(where, "(r.created_at, r.instance_id) < ("+arg(key.CreatedAt)+", "+arg(key.ID)+")")
	}
	q := `-- name: list_instances
		SELECT ` + listColumns + `
		FROM runner_instances r JOIN workflow_versions w ON w.id = r.workflow_version_id`
	if len(where) > 0 {
		q += "\nWHERE " + strings.Join(where, " AND ")
	}
	q += "\nORDER BY r.created_at DESC, r.instance_id DESC\nLIMIT " + arg(limit+1)

	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return port.InstancePage{}, fmt.Errorf("list instances: %w", s.check(ctx, err))
	}
	recs, err := pgx.CollectRows(rows, scanInstance)
	if err != nil {
		return port.InstancePage{}, fmt.Errorf("list instances: %w", s.check(ctx, err))
	}
	page := port.InstancePage{Instances: recs}
	if len(recs) > limit {
		page.Instances = recs[:limit]
		last := page.Instances[limit-1]
		page.NextPageToken = storeutil.EncodePageToken(storeutil.PageKey{CreatedAt: last.CreatedAt, ID: last.ID})
	}
	return page, nil
}

// TaskHistory implements port.Store: every recorded attempt, in recording
// order (the bigserial id). An unknown instance is ErrNotFound; a known one
// without results is an empty history.
func (s *Store) TaskHistory(ctx context.Context, id uuid.UUID) ([]port.ActionResult, error) {
	const q = `-- name: task_history
		SELECT d.execution_id, d.attempt, d.ok, d.output, d.error, d.worker_id, d.started_at, d.finished_at
		FROM runner_instances r
		LEFT JOIN runner_actions_done d ON d.instance_id = r.instance_id
		WHERE r.instance_id = $1
		ORDER BY d.id`
	rows, err := s.pool.Query(ctx, q, id)
	if err != nil {
		return nil, fmt.Errorf("task history of %s: %w", id, s.check(ctx, err))
	}
	var (
		found              bool
		out                []port.ActionResult
		execution, errText pgtype.Text
		attempt            pgtype.Int8
		ok                 pgtype.Bool
		output             []byte
		worker             pgtype.Text
		started, finished  pgtype.Timestamptz
	)
	_, err = pgx.ForEachRow(rows, []any{&execution, &attempt, &ok, &output, &errText, &worker, &started, &finished}, func() error {
		found = true
		if !execution.Valid {
			return nil // the LEFT JOIN row of an instance without results
		}
		out = append(out, port.ActionResult{
			InstanceID:  id,
			ExecutionID: execution.String,
			Attempt:     uint32(attempt.Int64), // CHECK keeps it in range
			OK:          ok.Bool,
			Output:      output,
			Error:       errText.String,
			WorkerID:    worker.String,
			StartedAt:   timeOf(started),
			FinishedAt:  timeOf(finished),
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("task history of %s: %w", id, s.check(ctx, err))
	}
	if !found {
		return nil, fmt.Errorf("task history of %s: %w", id, port.ErrNotFound)
	}
	return out, nil
}

// parentColumns scans a row's parent_instance_id, parent_execution and
// parent_attempt (all NULL unless the instance is a child instance).
type parentColumns struct {
	id      pgtype.UUID
	exec    pgtype.Text
	attempt pgtype.Int8
}

// parentColumnsOf returns the columns that store p (all NULL for nil).
func parentColumnsOf(p *port.ParentRef) parentColumns {
	if p == nil {
		return parentColumns{}
	}
	return parentColumns{
		id:      pgtype.UUID{Bytes: p.InstanceID, Valid: true},
		exec:    pgtype.Text{String: p.ExecutionID, Valid: true},
		attempt: pgtype.Int8{Int64: int64(p.Attempt), Valid: true},
	}
}

// ref is the parent the columns name, nil for none.
func (p *parentColumns) ref() *port.ParentRef {
	if !p.id.Valid {
		return nil
	}
	return &port.ParentRef{InstanceID: p.id.Bytes, ExecutionID: p.exec.String, Attempt: uint32(p.attempt.Int64)} // CHECK keeps it in range
}
