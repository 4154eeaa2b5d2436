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

const selectSchedule = `SELECT schedule_name, workflow_name, workflow_version, inputs, cron, interval_seconds, jitter_ms,
	allow_duplicate, status, next_run_at, last_run_at, last_instance_id, last_skipped, created_at FROM workflow_schedules`

// CreateSchedule implements port.Store.
func (s *Store) CreateSchedule(ctx context.Context, r port.ScheduleRecord) error {
	var interval sql.NullInt64
	if r.Interval > 0 {
		interval = sql.NullInt64{Int64: int64(r.Interval / time.Second), Valid: true}
	}
	now := s.now().UnixMicro()
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `
			INSERT INTO workflow_schedules (schedule_name, workflow_name, workflow_version, inputs, cron, interval_seconds, jitter_ms,
			    allow_duplicate, status, next_run_at, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?)
			ON CONFLICT DO NOTHING`,
			r.Name, r.Workflow, int64(r.Version), storeutil.NonNil(r.Inputs), r.Cron, interval, r.Jitter.Milliseconds(),
			r.AllowDuplicate, nullMicros(r.NextRunAt), micros(r.CreatedAt), now)
		if err != nil {
			return err
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return port.ErrScheduleExists
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create schedule %s: %w", r.Name, err)
	}
	return nil
}

// GetSchedule implements port.Store.
func (s *Store) GetSchedule(ctx context.Context, name string) (port.ScheduleRecord, error) {
	r, err := scanSchedule(s.r.QueryRowContext(ctx, selectSchedule+` WHERE schedule_name = ?`, name))
	if err != nil {
		return port.ScheduleRecord{}, fmt.Errorf("get schedule %s: %w", name, err)
	}
	return r, nil
}

// ListSchedules implements port.Store.
func (s *Store) ListSchedules(ctx context.Context) ([]port.ScheduleRecord, error) {
	return s.querySchedules(ctx, "list schedules", selectSchedule+` ORDER BY schedule_name`)
}

// DueSchedules implements port.Store.
func (s *Store) DueSchedules(ctx context.Context, now time.Time, limit int) ([]port.ScheduleRecord, error) {
	return s.querySchedules(ctx, "due schedules", selectSchedule+`
		WHERE status = 'active' AND next_run_at <= ? ORDER BY next_run_at, schedule_name LIMIT ?`, micros(now), limit)
}

func (s *Store) querySchedules(ctx context.Context, what, q string, args ...any) ([]port.ScheduleRecord, error) {
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer func() { _ = rows.Close() }()
	var out []port.ScheduleRecord
	for rows.Next() {
		r, err := scanSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return out, nil
}

// SetSchedulePaused implements port.Store.
func (s *Store) SetSchedulePaused(ctx context.Context, name string, paused bool, next time.Time) (port.ScheduleRecord, error) {
	status, at := "active", nullMicros(next)
	if paused {
		status, at = "paused", sql.NullInt64{}
	}
	var got port.ScheduleRecord
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `UPDATE workflow_schedules SET status = ?, next_run_at = ?, updated_at = ? WHERE schedule_name = ?`,
			status, at, s.now().UnixMicro(), name); err != nil {
			return err
		}
		var err error
		got, err = scanSchedule(tx.QueryRowContext(ctx, selectSchedule+` WHERE schedule_name = ?`, name))
		return err
	})
	if err != nil {
		return port.ScheduleRecord{}, fmt.Errorf("set schedule %s %s: %w", name, status, err)
	}
	return got, nil
}

// DeleteSchedule implements port.Store.
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM workflow_schedules WHERE schedule_name = ?`, name)
		if err != nil {
			return fmt.Errorf("delete schedule %s: %w", name, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return port.ErrNotFound
		}
		return nil
	})
}

// RecordScheduleRun implements port.Store.
func (s *Store) RecordScheduleRun(ctx context.Context, run port.ScheduleRun) error {
	var last sql.NullString
	if run.InstanceID != uuid.Nil {
		last = sql.NullString{String: run.InstanceID.String(), Valid: true}
	}
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `
			UPDATE workflow_schedules SET next_run_at = ?,
			    last_run_at = CASE WHEN ? THEN ? ELSE last_run_at END,
			    last_instance_id = COALESCE(?, last_instance_id),
			    last_skipped = ?, updated_at = ?
			WHERE schedule_name = ? AND status = 'active' AND next_run_at = ?`,
			micros(run.Next), last.Valid, micros(run.RanAt), last, run.Skipped, s.now().UnixMicro(), run.Name, micros(run.Slot))
		if err != nil {
			return fmt.Errorf("record a run of schedule %s: %w", run.Name, err)
		}
		return nil
	})
}

func scanSchedule(row scanner) (port.ScheduleRecord, error) {
	var (
		r                    port.ScheduleRecord
		version, jitter      int64
		interval, next, last sql.NullInt64
		lastID               sql.NullString
		status               string
		created              int64
	)
	err := row.Scan(&r.Name, &r.Workflow, &version, &r.Inputs, &r.Cron, &interval, &jitter,
		&r.AllowDuplicate, &status, &next, &last, &lastID, &r.LastSkipped, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return port.ScheduleRecord{}, port.ErrNotFound
	}
	if err != nil {
		return port.ScheduleRecord{}, err
	}
	r.Version = uint32(version)
	r.Interval = time.Duration(interval.Int64) * time.Second
	r.Jitter = time.Duration(jitter) * time.Millisecond
	r.Paused = status == "paused"
	if next.Valid {
		r.NextRunAt = fromMicros(next.Int64)
	}
	if last.Valid {
		r.LastRunAt = fromMicros(last.Int64)
	}
	if lastID.Valid && strings.TrimSpace(lastID.String) != "" {
		if r.LastInstanceID, err = uuid.Parse(lastID.String); err != nil {
			return port.ScheduleRecord{}, fmt.Errorf("schedule %s: last instance id: %w", r.Name, err)
		}
	}
	r.CreatedAt = fromMicros(created)
	return r, nil
}
