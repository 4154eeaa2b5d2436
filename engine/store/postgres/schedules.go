package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/internal/storeutil"
)

const scheduleColumns = `schedule_name, workflow_name, workflow_version, inputs, cron, interval_seconds, jitter_ms,
	allow_duplicate, status, next_run_at, last_run_at, last_instance_id, last_skipped, created_at`

// CreateSchedule implements port.Store.
func (s *Store) CreateSchedule(ctx context.Context, r port.ScheduleRecord) error {
	var interval *int64
	if r.Interval > 0 {
		v := int64(r.Interval / time.Second)
		interval = &v
	}
	const q = `-- name: create_schedule
		INSERT INTO workflow_schedules (schedule_name, workflow_name, workflow_version, inputs, cron, interval_seconds, jitter_ms,
		    allow_duplicate, status, next_run_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'active', $9, $10)
		ON CONFLICT DO NOTHING`
	tag, err := s.pool.Exec(ctx, q, r.Name, r.Workflow, int64(r.Version), storeutil.NonNil(r.Inputs), r.Cron, interval,
		r.Jitter.Milliseconds(), r.AllowDuplicate, nullTime(r.NextRunAt), r.CreatedAt)
	if err != nil {
		return fmt.Errorf("create schedule %s: %w", r.Name, s.check(ctx, err))
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("create schedule %s: %w", r.Name, port.ErrScheduleExists)
	}
	return nil
}

// GetSchedule implements port.Store.
func (s *Store) GetSchedule(ctx context.Context, name string) (port.ScheduleRecord, error) {
	rows, err := s.pool.Query(ctx, `-- name: get_schedule
		SELECT `+scheduleColumns+` FROM workflow_schedules WHERE schedule_name = $1`, name)
	if err != nil {
		return port.ScheduleRecord{}, fmt.Errorf("get schedule %s: %w", name, s.check(ctx, err))
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanSchedule)
	if errors.Is(err, pgx.ErrNoRows) {
		err = port.ErrNotFound
	}
	if err != nil {
		return port.ScheduleRecord{}, fmt.Errorf("get schedule %s: %w", name, s.check(ctx, err))
	}
	return r, nil
}

// ListSchedules implements port.Store.
func (s *Store) ListSchedules(ctx context.Context) ([]port.ScheduleRecord, error) {
	return s.querySchedules(ctx, "list schedules", `-- name: list_schedules
		SELECT `+scheduleColumns+` FROM workflow_schedules ORDER BY schedule_name`)
}

// DueSchedules implements port.Store.
func (s *Store) DueSchedules(ctx context.Context, now time.Time, limit int) ([]port.ScheduleRecord, error) {
	return s.querySchedules(ctx, "due schedules", `-- name: due_schedules
		SELECT `+scheduleColumns+` FROM workflow_schedules
		WHERE status = 'active' AND next_run_at <= $1
		ORDER BY next_run_at, schedule_name LIMIT $2`, now, limit)
}

func (s *Store) querySchedules(ctx context.Context, what, q string, args ...any) ([]port.ScheduleRecord, error) {
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, s.check(ctx, err))
	}
	out, err := pgx.CollectRows(rows, scanSchedule)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, s.check(ctx, err))
	}
	return out, nil
}

// SetSchedulePaused implements port.Store.
func (s *Store) SetSchedulePaused(ctx context.Context, name string, paused bool, next time.Time) (port.ScheduleRecord, error) {
	status, at := "active", nullTime(next)
	if paused {
		status, at = "paused", nil
	}
	rows, err := s.pool.Query(ctx, `-- name: set_schedule_paused
		UPDATE workflow_schedules SET status = $2, next_run_at = $3, updated_at = now()
		WHERE schedule_name = $1
		RETURNING `+scheduleColumns, name, status, at)
	if err != nil {
		return port.ScheduleRecord{}, fmt.Errorf("set schedule %s %s: %w", name, status, s.check(ctx, err))
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanSchedule)
	if errors.Is(err, pgx.ErrNoRows) {
		err = port.ErrNotFound
	}
	if err != nil {
		return port.ScheduleRecord{}, fmt.Errorf("set schedule %s %s: %w", name, status, s.check(ctx, err))
	}
	return r, nil
}

// DeleteSchedule implements port.Store.
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	tag, err := s.pool.Exec(ctx, `-- name: delete_schedule
		DELETE FROM workflow_schedules WHERE schedule_name = $1`, name)
	if err != nil {
		return fmt.Errorf("delete schedule %s: %w", name, s.check(ctx, err))
	}
	if tag.RowsAffected() == 0 {
		return port.ErrNotFound
	}
	return nil
}

// RecordScheduleRun implements port.Store.
func (s *Store) RecordScheduleRun(ctx context.Context, run port.ScheduleRun) error {
	last := uuid.NullUUID{UUID: run.InstanceID, Valid: run.InstanceID != uuid.Nil}
	_, err := s.pool.Exec(ctx, `-- name: record_schedule_run
		UPDATE workflow_schedules SET next_run_at = $2,
		    last_run_at = CASE WHEN $4::uuid IS NULL THEN last_run_at ELSE $3 END,
		    last_instance_id = COALESCE($4::uuid, last_instance_id),
		    last_skipped = $5, updated_at = now()
		WHERE schedule_name = $1 AND status = 'active' AND next_run_at = $6`,
		run.Name, run.Next, run.RanAt, last, run.Skipped, run.Slot)
	if err != nil {
		return fmt.Errorf("record a run of schedule %s: %w", run.Name, s.check(ctx, err))
	}
	return nil
}

func scanSchedule(row pgx.CollectableRow) (port.ScheduleRecord, error) {
	var (
		r               port.ScheduleRecord
		version, jitter int64
		interval        *int64
		next, last      *time.Time
		lastID          uuid.NullUUID
		status          string
	)
	if err := row.Scan(&r.Name, &r.Workflow, &version, &r.Inputs, &r.Cron, &interval, &jitter,
		&r.AllowDuplicate, &status, &next, &last, &lastID, &r.LastSkipped, &r.CreatedAt); err != nil {
		return port.ScheduleRecord{}, err
	}
	r.Version = uint32(version)
	if interval != nil {
		r.Interval = time.Duration(*interval) * time.Second
	}
	r.Jitter = time.Duration(jitter) * time.Millisecond
	r.Paused = status == "paused"
	if next != nil {
		r.NextRunAt = next.UTC()
	}
	if last != nil {
		r.LastRunAt = last.UTC()
	}
	if lastID.Valid {
		r.LastInstanceID = lastID.UUID
	}
	r.CreatedAt = r.CreatedAt.UTC()
	return r, nil
}

// nullTime maps the zero time to NULL.
func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
