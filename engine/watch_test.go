package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
)

// watcher runs WatchInstance in the background and hands the events over
// one by one.
type watcher struct {
	t      *testing.T
	events chan engine.Event
	cancel context.CancelFunc
	done   chan error
}

func watch(t *testing.T, e *engine.Engine, id uuid.UUID, after uint64) *watcher {
	ctx, cancel := context.WithCancel(ctxOf(t))
	w := &watcher{t: t, events: make(chan engine.Event), cancel: cancel, done: make(chan error, 1)}
	go func() {
		w.done <- e.WatchInstance(ctx, id, after, func(ev engine.Event) error {
			select {
			case w.events <- ev:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	t.Cleanup(w.stop)
	return w
}

// next returns the next event.
func (w *watcher) next() engine.Event {
	w.t.Helper()
	select {
	case ev := <-w.events:
		return ev
	case err := <-w.done:
		w.done <- err
		w.t.Fatalf("the watch ended: %v", err)
	case <-time.After(waitLimit):
		w.t.Fatalf("no event")
	}
	return engine.Event{}
}

// until returns the events up to and including the first that matches.
func (w *watcher) until(match func(engine.Event) bool) []engine.Event {
	w.t.Helper()
	var evs []engine.Event
	for {
		ev := w.next()
		evs = append(evs, ev)
		if match(ev) {
			return evs
		}
	}
}

// stop ends the watch and waits for it.
func (w *watcher) stop() {
	w.cancel()
	if err := <-w.done; err != nil && !errors.Is(err, context.Canceled) {
		w.t.Errorf("WatchInstance: %v", err)
	}
	w.done <- nil
}

func terminal(ev engine.Event) bool { return ev.Kind == engine.EventState && ev.State.Terminal() }

func started(task string) func(engine.Event) bool {
	return func(ev engine.Event) bool { return ev.Kind == engine.EventTaskStarted && ev.Task == task }
}

func describe(evs []engine.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%d %s %s %s[%d]#%d\n", ev.Seq, ev.Kind, ev.State, ev.Task, ev.Index, ev.Attempt)
	}
	return b.String()
}

func checkConsecutive(t *testing.T, evs []engine.Event) {
	t.Helper()
	for i := 1; i < len(evs); i++ {
		if evs[i].Seq != evs[i-1].Seq+1 {
			t.Fatalf("event %d has Seq %d after %d:\n%s", i, evs[i].Seq, evs[i-1].Seq, describe(evs))
		}
	}
}

func TestWatchEventsInOrder(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, chainSpec, map[string]any{"x": 1})
	a := h.disp.one(t, "a", 1)
	w := watch(t, e, id, 0)
	evs := []engine.Event{w.next()}
	echo(e, a)
	echo(e, h.disp.one(t, "b", 1))
	echo(e, h.disp.one(t, "c", 1))
	evs = append(evs, w.until(terminal)...)

	checkConsecutive(t, evs)
	if evs[0].Kind != engine.EventSnapshot || evs[0].Instance == nil || evs[0].Instance.ID != id {
		t.Fatalf("the watch starts with %+v, want a snapshot", evs[0])
	}
	last := evs[len(evs)-1]
	if last.State != port.StateComplete || jsonOf(t, last.Output) != `{"result":5}` {
		t.Fatalf("the last event is %+v", last)
	}
	var completed []string
	for _, ev := range evs {
		if ev.Kind == engine.EventTaskCompleted {
			completed = append(completed, ev.Task)
		}
	}
	if strings.Join(completed, ",") != "a,b,c" {
		t.Fatalf("completions %v:\n%s", completed, describe(evs))
	}
	// Watching a finished instance: its snapshot, its whole history as
	// recorded (each attempt's start and outcome, at their times), then
	// its final state.
	w2 := watch(t, e, id, 0)
	if ev := w2.next(); ev.Kind != engine.EventSnapshot || ev.State != port.StateComplete {
		t.Fatalf("first event %+v", ev)
	}
	var replay []string
	for {
		ev := w2.next()
		if terminal(ev) {
			if ev.State != port.StateComplete || jsonOf(t, ev.Output) != `{"result":5}` {
				t.Fatalf("final event %+v", ev)
			}
			break
		}
		if ev.Time.IsZero() {
			t.Fatalf("a replayed event without its time: %+v", ev)
		}
		replay = append(replay, string(ev.Kind)+" "+ev.Task)
	}
	if got := strings.Join(replay, ", "); got != "task_started a, task_completed a, task_started b, task_completed b, task_started c, task_completed c" {
		t.Fatalf("the replayed history: %s", got)
	}
}

func TestWatchResumesAfterSeq(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, chainSpec, map[string]any{"x": 1})
	a := h.disp.one(t, "a", 1)
	w := watch(t, e, id, 0)
	seen := []engine.Event{w.next()} // the snapshot
	w.stop()
	cursor := seen[len(seen)-1].Seq

	echo(e, a)
	b := h.disp.one(t, "b", 1)
	w2 := watch(t, e, id, cursor)
	resumed := w2.until(started("b"))
	if resumed[0].Seq != cursor+1 || resumed[0].Kind == engine.EventSnapshot {
		t.Fatalf("resumed with %+v after Seq %d, want the next event", resumed[0], cursor)
	}
	checkConsecutive(t, append(seen, resumed...))
	echo(e, b)
	echo(e, h.disp.one(t, "c", 1))
	w2.until(terminal)
}

func TestWatchSnapshotWhenSeqGone(t *testing.T) {
	h := newHarness(t)
	e := h.start(1, func(c *engine.Config) { c.EventLogSize = 3 })
	id := h.submit(e, chainSpec, map[string]any{"x": 1})
	a := h.disp.one(t, "a", 1)
	w := watch(t, e, id, 0)
	cursor := w.next().Seq
	w.stop()

	echo(e, a)
	b := h.disp.one(t, "b", 1)
	echo(e, b)
	c := h.disp.one(t, "c", 1) // more than 3 events since cursor
	w2 := watch(t, e, id, cursor)
	snap := w2.next()
	if snap.Kind != engine.EventSnapshot || snap.Seq <= cursor+3 {
		t.Fatalf("resumed after a trimmed Seq with %+v, want a snapshot", snap)
	}
	if tv := task(t, *snap.Instance, "b"); tv.Status != graph.TaskCompleted {
		t.Fatalf("the snapshot shows b %s", tv.Status)
	}
	echo(e, c)
	evs := append([]engine.Event{snap}, w2.until(terminal)...)
	checkConsecutive(t, evs)

	// An unknown Seq (e.g. from before a restart) also gets a snapshot.
	w3 := watch(t, e, id, 12345)
	if ev := w3.next(); ev.Kind != engine.EventSnapshot {
		t.Fatalf("first event %+v", ev)
	}
}

func TestWatchFromAnotherEngine(t *testing.T) {
	h := newHarness(t)
	owner := h.start(1)
	id := h.submit(owner, chainSpec, map[string]any{"x": 1})
	a := h.disp.one(t, "a", 1)

	// An engine that does not hold the instance polls the store.
	other := h.newEngine(2, func(c *engine.Config) { c.WatchPollInterval = time.Minute })
	w := watch(t, other, id, 0)
	if ev := w.next(); ev.Kind != engine.EventSnapshot || ev.State != port.StateRunning {
		t.Fatalf("first event %+v", ev)
	}
	echo(owner, a)
	echo(owner, h.disp.one(t, "b", 1))
	echo(owner, h.disp.one(t, "c", 1))
	h.wait(owner, id)
	h.clock.AdvanceToTimer(t, time.Minute)
	evs := w.until(terminal)
	if len(evs) != 2 || evs[0].Kind != engine.EventSnapshot || evs[0].Instance.State != port.StateComplete ||
		jsonOf(t, evs[1].Output) != `{"result":5}` {
		t.Fatalf("events after the poll:\n%s", describe(evs))
	}
}

// A watcher that keeps falling behind the event log gets its catch-up
// snapshots at most one per catchUpGap (250 ms): each is the whole
// instance, built on its shard, and a wide spread would otherwise have
// one built for nearly every read.
func TestWatchCatchUpSnapshotsPaced(t *testing.T) {
	h := newHarness(t)
	// A log of one event: whatever the watcher read before it blocked, it
	// is behind once two more events happened.
	e := h.start(1, func(c *engine.Config) { c.EventLogSize = 1 })
	id := h.submit(e, chainSpec, map[string]any{"x": 1})
	a := h.disp.one(t, "a", 1)
	w := watch(t, e, id, 0)
	if ev := w.next(); ev.Kind != engine.EventSnapshot {
		t.Fatalf("first event %+v", ev)
	}
	first := time.Now()
	echo(e, a) // more events than the log keeps while the watcher is not read
	b := h.disp.one(t, "b", 1)
	echo(e, b)
	c := h.disp.one(t, "c", 1)
	evs := w.until(func(ev engine.Event) bool { return ev.Kind == engine.EventSnapshot })
	if gap := time.Since(first); gap < 200*time.Millisecond {
		t.Fatalf("a catch-up snapshot %s after the first, want at least 250 ms:\n%s", gap, describe(evs))
	}
	snap := evs[len(evs)-1]
	if tv := task(t, *snap.Instance, "b"); tv.Status != graph.TaskCompleted {
		t.Fatalf("the catch-up snapshot shows b %s", tv.Status)
	}
	echo(e, c)
	checkConsecutive(t, append([]engine.Event{snap}, w.until(terminal)...))
}

// GATHERING is shown once something was gathered: an instance whose every
// task is dispatched but none finished is RUNNING.
func TestGatheringOnceSomethingFinished(t *testing.T) {
	h := newHarness(t)
	e := h.start(1)
	id := h.submit(e, `
name: pair
version: 1
tasks:
  a: {capability: test.cap, action: echo, with: {x: 1}}
  b: {capability: test.cap, action: echo, with: {x: 2}}
`, nil)
	ds := h.disp.take(t, 2)
	if v, err := e.GetInstance(ctxOf(t), id); err != nil || v.State != port.StateRunning {
		t.Fatalf("both dispatched, none finished: %s, %v; want RUNNING", v.State, err)
	}
	echo(e, ds[0])
	waitUntil(t, "GATHERING after the first result", func() bool {
		v, err := e.GetInstance(ctxOf(t), id)
		return err == nil && v.State == port.StateGathering
	})
	echo(e, ds[1])
	if v := h.wait(e, id); v.State != port.StateComplete {
		t.Fatalf("ended %s", v.State)
	}
}
