package wag

import (
	"fmt"
	"slices"
	"time"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/sentinel"
)

// admit checks that n more attempts may be queued.
func (w *Waggler) admit() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.life.Stopped() {
		return ErrNotRunning
	}
	if w.queued >= w.queueSize {
		return fmt.Errorf("%w: capability %s has %d attempts waiting for a worker (limit %d)", ErrBusy, w.capability, w.queued, w.queueSize)
	}
	return nil
}

// enqueue accepts attempts (duplicates of attempts it holds are ignored:
// dispatch is at-least-once) and hands them to free workers.
func (w *Waggler) enqueue(tasks []port.TaskDispatch) {
	var fx effects
	w.mu.Lock()
	if w.life.Stopped() {
		w.mu.Unlock()
		return
	}
	added := 0
	for _, d := range tasks {
		if _, dup := w.byKey[d.AttemptKey]; dup {
			continue
		}
		if r, ok := w.done.get(d.AttemptKey); ok {
			w.log.Info("dispatch of an attempt this waggler finished: its result is sent again, not run twice", attemptFields(d.AttemptKey)...)
			fx.results = append(fx.results, r)
			continue
		}
		e := &entry{d: d}
		w.hold(e)
		w.queue = append(w.queue, e)
		w.queued++
		added++
	}
	if added > 0 {
		w.setState(StateDispatching)
		if n := min(added, len(w.idle)); n > 1 {
			// Room for what pump will assign: growing these by appends
			// was 15 % of a busy Waggler host's allocation.
			fx.runs = make([]runEffect, 0, n)
			fx.started = make([]Started, 0, n)
			fx.observed = make([]sentinel.Observation, 0, n)
		}
		w.pump(&fx)
		w.settle()
	}
	w.mu.Unlock()
	w.apply(fx)
}

// dropWaiting takes an entry that waits for a worker — queued, or held
// back as maybe running — out of the count; both skip it from now on.
func (w *Waggler) dropWaiting(e *entry) {
	e.cancelled = true
	if !e.unsure {
		w.queued--
	}
}

// completesEarlier reports whether a report on generation gen, not e's
// current one, completes e: it is the assignment e was queued again after
// (prevGen), or, while e is held back as maybe running, a predecessor's.
func (w *Waggler) completesEarlier(e *entry, gen uint64) bool {
	return e.prevGen != 0 && e.prevGen == gen || e.unsure && gen>>32 < w.epoch
}

// finished reports whether this Waggler reported a result for key lately.
func (w *Waggler) finished(key port.AttemptKey) bool {
	return w.done.has(key)
}

// finish records a result to report: in fx, and in done.
func (w *Waggler) finish(r port.TaskResult, fx *effects) {
	fx.results = append(fx.results, r)
	w.done.add(r, w.clock.Now())
}

// cancel drops attempts: queued ones leave the queue, running ones are
// cancelled on their worker and their results discarded. Unknown keys are
// ignored.
func (w *Waggler) cancel(keys []port.AttemptKey) {
	var fx effects
	w.mu.Lock()
	changed := false
	now := w.clock.Now()
	for _, key := range keys {
		e, ok := w.byKey[key]
		if !ok {
			// Not (yet) here: a worker of a predecessor may still run it
			// and register it with this Waggler; it is stopped then.
			w.cancelled.add(key, now)
			continue
		}
		changed = true
		w.release(e)
		e.cancelled = true
		w.dropBackup(e)
		if e.worker == nil {
			w.dropWaiting(e)
			continue
		}
		w.mon.stop(key, e.gen)
		fx.cancels = append(fx.cancels, cancelEffect{w: e.worker.w, key: key, gen: e.gen})
		e.worker.entry = nil // still busy until it reports
		e.worker = nil
		w.running--
	}
	if changed {
		w.settle()
	}
	w.mu.Unlock()
	w.apply(fx)
}

// pump hands queued attempts to available workers: each to the most
// recently freed worker it may run on (allowed). Runs that no free worker
// may take stay queued, in order.
func (w *Waggler) pump(fx *effects) {
	var held []*entry
	// Whether an idle worker may take an attempt of no group depends on
	// the worker alone (quarantine, allowance): once one such attempt
	// found none, none will, and only runs of groups are still tried — so
	// a long queue facing workers on probation costs one scan, not one per
	// attempt.
	// (Attempts pinned to a node depend on the attempt too, like runs.)
	plainBlocked := false
	for w.queued > 0 && len(w.idle) > 0 {
		if plainBlocked && len(w.groups) == 0 && w.pinned == 0 {
			break
		}
		e := w.popQueue()
		plain := e.d.Group == "" && e.d.Node == ""
		if plainBlocked && plain {
			held = append(held, e)
			continue
		}
		i := w.pickIdle(e)
		if i < 0 {
			plainBlocked = plainBlocked || plain
			held = append(held, e)
			continue
		}
		ww := w.takeIdleAt(i)
		w.setState(StateDispatching)
		w.assign(e, ww, fx)
	}
	for i := len(held) - 1; i >= 0; i-- {
		w.pushFront(held[i])
	}
}

// hold and release keep the entries held here, by key and by group.
func (w *Waggler) hold(e *entry) {
	if old := w.byKey[e.d.AttemptKey]; old != nil && old.d.Node != "" {
		w.pinned-- // replaced (a worker's copy wins over a queued one)
	}
	w.byKey[e.d.AttemptKey] = e
	if e.d.Node != "" {
		w.pinned++
	}
	if g := e.d.Group; g != "" {
		w.groups[g] = append(w.groups[g], e)
	}
}

func (w *Waggler) release(e *entry) {
	if e.d.Node != "" && w.byKey[e.d.AttemptKey] == e {
		w.pinned--
	}
	delete(w.byKey, e.d.AttemptKey)
	if g := e.d.Group; g != "" {
		w.groups[g] = slices.DeleteFunc(w.groups[g], func(o *entry) bool { return o == e })
		if len(w.groups[g]) == 0 {
			delete(w.groups, g)
			delete(w.groupNodes, g)
		}
	}
}

// assign gives an attempt to a worker under a new generation.
func (w *Waggler) assign(e *entry, ww *wagWorker, fx *effects) {
	w.nextGen++
	e.gen = w.nextGen
	e.worker = ww
	w.setBusy(ww, e.gen)
	ww.entry = e
	w.running++
	w.ranOn(e, ww.node)
	now := w.clock.Now()
	e.assignedAt = now
	fx.observe(sentinel.Observation{Node: ww.subject, Capability: w.capability, Kind: sentinel.Accepted, At: now})
	w.mon.start(e.d.AttemptKey, e.gen, ww.id, now)
	fx.runs = append(fx.runs, runEffect{w: ww.w, a: Assignment{TaskDispatch: e.d, Generation: e.gen}})
	fx.started = append(fx.started, w.startedOf(e, now))
}

func (w *Waggler) startedOf(e *entry, now time.Time) Started {
	return Started{Key: e.d.AttemptKey, Capability: w.capability, Epoch: w.epoch, WorkerID: e.worker.id, Generation: e.gen, At: now}
}

// popQueue takes the first live entry; w.queued > 0.
func (w *Waggler) popQueue() *entry {
	for {
		e := w.queue[w.head]
		w.queue[w.head] = nil
		w.head++
		if w.head > 1024 && w.head*2 > len(w.queue) {
			w.queue = append([]*entry(nil), w.queue[w.head:]...)
			w.head = 0
		}
		if !e.cancelled {
			w.queued--
			return e
		}
	}
}

func (w *Waggler) pushFront(e *entry) {
	w.queued++
	if w.head > 0 {
		w.head--
		w.queue[w.head] = e
		return
	}
	w.queue = slices.Insert(w.queue, 0, e)
}
