package wag

import (
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/sentinel"
)

// tick runs the ladder and tells the engine about attempts that wait for a
// capability no worker offers.
func (w *Waggler) tick() {
	var fx effects
	sv := w.serving(w.holding.Load() > 0)
	w.mu.Lock()
	if w.life.Stopped() {
		w.mu.Unlock()
		return
	}
	now := w.clock.Now()
	clear(w.allowance) // trust moves: asked again
	clear(w.rank)
	w.done.prune(now)
	w.cancelled.prune(now)
	for _, a := range w.mon.tick(now) {
		w.alarm(a, &fx)
	}
	requeued := w.releaseUnsure(now, sv)
	for e, u := range w.unlisted {
		switch {
		case e.gen != u.gen || e.worker == nil || w.byKey[e.d.AttemptKey] != e:
			delete(w.unlisted, e) // reported, failed over or cancelled meanwhile
		case now.Sub(u.since) >= w.interval/2:
			delete(w.unlisted, e)
			w.log.Info("no report followed the registration: attempt queued again",
				attemptFields(e.d.AttemptKey, zap.String("worker", e.worker.id), zap.Uint64("generation", e.gen))...)
			w.requeue(e)
			requeued = true
		}
	}
	if requeued {
		w.pump(&fx)
	}
	if w.queued > 0 && len(w.idle) > 0 {
		// Allowances may have grown, and short attempts waiting for this
		// node's workers may have to go to others now (see waitLocal).
		w.pump(&fx)
	}
	w.orphans(now, &fx)
	if w.queued > 0 {
		alive := w.anyAlive()
		for _, e := range w.queue[w.head:] {
			if e.cancelled || e.noticed || e.worker != nil {
				continue
			}
			msg := ""
			switch {
			case !alive:
				msg = "waiting: no worker offers capability " + w.capability
			case e.d.Node != "" && !w.placeable(e):
				msg = "waiting: pinned to node " + e.d.Node + ", which has no live worker of " + w.capability
			case e.d.Group != "" && !w.placeable(e):
				msg = "waiting: verify runs each attempt on distinct worker nodes, and no other node serving " +
					w.capability + " is available"
			default:
				continue
			}
			e.noticed = true
			fx.progress = append(fx.progress, port.TaskProgress{AttemptKey: e.d.AttemptKey, Message: msg, At: now})
		}
	}
	w.settle()
	w.mu.Unlock()
	w.apply(fx)
}

// alarm applies one rung of the ladder.
func (w *Waggler) alarm(a alarm, fx *effects) {
	e, ok := w.byKey[a.Key]
	if !ok || e.gen != a.Gen || e.worker == nil {
		return
	}
	fields := attemptFields(a.Key, zap.String("worker", a.Worker), zap.Int("missed", a.Missed), zap.Duration("silence", a.Silence))
	switch a.Rung {
	case rungLate:
		w.log.Info("missed a heartbeat", fields...)
	case rungAlert:
		if e.backup == nil {
			if b := w.takeIdle(e); b != nil {
				b.reserved = e
				e.backup = b
			}
		}
		backup := "none free"
		if e.backup != nil {
			backup = e.backup.id
		}
		w.log.Warn("worker silent: backup pre-selected", append(fields, zap.String("backup", backup))...)
	case rungDead:
		w.failover(e, fields, fx)
	}
}

// failover moves an attempt off its dead worker: same attempt, same input,
// new generation, to the backup if one stands by, else to the head of the
// queue.
func (w *Waggler) failover(e *entry, fields []zap.Field, fx *effects) {
	w.setState(StateFailover)
	old := e.worker
	if !old.dead {
		w.markDead(old)
	}
	fx.observe(sentinel.Observation{Node: old.subject, Capability: w.capability, Kind: sentinel.Lost, At: w.clock.Now()})
	fx.cancels = append(fx.cancels, cancelEffect{w: old.w, key: e.d.AttemptKey, gen: e.gen})
	old.entry = nil // busyGen stays: a late report frees (and revives) it
	e.worker = nil
	w.running--
	if e.d.Node != "" {
		// Pinned to its node (on: every_node): it does not move. The
		// attempt fails, and the task's retries and on_failure decide.
		w.mon.stop(e.d.AttemptKey, e.gen)
		w.dropBackup(e)
		w.release(e)
		w.setState(StateDispatching)
		w.log.Warn("worker declared dead: attempt pinned to its node failed", append(fields, zap.String("node", e.d.Node))...)
		w.failPinned(e, fmt.Sprintf("node %s left while running (its worker %s was declared dead)", e.d.Node, old.id), old.id, fx)
		w.pump(fx)
		return
	}
	w.failovers++
	w.m.WorkerFailovers.Inc()
	backup := e.backup
	e.backup = nil
	if backup != nil {
		backup.reserved = nil
	}
	w.setState(StateDispatching)
	if backup != nil && backup.available() {
		w.removeIdle(backup)
		w.assign(e, backup, fx)
	} else {
		if backup != nil {
			w.free(backup)
		}
		w.pushFront(e)
		w.pump(fx)
	}
	to := "queue"
	if e.worker != nil {
		to = e.worker.id
	}
	w.log.Warn("worker declared dead: attempt failed over", append(fields, zap.String("to", to), zap.Uint64("generation", e.gen))...)
}

// markDead takes a worker out of service and releases what it stood by for.
func (w *Waggler) markDead(ww *wagWorker) {
	ww.dead = true
	w.removeIdle(ww)
	if r := ww.reserved; r != nil {
		r.backup = nil
		ww.reserved = nil
	}
}

// markAlive undoes markDead, saying why; the caller frees the worker once
// its slot is free.
func (w *Waggler) markAlive(ww *wagWorker, why string) {
	ww.dead = false
	w.log.Info(why, zap.String("worker", ww.id))
}

// dropBackup releases an attempt's pre-selected backup.
func (w *Waggler) dropBackup(e *entry) {
	if b := e.backup; b != nil {
		e.backup = nil
		b.reserved = nil
		w.free(b)
	}
}

// failPinned reports a failed result for e, an attempt pinned to a node
// that it can no longer run on; the caller released it.
func (w *Waggler) failPinned(e *entry, reason, worker string, fx *effects) {
	now := w.clock.Now()
	w.finish(port.TaskResult{AttemptKey: e.d.AttemptKey, Error: reason, WorkerID: worker, FinishedAt: now}, fx)
}

// orphans fails the queued attempts pinned to a node with no live worker
// of this capability for InheritGrace (its workers did not register, or
// the node left); the others keep waiting.
func (w *Waggler) orphans(now time.Time, fx *effects) {
	if w.pinned == 0 || w.queued == 0 {
		return
	}
	live := map[string]bool{}
	for _, ww := range w.workers {
		if !ww.dead {
			live[ww.node] = true
		}
	}
	for _, e := range w.queue[w.head:] {
		if e.cancelled || e.worker != nil || e.d.Node == "" {
			continue
		}
		switch {
		case live[e.d.Node]:
			e.orphaned = time.Time{}
		case e.orphaned.IsZero():
			e.orphaned = now
		case now.Sub(e.orphaned) >= w.grace:
			w.dropWaiting(e)
			w.release(e)
			w.log.Warn("no worker of the node an attempt is pinned to: it failed", attemptFields(e.d.AttemptKey, zap.String("node", e.d.Node))...)
			w.failPinned(e, fmt.Sprintf("node %s left while running (no worker of it serves %s)", e.d.Node, w.capability), "", fx)
		}
	}
}
