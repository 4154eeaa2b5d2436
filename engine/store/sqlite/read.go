package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

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
	NULL, NULL, NULL, r.error, coalesce(r.idempotency_key, ''), r.created_at, r.started_at,
	r.finished_at, r.cancel_requested, r.gathering_at IS NOT NULL,
	r.parent_instance_id, r.parent_execution, r.parent_attempt, r.paused, r.runs`

func scanInstance(row scanner) (port.InstanceRecord, error) {
	var (
		rec               port.InstanceRecord
		version, created  int64
		status            string
		started, finished sql.NullInt64
		parent            parentColumns
	)
	err := row.Scan(&rec.ID, &rec.WorkflowVersionID, &rec.WorkflowName, &version, &status,
		&rec.Inputs, &rec.State, &rec.Output, &rec.Error, &rec.IdempotencyKey, &created, &started,
		&finished, &rec.CancelRequested, &rec.Gathering, &parent.id, &parent.exec, &parent.attempt, &rec.Paused, &rec.Run)
	rec.Parent = parent.ref()
	rec.WorkflowVersion = uint32(version) // CHECK keeps it in range
	rec.Status = port.InstanceState(status)
	rec.Gathering = rec.Gathering && rec.Status == port.StateRunning
	rec.Paused = rec.Paused && !rec.Status.Terminal()
	rec.CreatedAt = fromMicros(created)
	rec.StartedAt = timePtr(started)
	rec.FinishedAt = timePtr(finished)
	return rec, err
}

// GetInstance implements port.Store.
func (s *Store) GetInstance(ctx context.Context, id uuid.UUID) (port.InstanceRecord, error) {
	rec, err := scanInstance(s.r.QueryRowContext(ctx, `
		SELECT `+instanceColumns+`
		FROM runner_instances r JOIN workflow_versions w ON w.id = r.workflow_version_id
		WHERE r.instance_id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return port.InstanceRecord{}, fmt.Errorf("get instance %s: %w", id, port.ErrNotFound)
	}
	if err != nil {
		return port.InstanceRecord{}, fmt.Errorf("get instance %s: %w", id, err)
	}
	return rec, nil
}

// ListInstances implements port.Store: newest first by (created_at,
// instance_id) with keyset paging, like the Postgres adapter.
func (s *Store) ListInstances(ctx context.Context, f port.InstanceFilter) (port.InstancePage, error) {
	if err := storeutil.CheckStatuses(f.Statuses); err != nil {
		return port.InstancePage{}, fmt.Errorf("list instances: %w", err)
	}
	key, paged, err := storeutil.DecodePageToken(f.PageToken)
	if err != nil {
		return port.InstancePage{}, fmt.Errorf("list instances: %w", err)
	}
	limit := storeutil.ListLimit(f.Limit, storeutil.DefaultInstanceLimit)

	var (
		where []string
		args  []any
	)
	if f.WorkflowName != "" {
		where = append(where, "w.workflow_name = ?")
		args = append(args, f.WorkflowName)
	}
	if len(f.Statuses) > 0 {
		where = append(where, "r.status IN (?"+strings.Repeat(", ?", len(f.Statuses)-1)+")")
		for _, st := range f.Statuses {
			args = append(args, string(st))
		}
	}
	if f.IDPrefix != "" {
		lo, hi, ok := storeutil.IDPrefixRange(f.IDPrefix)
		if !ok {
			return port.InstancePage{}, fmt.Errorf("list instances: id prefix %q: want hex digits: %w", value.QuoteClipped(f.IDPrefix, 64), port.ErrInvalidArgument)
		}
		where = append(where, "r.instance_id BETWEEN ? AND ?")
		args = append(args, lo.String(), hi.String())
	}
	if !f.CreatedAfter.IsZero() {
		where = append(where, "r.created_at >= ?")
		args = append(args, micros(f.CreatedAfter))
	}
	if paged {
		where = append(where, "(r.created_at, r.instance_id) < (?, ?)")
		args = append(args, micros(key.CreatedAt), key.ID)
	}
	q := `SELECT ` + listColumns + `
		FROM runner_instances r JOIN workflow_versions w ON w.id = r.workflow_version_id`
	if len(where) > 0 {
		q += "\nWHERE " + strings.Join(where, " AND ")
	}
	q += "\nORDER BY r.created_at DESC, r.instance_id DESC\nLIMIT ?"
	args = append(args, limit+1)

	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return port.InstancePage{}, fmt.Errorf("list instances: %w", err)
	}
	defer func() { _ = rows.Close() }()
	var recs []port.InstanceRecord
	for rows.Next() {
		rec, err := scanInstance(rows)
		if err != nil {
			return port.InstancePage{}, fmt.Errorf("list instances: %w", err)
		}
		recs = append(recs, rec)
	}
	if err := rows.Err(); err != nil {
		return port.InstancePage{}, fmt.Errorf("list instances: %w", err)
	}
	page := port.InstancePage{Instances: recs}
	if len(recs) > limit {
		page.Instances = recs[:limit]
		last := page.Instances[limit-1]
		page.NextPageToken = storeutil.EncodePageToken(storeutil.PageKey{CreatedAt: last.CreatedAt, ID: last.ID})
	}
	return page, nil
}

// TaskHistory implements port.Store: every recorded attempt in recording
// order (the id: a new row's is larger than any in the table). Unknown
// instance: ErrNotFound.
func (s *Store) TaskHistory(ctx context.Context, id uuid.UUID) ([]port.ActionResult, error) {
	// One read transaction, so the existence check and the history agree.
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("task history of %s: %w", id, err)
	}
	defer func() { _ = tx.Rollback() }()
	var exists bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM runner_instances WHERE instance_id = ?)`, id).Scan(&exists); err != nil {
		return nil, fmt.Errorf("task history of %s: %w", id, err)
	}
	if !exists {
		return nil, fmt.Errorf("task history of %s: %w", id, port.ErrNotFound)
	}
	out, err := scanResults(tx.QueryContext(ctx, `
		SELECT instance_id, execution_id, attempt, ok, output, error, worker_id, started_at, finished_at
		FROM runner_actions_done WHERE instance_id = ? ORDER BY id`, id))
	if err != nil {
		return nil, fmt.Errorf("task history of %s: %w", id, err)
	}
	return out, nil
}

// parentColumns scans a row's parent_instance_id, parent_execution and
// parent_attempt (all NULL unless the instance is a child instance).
type parentColumns struct {
	id      uuid.NullUUID
	exec    sql.NullString
	attempt sql.NullInt64
}

// ref is the parent the columns name, nil for none.
func (p *parentColumns) ref() *port.ParentRef {
	if !p.id.Valid {
		return nil
	}
	return &port.ParentRef{InstanceID: p.id.UUID, ExecutionID: p.exec.String, Attempt: uint32(p.attempt.Int64)} // CHECK keeps it in range
}
