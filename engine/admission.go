package engine

import (
	"context"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
)

// Pacing of the instances held back.
const (
	// admitBatch bounds the instances started per set of first
	// capabilities in one pass: Saturated counts attempts once the shards
	// have dispatched them, so a pass that started many at once could
	// overshoot the backlog by all of their tasks.
	admitBatch = 8
	// admitPace is the pause before the next pass when a pass stopped at
	// admitBatch with room left.
	admitPace = 2 * time.Millisecond
)

// admission is the instances held back, and the admitter's wake-up.
type admission struct {
	mu     sync.Mutex
	queues map[string][]*heldBack // by planEntry.rootKey, oldest first
	byID   map[uuid.UUID]*heldBack
	wake   chan struct{}
}

// heldBack is a claimed instance not started yet.
type heldBack struct {
	c  port.ClaimedInstance
	pe *planEntry
	h  *holder
}

func newAdmission() admission {
	return admission{queues: map[string][]*heldBack{}, byID: map[uuid.UUID]*heldBack{}, wake: make(chan struct{}, 1)}
}

// CapacityFreed tells the engine that a capability it was told is
// saturated has drained: instances held back for it may start.
func (e *Engine) CapacityFreed(string) {
	select {
	case e.admit.wake <- struct{}{}:
	default:
	}
}

// holdBack keeps a claimed instance unstarted if it never ran and every
// capability its first tasks need is saturated — or others that start
// with the same capabilities wait already (they go first). It reports
// whether it did.
func (e *Engine) holdBack(c port.ClaimedInstance, pe *planEntry, perr error, h *holder) bool {
	// HeldBefore covers recorded results too: only an engine that claimed
	// an instance records them.
	if e.cfg.Admission == nil || perr != nil || c.CancelRequested || c.HeldBefore || len(pe.rootCaps) == 0 {
		return false
	}
	a := &e.admit
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.queues[pe.rootKey]) == 0 && !e.saturated(pe) {
		return false
	}
	h.heldBack.Store(true)
	w := &heldBack{c: c, pe: pe, h: h}
	a.queues[pe.rootKey] = append(a.queues[pe.rootKey], w)
	a.byID[c.ID] = w
	return true
}

// saturated reports whether every capability pe's first tasks need is.
func (e *Engine) saturated(pe *planEntry) bool {
	for _, c := range pe.rootCaps {
		if !e.cfg.Admission.Saturated(c) {
			return false
		}
	}
	return true
}

// admitLoop starts instances held back as their capabilities drain: when
// told (CapacityFreed), and every ClaimInterval (a capability also stops
// counting as saturated when its results stop coming).
func (e *Engine) admitLoop(ctx context.Context) {
	if e.cfg.Admission == nil {
		return
	}
	timer := e.cfg.Clock.NewTimer(e.cfg.ClaimInterval)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.admit.wake:
		case <-timer.C():
		}
		if e.admitOnce() {
			timer.Reset(admitPace)
		} else {
			timer.Reset(e.cfg.ClaimInterval)
		}
	}
}

// admitOnce starts up to admitBatch instances of each queue while their
// first capabilities are not all saturated. more: a queue stopped at the
// batch with room left.
func (e *Engine) admitOnce() (more bool) {
	var start []*heldBack
	a := &e.admit
	a.mu.Lock()
	for key, q := range a.queues {
		n := 0
		for n < len(q) && n < admitBatch && !e.saturated(q[n].pe) {
			delete(a.byID, q[n].c.ID)
			start = append(start, q[n])
			n++
		}
		if n == len(q) {
			delete(a.queues, key)
			continue
		}
		clear(q[:n])
		a.queues[key] = q[n:]
		more = more || n == admitBatch
	}
	a.mu.Unlock()
	for _, w := range start {
		e.startHeldBack(w)
	}
	if len(start) > 0 {
		e.log.Debug("started instances held back", zap.Int("count", len(start)))
	}
	return more
}

// takeHeldBack removes instance id from the instances held back, if it is
// one of them.
func (e *Engine) takeHeldBack(id uuid.UUID) *heldBack {
	a := &e.admit
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.byID[id]
	if w == nil {
		return nil
	}
	delete(a.byID, id)
	q := a.queues[w.pe.rootKey]
	for i, x := range q {
		if x == w {
			q = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	if len(q) == 0 {
		delete(a.queues, w.pe.rootKey)
	} else {
		a.queues[w.pe.rootKey] = q
	}
	return w
}

// startHeldBack hands an instance held back to its shard, which hydrates
// it as it would have at its claim; cancel: a cancel was requested
// meanwhile.
func (e *Engine) startHeldBack(w *heldBack) {
	w.h.heldBack.Store(false)
	w.h.shard.send(func(s *shard) { s.hydrate(w.c, w.pe, nil, w.h) })
	e.signalClaimed() // watchers polling the Store switch to the live log
}

// cancelHeldBack starts instance id at once, cancelled, if it is held
// back: a cancel request does not wait for capacity. It reports whether
// it was held back.
func (e *Engine) cancelHeldBack(id uuid.UUID) bool {
	w := e.takeHeldBack(id)
	if w == nil {
		return false
	}
	w.c.CancelRequested = true
	e.startHeldBack(w)
	return true
}

// dropHeldBack forgets instance id, if it is held back, as an eviction
// forgets a running one: its lease is lost. It reports whether it was
// held back.
func (e *Engine) dropHeldBack(id uuid.UUID, reason string) bool {
	w := e.takeHeldBack(id)
	if w == nil {
		return false
	}
	e.evictions.Add(1)
	e.log.Warn("instance evicted before it started", zap.Stringer("instance", id), zap.String("reason", reason))
	w.h.gone.Store(true)
	e.held.CompareAndDelete(id, w.h)
	e.heldCount.Add(-1)
	e.wakeClaimer()
	return true
}

// heldBackView is the view of an instance held back: claimed, so RUNNING
// as the Store says, with no task started and its first tasks saying what
// they wait for. (The Store's own view would show them running: it
// assumes a claimed instance dispatched what is ready.)
func (e *Engine) heldBackView(ctx context.Context, id uuid.UUID) (InstanceView, error) {
	rec, pe, err := e.q.record(ctx, id)
	if err != nil {
		return InstanceView{}, err
	}
	status := rec.Status
	rec.Status = port.StatePending // not started: nothing dispatched
	v, err := e.q.recordView(pe, rec, nil)
	if err != nil {
		return InstanceView{}, err
	}
	v.State = status
	now := e.cfg.Clock.Now()
	for i := range v.Tasks {
		if t := &v.Tasks[i]; len(t.Needs) == 0 {
			t.Progress = &port.TaskProgress{At: now, Message: "waiting: capability " + t.Capability +
				" has a full backlog; the instance starts as it drains"}
		}
	}
	return v, nil
}

// clearHeldBack forgets every instance held back, when the engine stops
// (a graceful stop releases their leases with the others').
func (e *Engine) clearHeldBack() {
	a := &e.admit
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.byID)
	clear(a.queues)
}

// heldBackCount is the number of instances held back.
func (e *Engine) heldBackCount() int {
	e.admit.mu.Lock()
	defer e.admit.mu.Unlock()
	return len(e.admit.byID)
}
