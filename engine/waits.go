package engine

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/clock"
)

// Instances that live over time (docs/workflows.md, "Waits and signals",
// "Pause and resume"; docs/architecture.md says why they are built so).
//
//   - A task with wait: is an attempt no Waggler sees. The graph emits its
//     Dispatch like any; the shard keeps it here instead of the outbox. A
//     wait for a time ends by the graph's WaitOver timer, whose completion
//     the shard records as the attempt's result (fire); a wait for a
//     signal ends when the shard hands it a signal (matchSignals), recorded
//     as the attempt's result with the signal's payload as output, and the
//     signal marked consumed in the same write. Either way a replay answers
//     the attempt from the record.
//   - Signals are recorded in the store before they are acknowledged
//     (RecordSignal) and delivered to the shard when the instance is held
//     here; a claim brings every signal not consumed yet. A signal no wait
//     took yet is kept, in order, until one does.
//   - An instance whose only attempts in flight are waits, none ending
//     within ParkAfter, is parked: its snapshot is written, its lease
//     released and its row scheduled at its next due time (none: it waits
//     for a wake), and it leaves memory. Anything that must reach it —
//     a signal, a cancel, a resume — bumps the row's wake counter and
//     makes it due at once, and the park compares that counter in its own
//     write, so a wake that races the park is never lost.
//   - A paused instance dispatches no new attempt and holds the timers
//     that fire until it is resumed; attempts in flight finish and are
//     recorded, cancel works.

// waitingAttempt is an attempt of a wait: {signal} task in flight.
type waitingAttempt struct {
	ref     graph.TaskRef
	attempt uint32
}

// dispatchWait takes the Dispatch of a wait task: nothing leaves the shard.
// A signal wait looks for a signal already received.
func (s *shard) dispatchWait(inst *instance, e graph.Effect, signal string) {
	// The wait's due time (or its signal timeout) lives in the graph's
	// timers: the next snapshot, written with this event's results, keeps
	// it, so an engine that takes over waits until the same time. (A
	// signal wait without timeout has none: replay gives the same wait.)
	if !inst.g.Task(e.Task).Due.IsZero() {
		inst.structural = true
	}
	s.armParkCheck(inst)
	if signal == "" {
		return
	}
	if inst.waiting == nil {
		inst.waiting = make(map[string][]waitingAttempt)
	}
	inst.waiting[signal] = append(inst.waiting[signal], waitingAttempt{ref: e.Task, attempt: e.Attempt})
	if slices.ContainsFunc(inst.signals, func(p port.SignalRecord) bool { return p.Name == signal }) {
		// Delivered after the effects of this event are applied: the
		// graph is not to be called from inside them.
		s.send(func(s *shard) { s.matchSignals(inst) })
	}
}

// receiveSignal takes a signal the store recorded for a held instance.
// It reports whether a waiting task took it at once.
func (s *shard) receiveSignal(inst *instance, rec port.SignalRecord, wake int64) bool {
	inst.wake = max(inst.wake, wake)
	if rec.Consumed || !inst.knowSignal(rec.Seq) {
		return false // known already (a duplicate delivered again, or one a claim brought)
	}
	// By seq: deliveries of one batch may come out of order, and signals
	// are taken oldest first.
	at, _ := slices.BinarySearchFunc(inst.signals, rec.Seq, func(p port.SignalRecord, seq int64) int { return cmp.Compare(p.Seq, seq) })
	inst.signals = slices.Insert(inst.signals, at, rec)
	info := SignalInfo{Seq: rec.Seq, Name: rec.Name, Payload: rec.Payload, At: rec.CreatedAt}
	s.emit(inst, Event{Kind: EventSignal, Index: -1, Signal: &info})
	inst.lg.Info("signal received", zap.String("signal", rec.Name), zap.Int64("seq", rec.Seq))
	return s.matchSignals(inst) > 0 && !slices.ContainsFunc(inst.signals, func(p port.SignalRecord) bool { return p.Seq == rec.Seq })
}

// knowSignal records that the instance received signal seq; false if it
// had already.
func (inst *instance) knowSignal(seq int64) bool {
	if _, ok := inst.knownSignals[seq]; ok {
		return false
	}
	if inst.knownSignals == nil {
		inst.knownSignals = make(map[int64]struct{})
	}
	inst.knownSignals[seq] = struct{}{}
	return true
}

// matchSignals hands pending signals to the attempts waiting for them,
// oldest signal first, and returns how many it handed.
func (s *shard) matchSignals(inst *instance) int {
	if s.insts[inst.id] != inst || inst.finishing || inst.g == nil || inst.parking {
		return 0
	}
	handed := 0
	for i := 0; i < len(inst.signals); {
		p := inst.signals[i]
		w, ok := s.takeWaiting(inst, p.Name)
		if !ok {
			i++
			continue
		}
		inst.signals = slices.Delete(inst.signals, i, i+1)
		handed++
		s.consumeSignal(inst, w, p)
		if inst.finishing || inst.g == nil {
			return handed
		}
	}
	return handed
}

// takeWaiting returns the oldest attempt still waiting for signal; attempts
// that ended otherwise (timed out, cancelled) are dropped on the way.
func (s *shard) takeWaiting(inst *instance, signal string) (waitingAttempt, bool) {
	q := inst.waiting[signal]
	for len(q) > 0 {
		w := q[0]
		q = q[1:]
		if info := inst.g.Task(w.ref); info.Status == graph.TaskRunning && info.Attempt == w.attempt {
			inst.waiting[signal] = q
			return w, true
		}
	}
	delete(inst.waiting, signal)
	return waitingAttempt{}, false
}

// consumeSignal completes a waiting attempt with a signal: the attempt's
// result is the signal's payload, recorded with the signal marked consumed
// in the same write.
func (s *shard) consumeSignal(inst *instance, w waitingAttempt, p port.SignalRecord) {
	exec := inst.pe.executionID(w.ref)
	out, err := value.Decode(p.Payload)
	if err != nil {
		out, p.Payload = nil, []byte("null") // never: the API stores canonical JSON
	}
	now := s.now()
	s.fl = append(s.fl, flushItem{inst: inst, signals: []port.SignalUse{{Seq: p.Seq, By: fmt.Sprintf("%s#%d", exec, w.attempt)}}})
	s.onResult(&port.TaskResult{
		AttemptKey: port.AttemptKey{InstanceID: inst.id, ExecutionID: exec, Attempt: w.attempt},
		OK:         true, Output: out, OutputJSON: p.Payload,
		WorkerID:  fmt.Sprintf("signal#%d", p.Seq),
		StartedAt: clock.FromUnixNanos(inst.started[w.ref.Node]), FinishedAt: now,
	})
}

// waitOver records the end of a wait for a time (the graph completed the
// attempt on its WaitOver timer) as the attempt's result.
func (s *shard) waitOver(inst *instance, t graph.Timer, now time.Time) {
	info := inst.g.Task(t.Task) // a wait task is never spread or looped
	if info.Status != graph.TaskCompleted {
		return // the timer was stale: the wait had ended otherwise
	}
	enc, err := value.Encode(info.Output)
	if err != nil {
		return
	}
	inst.resolvedAny = true
	ar := port.ActionResult{InstanceID: inst.id, ExecutionID: inst.pe.executionID(t.Task), Attempt: t.Attempt, OK: true,
		Output: enc, WorkerID: "timer", StartedAt: clock.FromUnixNanos(inst.started[t.Task.Node]), FinishedAt: now}
	s.record(inst, t.Task, ar)
	s.emit(inst, Event{Kind: EventTaskCompleted, Task: inst.pe.task(t.Task.Node).GetName(), Index: t.Task.Index,
		Attempt: t.Attempt, Output: info.Output})
	s.resolvedTask(inst, t.Task, now)
}

// Parking.

// armParkCheck asks for a look, ParkAfter from now, at whether the
// instance can leave memory — at once while the engine holds half the
// instances it may (MaxInstances): waiting instances then make room for
// those queued behind them rather than hold it for ParkAfter.
func (s *shard) armParkCheck(inst *instance) {
	if inst.parkArmed || s.e.cfg.ParkAfter < 0 {
		return
	}
	inst.parkArmed = true
	after := s.e.cfg.ParkAfter
	if 2*s.e.heldCount.Load() >= int64(s.e.cfg.MaxInstances) {
		after = 0
	}
	s.pushTimer(timerEntry{at: s.now().Add(after), inst: inst, park: true})
}

// parkCheck parks the instance if it only waits; otherwise it looks again
// later while some wait is in flight.
func (s *shard) parkCheck(inst *instance, now time.Time) {
	inst.parkArmed = false
	if inst.finishing || inst.g == nil || inst.parking {
		return
	}
	until, ok, waits := s.parkable(inst, now)
	if !ok {
		if waits || inst.paused {
			s.armParkCheck(inst)
		}
		return
	}
	snap, err := inst.g.Snapshot()
	if err != nil {
		inst.lg.Error("cannot snapshot the instance to park it", zap.Error(err))
		return
	}
	inst.parking = true
	inst.parkUntil = until
	b := inst.envelope.encode(snap)
	inst.snapBytes, inst.sinceBytes, inst.sinceCount, inst.structural = len(b), 0, 0, false
	s.fl = append(s.fl, flushItem{inst: inst, state: b, park: &port.Park{Until: until, WakeSeen: inst.wake}})
	s.e.parks.Add(1)
	inst.lg.Debug("parking the instance", zap.Time("until", until))
}

// parkable reports whether every attempt in flight is a wait, and the
// earliest time the instance must wake by itself (zero: none): its graph
// timers and its deadline. waits says some wait is in flight.
func (s *shard) parkable(inst *instance, now time.Time) (until time.Time, ok, waits bool) {
	pe := inst.pe
	ok = true
	for _, a := range s.inFlight(inst) {
		switch _, _, isWait := pe.plan.Wait(a.ref.Node); {
		case isWait:
			waits = true
		case !slices.ContainsFunc(inst.held, func(e graph.Effect) bool { return e.Task == a.ref && e.Attempt == a.attempt }):
			// A worker's or a child's attempt in flight (one the pause
			// holds back is not: a claim dispatches it again, held again).
			ok = false
		}
	}
	if !ok || (!waits && !inst.paused) {
		return time.Time{}, false, waits
	}
	if !inst.paused {
		for node := range pe.plan.NumTasks() {
			// A loop's pause or a spread's elements keep timers of
			// their own that Due does not show: such an instance stays.
			if st := inst.g.Task(graph.Ref(int32(node))).Status; st == graph.TaskLooping || st == graph.TaskSpreading {
				return time.Time{}, false, waits
			}
		}
	}
	earliest := func(t time.Time) {
		if !t.IsZero() && (until.IsZero() || t.Before(until)) {
			until = t
		}
	}
	if !inst.paused { // a paused instance holds its timers: only a resume wakes it
		for node := range pe.plan.NumTasks() {
			earliest(inst.g.Task(graph.Ref(int32(node))).Due)
		}
	}
	earliest(inst.envelope.deadlineAt)
	if !until.IsZero() && until.Before(now.Add(s.e.cfg.ParkAfter)) {
		return time.Time{}, false, waits // it wakes soon: cheaper to stay
	}
	return until, true, waits
}

// parked runs once the park is durable: the instance leaves memory. Its
// row is due at its next time, or at once if something woke it since.
func (s *shard) parked(inst *instance) {
	if s.insts[inst.id] != inst {
		return
	}
	s.e.parked.Add(1)
	if !inst.parkUntil.IsZero() {
		s.e.parkWakes.add(inst.parkUntil)
	}
	inst.lg.Debug("instance parked")
	if len(s.lastSeq) > 100_000 {
		clear(s.lastSeq)
	}
	s.lastSeq[inst.id] = inst.log.last()
	s.remove(inst)
	// The park may have found a wake (the row is due now), and the
	// claimer sets its timer for the earliest park wake.
	s.e.wakeClaimer()
}

// parkWakes holds the times the instances this engine parked are due
// again, so that the claimer wakes for them rather than at its next poll.
// It keeps at most maxParkWakes: the claimer's poll (ClaimInterval) finds
// the others, as it finds those another engine parked.
type parkWakes struct {
	mu sync.Mutex
	h  timeHeap
}

const maxParkWakes = 4096

func (p *parkWakes) add(at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.h) < maxParkWakes {
		heap.Push(&p.h, at)
	}
}

// due drops the times at or before now.
func (p *parkWakes) due(now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.h) > 0 && !p.h[0].After(now) {
		heap.Pop(&p.h)
	}
}

// next is the earliest time kept.
func (p *parkWakes) next() (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.h) == 0 {
		return time.Time{}, false
	}
	return p.h[0], true
}

type timeHeap []time.Time

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, j int) bool { return h[i].Before(h[j]) }
func (h timeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(time.Time)) }
func (h *timeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Pause and resume.

// pause holds the instance back from dispatching.
func (s *shard) pause(inst *instance, wake int64) {
	inst.wake = max(inst.wake, wake)
	if inst.paused || inst.finishing {
		return
	}
	inst.paused = true
	inst.h.paused.Store(true)
	s.emit(inst, Event{Kind: EventPaused, Index: -1, State: port.StatePaused})
	inst.lg.Info("instance paused")
	s.armParkCheck(inst)
}

// resume dispatches what the pause held back and fires the timers it held.
func (s *shard) resume(inst *instance, wake int64) {
	inst.wake = max(inst.wake, wake)
	if !inst.paused || inst.finishing || inst.g == nil {
		return
	}
	inst.paused = false
	inst.h.paused.Store(false)
	s.emit(inst, Event{Kind: EventResumed, Index: -1})
	inst.lg.Info("instance resumed", zap.Int("held_dispatches", len(inst.held)), zap.Int("held_timers", len(inst.heldTimers)))
	now := s.now()
	held := inst.held
	inst.held = nil
	for _, e := range held {
		s.effect(inst, e, now)
	}
	for _, t := range inst.heldTimers {
		s.pushTimer(timerEntry{at: now, inst: inst, t: t})
	}
	inst.heldTimers = nil
	s.settle(inst)
}
