package engine

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/robfig/cron/v3"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/value"
)

// A schedule starts instances of a registered workflow, with fixed inputs,
// on a cron expression or at a fixed interval. Only the leader's engine
// fires them (the scheduler is one of its loops), and every run is a
// submission whose idempotency key names the schedule and the slot it
// fills: a leader that takes over and fires a slot its predecessor already
// fired gets the same instance back, never a second one.
//
// Missed slots (the mesh had no leader, or the schedule was paused) are
// not replayed one by one: the first tick after the gap fires once, for the
// latest slot due, and the schedule moves on to the next slot in the
// future — what Temporal calls a catch-up window of one run, and what cron
// users expect of a machine that was off.

// ScheduleSpec is what a user gives to create a schedule.
type ScheduleSpec struct {
	Name     string // unique in the mesh: [a-z0-9][a-z0-9._-]*, at most 128 bytes
	Workflow string
	Version  uint32 // 0: the latest version registered when each run starts
	Inputs   map[string]any
	// Exactly one of Cron (five fields, or a descriptor such as @hourly;
	// UTC unless it starts with CRON_TZ=Zone) and Interval.
	Cron     string
	Interval time.Duration
	// Jitter delays each run by a pseudo-random amount in [0, Jitter),
	// fixed per schedule and slot (a new leader computes the same delay).
	Jitter time.Duration
	// AllowDuplicate lets a run start while the previous run is still
	// active; false skips the slot instead.
	AllowDuplicate bool
}

// Schedule is a stored schedule.
type Schedule struct {
	ScheduleSpec
	Paused         bool
	NextRunAt      time.Time // the next slot (before its jitter); zero while paused
	LastRunAt      time.Time // when the last run started (zero: never)
	LastInstanceID uuid.UUID // the last run's instance (uuid.Nil: none)
	LastSkipped    string    // why the last slot was skipped, if it was
	CreatedAt      time.Time
}

// Schedule limits.
const (
	MaxScheduleName   = 128
	MinScheduleEvery  = time.Second
	MaxScheduleJitter = 24 * time.Hour
)

// DefaultScheduleInterval is how often the scheduler looks for due slots.
const DefaultScheduleInterval = time.Second

// timing is a schedule's parsed cadence.
type timing struct {
	cron     cron.Schedule
	interval time.Duration
	jitter   time.Duration
}

var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

func parseTiming(name, expr string, every, jitter time.Duration) (timing, error) {
	switch {
	case expr != "" && every != 0:
		return timing{}, fmt.Errorf("schedule %s: give a cron expression or an interval, not both: %w", name, port.ErrInvalidArgument)
	case expr == "" && every == 0:
		return timing{}, fmt.Errorf("schedule %s: give a cron expression (e.g. \"*/5 * * * *\") or an interval (e.g. 10m): %w", name, port.ErrInvalidArgument)
	case every != 0 && every < MinScheduleEvery:
		return timing{}, fmt.Errorf("schedule %s: interval %s is below the minimum %s: %w", name, every, MinScheduleEvery, port.ErrInvalidArgument)
	case every%time.Second != 0:
		return timing{}, fmt.Errorf("schedule %s: interval %s: use whole seconds, e.g. 90s or 15m: %w", name, every, port.ErrInvalidArgument)
	case jitter < 0 || jitter > MaxScheduleJitter:
		return timing{}, fmt.Errorf("schedule %s: jitter %s: want 0 to %s: %w", name, jitter, MaxScheduleJitter, port.ErrInvalidArgument)
	}
	t := timing{interval: every, jitter: jitter}
	if expr != "" {
		if len(expr) > 256 {
			return timing{}, fmt.Errorf("schedule %s: the cron expression is %d bytes, at most 256: %w", name, len(expr), port.ErrInvalidArgument)
		}
		c, err := cronParser.Parse(expr)
		if err != nil {
			return timing{}, fmt.Errorf("schedule %s: cron %q: %s; write five fields (minute hour day-of-month month day-of-week), e.g. \"30 2 * * 1-5\", or @hourly, @daily, @weekly: %w",
				name, expr, err.Error(), port.ErrInvalidArgument)
		}
		t.cron = c
	}
	return t, nil
}

// next is the first slot strictly after t.
func (tm timing) next(t time.Time) time.Time {
	if tm.cron != nil {
		return tm.cron.Next(t)
	}
	// Intervals count from the Unix epoch, so that slots are the same
	// whichever engine computes them.
	n := t.UnixNano() / int64(tm.interval)
	return time.Unix(0, (n+1)*int64(tm.interval)).UTC()
}

// delay is the jitter of one slot: a hash of the schedule and the slot,
// so that every engine agrees on it.
func (tm timing) delay(name string, slot time.Time) time.Duration {
	if tm.jitter <= 0 {
		return 0
	}
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write([]byte(slot.UTC().Format(time.RFC3339Nano)))
	return time.Duration(h.Sum64() % uint64(tm.jitter))
}

func checkScheduleName(name string) error {
	if name == "" || len(name) > MaxScheduleName {
		return fmt.Errorf("schedule name %q: want 1 to %d characters: %w", value.QuoteClipped(name, 64), MaxScheduleName, port.ErrInvalidArgument)
	}
	for i, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || i > 0 && strings.ContainsRune("._-", r)
		if !ok {
			return fmt.Errorf("schedule name %s: use lower-case letters, digits, '.', '_' and '-', starting with a letter or digit: %w",
				value.QuoteClipped(name, 64), port.ErrInvalidArgument)
		}
	}
	return nil
}

// CreateSchedule checks a schedule (its timing, its workflow, its inputs
// bound against the workflow's current version) and stores it. Its first
// slot is the first after now.
func (e *Engine) CreateSchedule(ctx context.Context, s ScheduleSpec) (Schedule, error) {
	if err := checkScheduleName(s.Name); err != nil {
		return Schedule{}, err
	}
	tm, err := parseTiming(s.Name, s.Cron, s.Interval, s.Jitter)
	if err != nil {
		return Schedule{}, err
	}
	pe, err := e.resolve(ctx, SubmitRequest{Name: s.Workflow, Version: s.Version})
	if err != nil {
		return Schedule{}, fmt.Errorf("schedule %s: %w", s.Name, err)
	}
	bound, err := pe.plan.BindInputs(s.Inputs)
	if err != nil {
		return Schedule{}, fmt.Errorf("schedule %s: inputs of %s v%d: %w", s.Name, pe.info.Name, pe.info.Version, err)
	}
	inputs, err := value.Encode(bound)
	if err != nil {
		return Schedule{}, fmt.Errorf("schedule %s: encoding the inputs: %w", s.Name, err)
	}
	now := e.cfg.Clock.Now().UTC()
	rec := port.ScheduleRecord{
		Name: s.Name, Workflow: s.Workflow, Version: s.Version, Inputs: inputs,
		Cron: s.Cron, Interval: s.Interval, Jitter: s.Jitter, AllowDuplicate: s.AllowDuplicate,
		NextRunAt: tm.next(now), CreatedAt: now,
	}
	if err := e.cfg.Store.CreateSchedule(ctx, rec); err != nil {
		return Schedule{}, fmt.Errorf("schedule %s: %w", s.Name, err)
	}
	e.log.Info("schedule created", zap.String("schedule", s.Name), zap.String("workflow", s.Workflow), zap.Time("next_run_at", rec.NextRunAt))
	e.wakeScheduler()
	return scheduleOf(rec)
}

// ListSchedules returns every schedule, by name.
func (q *Query) ListSchedules(ctx context.Context) ([]Schedule, error) {
	recs, err := q.cfg.Store.ListSchedules(ctx)
	if err != nil {
		return nil, fmt.Errorf("list schedules: %w", err)
	}
	out := make([]Schedule, 0, len(recs))
	for _, r := range recs {
		s, err := scheduleOf(r)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// ListSchedules lists every schedule (see Query.ListSchedules).
func (e *Engine) ListSchedules(ctx context.Context) ([]Schedule, error) {
	return e.q.ListSchedules(ctx)
}

// PauseSchedule stops a schedule firing; ResumeSchedule starts it again
// from the first slot after now (the slots missed while paused are not
// run).
func (e *Engine) PauseSchedule(ctx context.Context, name string) (Schedule, error) {
	return e.setPaused(ctx, name, true)
}

// ResumeSchedule: see PauseSchedule.
func (e *Engine) ResumeSchedule(ctx context.Context, name string) (Schedule, error) {
	return e.setPaused(ctx, name, false)
}

func (e *Engine) setPaused(ctx context.Context, name string, paused bool) (Schedule, error) {
	what := map[bool]string{true: "pause", false: "resume"}[paused]
	cur, err := e.cfg.Store.GetSchedule(ctx, name)
	if err != nil {
		return Schedule{}, fmt.Errorf("%s schedule %s: %w", what, value.QuoteClipped(name, 64), err)
	}
	var next time.Time
	if !paused {
		tm, err := parseTiming(cur.Name, cur.Cron, cur.Interval, cur.Jitter)
		if err != nil {
			return Schedule{}, err
		}
		next = tm.next(e.cfg.Clock.Now().UTC())
	}
	rec, err := e.cfg.Store.SetSchedulePaused(ctx, name, paused, next)
	if err != nil {
		return Schedule{}, fmt.Errorf("%s schedule %s: %w", what, name, err)
	}
	e.log.Info("schedule "+what+"d", zap.String("schedule", name))
	e.wakeScheduler()
	return scheduleOf(rec)
}

// DeleteSchedule removes a schedule; the instances it started stay.
func (e *Engine) DeleteSchedule(ctx context.Context, name string) error {
	if err := e.cfg.Store.DeleteSchedule(ctx, name); err != nil {
		return fmt.Errorf("delete schedule %s: %w", value.QuoteClipped(name, 64), err)
	}
	e.log.Info("schedule deleted", zap.String("schedule", name))
	return nil
}

func scheduleOf(r port.ScheduleRecord) (Schedule, error) {
	s := Schedule{
		ScheduleSpec: ScheduleSpec{Name: r.Name, Workflow: r.Workflow, Version: r.Version, Cron: r.Cron,
			Interval: r.Interval, Jitter: r.Jitter, AllowDuplicate: r.AllowDuplicate},
		Paused: r.Paused, NextRunAt: r.NextRunAt, LastRunAt: r.LastRunAt, LastInstanceID: r.LastInstanceID,
		LastSkipped: r.LastSkipped, CreatedAt: r.CreatedAt,
	}
	if len(r.Inputs) > 0 {
		v, err := value.Decode(r.Inputs)
		if err != nil {
			return Schedule{}, fmt.Errorf("schedule %s: stored inputs: %w", r.Name, err)
		}
		s.Inputs, _ = v.(map[string]any)
	}
	return s, nil
}

// wakeScheduler makes the scheduler look at the schedules now.
func (e *Engine) wakeScheduler() {
	select {
	case e.scheduleWake <- struct{}{}:
	default:
	}
}

// scheduleLoop fires due schedules, on the leader only (the engine runs
// only there).
func (e *Engine) scheduleLoop(ctx context.Context) {
	timer := e.cfg.Clock.NewTimer(e.nextLook(ctx))
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C():
		case <-e.scheduleWake:
		}
		timer.Reset(e.nextLook(ctx))
	}
}

// nextLook fires what is due and returns how long from now to wait: the
// wait fireDue computed counts from the time it read, and the clock may
// have moved on while it ran (past a slot, even: then at once).
func (e *Engine) nextLook(ctx context.Context) time.Duration {
	now := e.cfg.Clock.Now()
	at := now.Add(e.fireDue(ctx, now))
	return max(0, at.Sub(e.cfg.Clock.Now()))
}

// scheduleBatch bounds the schedules one tick reads.
const scheduleBatch = 100

// fireDue fires every due slot and returns how long to wait for the next
// look: until the earliest slot coming within the poll interval, else the
// poll interval (schedules changed through another server show up within
// it).
func (e *Engine) fireDue(ctx context.Context, now time.Time) time.Duration {
	now = now.UTC()
	wait := e.cfg.ScheduleInterval
	due, err := e.cfg.Store.DueSchedules(ctx, now.Add(wait), scheduleBatch)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("reading due schedules failed; retrying", zap.Error(err))
		}
		return wait
	}
	fired := 0
	for _, r := range due {
		if ctx.Err() != nil {
			return wait
		}
		tm, err := parseTiming(r.Name, r.Cron, r.Interval, r.Jitter)
		if err != nil {
			e.log.Error("stored schedule has a bad cadence; pause and recreate it", zap.String("schedule", r.Name), zap.Error(err))
			continue
		}
		at := r.NextRunAt.Add(tm.delay(r.Name, r.NextRunAt))
		if at.After(now) { // coming (or jittered past now)
			wait = min(wait, at.Sub(now))
			continue
		}
		if next, ok := e.fire(ctx, r, tm, now); ok {
			wait = min(wait, next.Add(tm.delay(r.Name, next)).Sub(now))
		}
		fired++
	}
	if len(due) == scheduleBatch && fired > 0 {
		return 0 // more may be due
	}
	return wait
}

// fire runs one slot of r (or skips it) and advances r to its next slot
// after now, which it returns: the slots missed before now are not run.
// ok is false when the slot stays due (it is tried again).
func (e *Engine) fire(ctx context.Context, r port.ScheduleRecord, tm timing, now time.Time) (next time.Time, ok bool) {
	run := port.ScheduleRun{Name: r.Name, Slot: r.NextRunAt, Next: tm.next(now), RanAt: now}
	log := e.log.With(zap.String("schedule", r.Name), zap.Time("slot", r.NextRunAt))
	if !r.AllowDuplicate && r.LastInstanceID != uuid.Nil {
		prev, err := e.cfg.Store.GetInstance(ctx, r.LastInstanceID)
		switch {
		case err == nil && !prev.Status.Terminal():
			run.Skipped = fmt.Sprintf("the previous run %s is still %s (allow_duplicate is false)", r.LastInstanceID, prev.Status)
		case err != nil && !errors.Is(err, port.ErrNotFound):
			log.Warn("reading the previous run failed; the slot is tried again", zap.Error(err))
			return time.Time{}, false
		}
	}
	if run.Skipped == "" {
		inputs, err := value.Decode(r.Inputs)
		in, _ := inputs.(map[string]any)
		if err == nil {
			var res SubmitResult
			res, err = e.Submit(ctx, SubmitRequest{Name: r.Workflow, Version: r.Version, Inputs: in,
				IdempotencyKey: scheduleKey(r.Name, r.NextRunAt)})
			run.InstanceID = res.InstanceID
		}
		switch {
		case err == nil:
		case ctx.Err() != nil:
			return time.Time{}, false
		case errors.Is(err, port.ErrNotFound), errors.Is(err, port.ErrInvalidArgument), errors.Is(err, ErrUnloadable),
			errors.Is(err, port.ErrIdempotencyConflict), errors.Is(err, graph.ErrInvalidInput):
			// A run that can never start (the workflow is gone, its
			// inputs no longer bind) skips the slot, saying why; the
			// schedule keeps its cadence.
			run.Skipped = "the run could not start: " + err.Error()
		default:
			// The store did not answer: the slot stays due, and the next
			// look fires it (the same instance, if this one was queued).
			log.Warn("starting a scheduled run failed; the slot is tried again", zap.Error(err))
			return time.Time{}, false
		}
	}
	if err := e.cfg.Store.RecordScheduleRun(ctx, run); err != nil {
		if ctx.Err() == nil {
			log.Warn("recording a schedule's run failed; the slot is fired again (same instance)", zap.Error(err))
		}
		return time.Time{}, false
	}
	if run.Skipped != "" {
		log.Warn("schedule slot skipped", zap.String("why", run.Skipped), zap.Time("next_run_at", run.Next))
	} else {
		log.Info("schedule fired", zap.Stringer("instance", run.InstanceID), zap.Time("next_run_at", run.Next))
	}
	return run.Next, true
}

// scheduleKey is the idempotency key of one slot of a schedule.
func scheduleKey(name string, slot time.Time) string {
	return "schedule:" + name + ":" + slot.UTC().Format(time.RFC3339)
}
