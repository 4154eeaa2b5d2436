package postgres

import (
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/robonet/robonet/engine/port"
)

// Postgres error codes the store reacts to.
const (
	codeForeignKeyViolation = "23503"
)

// isForeignKeyViolation reports whether err is a foreign key violation of
// the named constraint.
func isForeignKeyViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == codeForeignKeyViolation && pgErr.ConstraintName == constraint
}

// micros expresses a duration in whole microseconds, Postgres' resolution;
// SQL turns it into an interval with `$n * interval '1 microsecond'`.
func micros(d time.Duration) int64 { return d.Microseconds() }

// timestamptz maps the zero time to NULL.
func timestamptz(t time.Time) pgtype.Timestamptz {
	return pgtype.Timestamptz{Time: t, Valid: !t.IsZero()}
}

// timeOf maps NULL to the zero time and anything else to UTC.
func timeOf(t pgtype.Timestamptz) time.Time {
	if !t.Valid {
		return time.Time{}
	}
	return t.Time.UTC()
}

// timePtr maps NULL to nil.
func timePtr(t pgtype.Timestamptz) *time.Time {
	if !t.Valid {
		return nil
	}
	u := t.Time.UTC()
	return &u
}

// resultColumns are the columns of runner_actions_done as parallel arrays,
// the shape unnest() takes apart in one multi-row statement.
type resultColumns struct {
	instanceIDs  []uuid.UUID
	executionIDs []string
	attempts     []int64
	oks          []bool
	outputs      [][]byte
	errs         []string
	workerIDs    []string
	startedAt    []pgtype.Timestamptz
	finishedAt   []pgtype.Timestamptz
}

// add appends r, filed under instance (the entry it came with).
func (c *resultColumns) add(instance uuid.UUID, r port.ActionResult) {
	c.instanceIDs = append(c.instanceIDs, instance)
	c.executionIDs = append(c.executionIDs, r.ExecutionID)
	c.attempts = append(c.attempts, int64(r.Attempt))
	c.oks = append(c.oks, r.OK)
	c.outputs = append(c.outputs, r.Output)
	c.errs = append(c.errs, r.Error)
	c.workerIDs = append(c.workerIDs, r.WorkerID)
	c.startedAt = append(c.startedAt, timestamptz(r.StartedAt))
	c.finishedAt = append(c.finishedAt, timestamptz(r.FinishedAt))
}

// args returns the arrays in the order of the resultsCTE parameters
// $3 … $11.
func (c *resultColumns) args() []any {
	return []any{c.instanceIDs, c.executionIDs, c.attempts, c.oks, c.outputs, c.errs, c.workerIDs, c.startedAt, c.finishedAt}
}

// signalUses are consumed signals (Progress.ConsumedSignals) as parallel
// arrays, for consumedCTE.
type signalUses struct {
	instanceIDs []uuid.UUID
	seqs        []int64
	by          []string
}

// add appends the signals instance consumed.
func (c *signalUses) add(instance uuid.UUID, uses []port.SignalUse) {
	for _, u := range uses {
		c.instanceIDs = append(c.instanceIDs, instance)
		c.seqs = append(c.seqs, u.Seq)
		c.by = append(c.by, u.By)
	}
}

// args returns the arrays in the order of consumedCTE's parameters.
func (c *signalUses) args() []any {
	return []any{c.instanceIDs, c.seqs, c.by}
}
