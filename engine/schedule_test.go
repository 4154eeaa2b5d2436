package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
)

// schedule returns the stored state of a schedule.
func schedule(t *testing.T, e *engine.Engine, name string) engine.Schedule {
	t.Helper()
	list, err := e.ListSchedules(ctxOf(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no schedule %s in %+v", name, list)
	return engine.Schedule{}
}

// waitSchedule polls a schedule until cond holds.
func waitSchedule(t *testing.T, e *engine.Engine, name, what string, cond func(engine.Schedule) bool) engine.Schedule {
	t.Helper()
	var s engine.Schedule
	waitUntil(t, what, func() bool {
		s = schedule(t, e, name)
		return cond(s)
	})
	return s
}

// startScheduler starts an engine whose only timers within hours are the
// scheduler's: the lease refresh and the claim poll move out of the way
// (submissions wake the claimer).
func startScheduler(h *harness, term uint64, mods ...func(*engine.Config)) *engine.Engine {
	return h.start(term, append([]func(*engine.Config){func(c *engine.Config) {
		c.Lease, c.LeaseRefresh, c.ClaimInterval = 48*time.Hour, 24*time.Hour, 24*time.Hour
	}}, mods...)...)
}

func registerSingle(t *testing.T, e *engine.Engine) {
	t.Helper()
	if _, err := e.RegisterWorkflow(ctxOf(t), "single.yaml", []byte(singleSpec)); err != nil {
		t.Fatal(err)
	}
}

// A cron schedule fires at its slots (the fake clock starts at 12:00 UTC),
// each run an instance of the workflow with the schedule's inputs.
func TestScheduleCron(t *testing.T) {
	h := newHarness(t)
	e := startScheduler(h, 1)
	registerSingle(t, e)
	t0 := h.clock.Now()
	s, err := e.CreateSchedule(ctxOf(t), engine.ScheduleSpec{Name: "every-5", Workflow: "single", Inputs: map[string]any{"n": 5}, Cron: "*/5 * * * *"})
	if err != nil {
		t.Fatal(err)
	}
	if !s.NextRunAt.Equal(t0.Add(5 * time.Minute)) {
		t.Fatalf("first slot %s, want 12:05", s.NextRunAt)
	}
	for slot := 1; slot <= 2; slot++ {
		if d := h.clock.WaitTimer(t, 5*time.Minute); d != 5*time.Minute {
			t.Fatalf("slot %d: the scheduler waits %s, want 5m", slot, d)
		}
		if h.disp.pending() != 0 {
			t.Fatalf("slot %d: a task was dispatched before the slot", slot)
		}
		h.clock.Advance(5 * time.Minute)
		d := h.disp.one(t, "only", 1)
		if got := jsonOf(t, d.Input); got != `{"n":5}` {
			t.Fatalf("the run's input %s, want the schedule's {\"n\":5}", got)
		}
		echo(e, d)
		want := t0.Add(time.Duration(slot+1) * 5 * time.Minute)
		s = waitSchedule(t, e, "every-5", "the schedule to move to its next slot", func(s engine.Schedule) bool { return s.NextRunAt.Equal(want) })
		if v := h.wait(e, s.LastInstanceID); v.State != port.StateComplete {
			t.Fatalf("slot %d's instance: %s", slot, v.State)
		}
	}
}

// Bad schedules are refused before anything is stored, naming the fix.
func TestScheduleRefused(t *testing.T) {
	h := newHarness(t)
	e := h.newEngine(1)
	registerSingle(t, e)
	for _, tc := range []struct {
		spec engine.ScheduleSpec
		want string
	}{
		{engine.ScheduleSpec{Name: "Bad Name", Workflow: "single", Cron: "@hourly", Inputs: map[string]any{"n": 1}}, "lower-case letters"},
		{engine.ScheduleSpec{Name: "x", Workflow: "single", Inputs: map[string]any{"n": 1}}, "give a cron expression"},
		{engine.ScheduleSpec{Name: "x", Workflow: "single", Cron: "@hourly", Interval: time.Minute, Inputs: map[string]any{"n": 1}}, "not both"},
		{engine.ScheduleSpec{Name: "x", Workflow: "single", Cron: "61 * * * *", Inputs: map[string]any{"n": 1}}, "five fields"},
		{engine.ScheduleSpec{Name: "x", Workflow: "single", Interval: 1500 * time.Millisecond, Inputs: map[string]any{"n": 1}}, "whole seconds"},
		{engine.ScheduleSpec{Name: "x", Workflow: "single", Interval: time.Minute, Jitter: -time.Second, Inputs: map[string]any{"n": 1}}, "jitter"},
		{engine.ScheduleSpec{Name: "x", Workflow: "single", Interval: time.Minute, Inputs: map[string]any{"n": "one"}}, "inputs"},
	} {
		_, err := e.CreateSchedule(ctxOf(t), tc.spec)
		if !errors.Is(err, port.ErrInvalidArgument) && !strings.Contains(fmtErr(err), "input") || !strings.Contains(fmtErr(err), tc.want) {
			t.Errorf("%+v: %v, want an invalid argument saying %q", tc.spec, err, tc.want)
		}
	}
	if _, err := e.CreateSchedule(ctxOf(t), engine.ScheduleSpec{Name: "x", Workflow: "nope", Interval: time.Minute}); !errors.Is(err, port.ErrNotFound) {
		t.Errorf("a schedule of an unknown workflow: %v, want ErrNotFound", err)
	}
	ok := engine.ScheduleSpec{Name: "ok", Workflow: "single", Interval: time.Minute, Inputs: map[string]any{"n": 1}}
	if _, err := e.CreateSchedule(ctxOf(t), ok); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateSchedule(ctxOf(t), ok); !errors.Is(err, port.ErrScheduleExists) {
		t.Errorf("the same name twice: %v, want ErrScheduleExists", err)
	}
	if list, _ := e.ListSchedules(ctxOf(t)); len(list) != 1 {
		t.Errorf("refused schedules were stored: %+v", list)
	}
}

func fmtErr(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// allow_duplicate false skips a slot while the previous run is active,
// saying why, and runs the next slot once it ended; pause stops the slots
// and resume starts again after now, without the missed ones.
func TestScheduleSkipsWhileActiveAndPauses(t *testing.T) {
	h := newHarness(t)
	e := startScheduler(h, 1)
	registerSingle(t, e)
	t0 := h.clock.Now()
	if _, err := e.CreateSchedule(ctxOf(t), engine.ScheduleSpec{Name: "minutely", Workflow: "single", Inputs: map[string]any{"n": 1}, Interval: time.Minute}); err != nil {
		t.Fatal(err)
	}
	h.clock.AdvanceToTimer(t, time.Minute)
	first := h.disp.one(t, "only", 1) // left running
	s := waitSchedule(t, e, "minutely", "the first run recorded", func(s engine.Schedule) bool { return s.NextRunAt.Equal(t0.Add(2 * time.Minute)) })
	firstID := s.LastInstanceID

	h.clock.AdvanceToTimer(t, time.Minute) // 12:02: the first run is still active
	s = waitSchedule(t, e, "minutely", "the second slot skipped", func(s engine.Schedule) bool { return s.NextRunAt.Equal(t0.Add(3 * time.Minute)) })
	if s.LastInstanceID != firstID || !strings.Contains(s.LastSkipped, "still") || !strings.Contains(s.LastSkipped, "allow_duplicate") {
		t.Fatalf("after the skipped slot: %+v", s)
	}
	if n := h.disp.pending(); n != 0 {
		t.Fatalf("%d tasks dispatched for the skipped slot", n)
	}
	echo(e, first)
	h.wait(e, firstID)
	h.clock.AdvanceToTimer(t, time.Minute) // 12:03
	echo(e, h.disp.one(t, "only", 1))
	s = waitSchedule(t, e, "minutely", "the third slot run", func(s engine.Schedule) bool { return s.NextRunAt.Equal(t0.Add(4 * time.Minute)) })
	if s.LastInstanceID == firstID || s.LastSkipped != "" {
		t.Fatalf("after the third slot: %+v", s)
	}

	if s, err := e.PauseSchedule(ctxOf(t), "minutely"); err != nil || !s.Paused || !s.NextRunAt.IsZero() {
		t.Fatalf("pause: %+v, %v", s, err)
	}
	h.clock.Advance(10 * time.Minute) // 12:13: nothing fires
	if s, err := e.ResumeSchedule(ctxOf(t), "minutely"); err != nil || s.Paused || !s.NextRunAt.Equal(t0.Add(14*time.Minute)) {
		t.Fatalf("resume: %+v, %v; want the next slot 12:14", s, err)
	}
	if n := h.disp.pending(); n != 0 {
		t.Fatalf("%d tasks dispatched while paused or for missed slots", n)
	}
	if _, err := e.PauseSchedule(ctxOf(t), "nope"); !errors.Is(err, port.ErrNotFound) {
		t.Fatalf("pausing an unknown schedule: %v", err)
	}
	if err := e.DeleteSchedule(ctxOf(t), "minutely"); err != nil {
		t.Fatal(err)
	}
	if err := e.DeleteSchedule(ctxOf(t), "minutely"); !errors.Is(err, port.ErrNotFound) {
		t.Fatalf("deleting it twice: %v", err)
	}
}

// Jitter delays a run within [0, jitter) after its slot, by the same
// amount whoever computes it.
func TestScheduleJitter(t *testing.T) {
	h := newHarness(t)
	e := startScheduler(h, 1)
	registerSingle(t, e)
	const jitter = 40 * time.Second
	if _, err := e.CreateSchedule(ctxOf(t), engine.ScheduleSpec{Name: "jittery", Workflow: "single", Inputs: map[string]any{"n": 1},
		Cron: "@hourly", Jitter: jitter}); err != nil {
		t.Fatal(err)
	}
	d := h.clock.WaitTimer(t, time.Hour+jitter)
	if d < time.Hour || d >= time.Hour+jitter {
		t.Fatalf("the run waits %s, want within [1h, 1h%s)", d, jitter)
	}
	h.clock.Advance(d - time.Millisecond)
	h.clock.Advance(0)
	if n := h.disp.pending(); n != 0 {
		t.Fatalf("the run started %s before its jittered time", time.Millisecond)
	}
	// A second engine (a new leader) agrees on the delay.
	e.Abandon()
	e2 := startScheduler(h, 2)
	if d2 := h.clock.WaitTimer(t, time.Minute); d2 != time.Millisecond {
		t.Fatalf("a new leader waits %s for the same run, want 1ms", d2)
	}
	h.clock.Advance(time.Millisecond)
	echo(e2, h.disp.one(t, "only", 1))
}

// recordFails fails RecordScheduleRun: an engine that fired a slot and
// could not record it, as one that lost its leadership in between.
type recordFails struct{ port.Store }

func (recordFails) RecordScheduleRun(context.Context, port.ScheduleRun) error {
	return errors.New("leadership lost")
}

// A slot fired by a leader that could not record it is fired again by the
// next leader — and gets the same instance (the slot's idempotency key),
// never a second one. Slots missed while no leader ran are run once.
func TestScheduleLeaderChange(t *testing.T) {
	h := newHarness(t)
	e := startScheduler(h, 1, func(c *engine.Config) { c.Store = recordFails{h.store} })
	registerSingle(t, e)
	t0 := h.clock.Now()
	if _, err := e.CreateSchedule(ctxOf(t), engine.ScheduleSpec{Name: "minutely", Workflow: "single", Inputs: map[string]any{"n": 1}, Interval: time.Minute}); err != nil {
		t.Fatal(err)
	}
	h.clock.AdvanceToTimer(t, time.Minute)
	d := h.disp.one(t, "only", 1) // the first leader fired the slot
	e.Abandon()

	e2 := startScheduler(h, 2)
	redispatched := h.disp.one(t, "only", 1) // the new leader claims the instance and dispatches it again
	if redispatched.InstanceID != d.InstanceID {
		t.Fatalf("the new leader dispatched instance %s, want the one fired before, %s", redispatched.InstanceID, d.InstanceID)
	}
	s := waitSchedule(t, e2, "minutely", "the slot recorded by the new leader", func(s engine.Schedule) bool { return s.NextRunAt.Equal(t0.Add(2 * time.Minute)) })
	if s.LastInstanceID != d.InstanceID {
		t.Fatalf("the new leader recorded instance %s for the slot, want %s (fired by the first)", s.LastInstanceID, d.InstanceID)
	}
	echo(e2, redispatched)
	h.wait(e2, d.InstanceID)
	page, err := e2.ListInstances(ctxOf(t), engine.ListRequest{})
	if err != nil || len(page.Instances) != 1 {
		t.Fatalf("instances after the leader change: %+v, %v; want one", page.Instances, err)
	}

	// No leader for ten minutes: the next leader runs one catch-up run
	// and moves on to the next slot after now.
	e2.Abandon()
	h.clock.Advance(10*time.Minute + 30*time.Second) // 12:11:30
	e3 := startScheduler(h, 3)
	echo(e3, h.disp.one(t, "only", 1))
	s = waitSchedule(t, e3, "minutely", "the catch-up run recorded", func(s engine.Schedule) bool { return s.NextRunAt.Equal(t0.Add(12 * time.Minute)) })
	h.wait(e3, s.LastInstanceID)
	if page, _ = e3.ListInstances(ctxOf(t), engine.ListRequest{}); len(page.Instances) != 2 {
		t.Fatalf("%d instances after ten missed slots, want 2 (one catch-up run)", len(page.Instances))
	}
}

// queueFailsOnce fails the first QueueInstances: the store did not answer.
type queueFailsOnce struct {
	port.Store
	failed atomic.Bool
}

func (s *queueFailsOnce) QueueInstances(ctx context.Context, in []port.NewInstance) ([]port.Queued, error) {
	if s.failed.CompareAndSwap(false, true) {
		return nil, errors.New("connection reset by peer")
	}
	return s.Store.QueueInstances(ctx, in)
}

// A slot whose run the store could not queue stays due and is fired at
// the next look: a passing outage costs no scheduled run.
func TestScheduleRetriesWhenTheStoreFails(t *testing.T) {
	h := newHarness(t)
	store := &queueFailsOnce{Store: h.store}
	e := startScheduler(h, 1, func(c *engine.Config) { c.Store, c.ScheduleInterval = store, 10*time.Second })
	registerSingle(t, e)
	t0 := h.clock.Now()
	if _, err := e.CreateSchedule(ctxOf(t), engine.ScheduleSpec{Name: "minutely", Workflow: "single", Inputs: map[string]any{"n": 1}, Interval: time.Minute}); err != nil {
		t.Fatal(err)
	}
	// To 12:01 a poll at a time (each advance waits for the scheduler to
	// arm its next look): the store fails there.
	for h.clock.Now().Before(t0.Add(time.Minute)) {
		h.clock.AdvanceToTimer(t, time.Minute)
	}
	waitUntil(t, "the failed attempt", store.failed.Load)
	if s := schedule(t, e, "minutely"); !s.NextRunAt.Equal(t0.Add(time.Minute)) || s.LastSkipped != "" {
		t.Fatalf("after the failure: %+v; want the slot still due, not skipped", s)
	}
	h.clock.AdvanceToTimer(t, 10*time.Second) // the next look
	echo(e, h.disp.one(t, "only", 1))
	waitSchedule(t, e, "minutely", "the slot run at last", func(s engine.Schedule) bool { return s.NextRunAt.Equal(t0.Add(2 * time.Minute)) })
}

// A follower owner's engine fires no schedule; given the leader's part
// (SetLeader) it fires the due slots, and without it again it stops.
func TestScheduleOnlyOnTheLeadersEngine(t *testing.T) {
	h := newHarness(t)
	e := startScheduler(h, 1, func(c *engine.Config) { c.Follower = true })
	registerSingle(t, e)
	if _, err := e.CreateSchedule(ctxOf(t), engine.ScheduleSpec{Name: "minutely", Workflow: "single", Inputs: map[string]any{"n": 1}, Interval: time.Minute}); err != nil {
		t.Fatal(err)
	}
	// The scheduler would wait on a timer within its poll interval; a
	// follower's engine arms none, so nothing can fire when time passes.
	if h.clock.HasTimerWithin(time.Hour) {
		t.Fatal("a follower's engine armed a timer within the hour (the scheduler's?)")
	}
	h.clock.Advance(3 * time.Minute)
	if n := h.disp.pending(); n != 0 {
		t.Fatalf("a follower's engine fired %d runs", n)
	}
	if !e.Follower() {
		t.Fatal("Follower() = false on a follower's engine")
	}
	e.SetLeader(true)
	echo(e, h.disp.one(t, "only", 1)) // the missed slots collapse into one catch-up run
	if e.Follower() {
		t.Fatal("Follower() = true after SetLeader(true)")
	}
	e.SetLeader(false)
	waitUntil(t, "the scheduler and the sweeper to stop their timers", func() bool {
		return e.Follower() && !h.clock.HasTimerWithin(time.Hour)
	})
	h.clock.Advance(5 * time.Minute)
	if n := h.disp.pending(); n != 0 {
		t.Fatalf("the engine fired %d runs after leaving the leader's part", n)
	}
}
