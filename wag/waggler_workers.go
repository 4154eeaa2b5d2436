package wag

import (
	"fmt"
	"slices"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/sentinel"
)

// setBusy sets the generation ww executes (0: free), counting the busy
// workers of its node and, for a worker program's slot, of the program.
func (w *Waggler) setBusy(ww *wagWorker, gen uint64) {
	switch {
	case ww.busyGen == 0 && gen != 0:
		w.busy[ww.node]++
		if ww.subject != ww.node {
			w.busy[ww.subject]++
		}
	case ww.busyGen != 0 && gen == 0:
		w.unbusy(ww.node)
		if ww.subject != ww.node {
			w.unbusy(ww.subject)
		}
	}
	ww.busyGen = gen
}

func (w *Waggler) unbusy(subject string) {
	if w.busy[subject]--; w.busy[subject] <= 0 {
		delete(w.busy, subject)
	}
}

// AddWorker adds a worker. Adding the id of a worker declared dead revives
// it under the new handle (a node that came back); adding a live one is an
// error.
func (w *Waggler) AddWorker(wk Worker) error {
	var fx effects
	w.mu.Lock()
	err := w.addWorkerLocked(wk)
	if err == nil {
		w.pump(&fx)
		w.settle()
	}
	w.mu.Unlock()
	w.apply(fx)
	return err
}

// addWorkerLocked adds or revives a worker; w.mu held.
func (w *Waggler) addWorkerLocked(wk Worker) error {
	id := wk.ID()
	if workerNode(id) != w.node {
		w.registeredAt = w.clock.Now()
	}
	if ww, ok := w.workers[id]; ok {
		switch {
		case ww.w == nil && !ww.dead:
			// Known from an attempt it runs, or its stream went away and
			// came back: it keeps what it runs.
			ww.w = wk
		case !ww.dead:
			return fmt.Errorf("wag: waggler %s already has worker %q", w.name, id)
		default:
			ww.w, ww.dead, ww.entry = wk, false, nil
			w.setBusy(ww, 0)
			w.log.Info("worker is back", zap.String("worker", id))
		}
		w.free(ww)
		return nil
	}
	ww := newWagWorker(id, wk)
	w.workers[id] = ww
	w.free(ww)
	return nil
}

// Heartbeat takes a heartbeat from a worker. Accepted ones are forwarded to
// the sink as progress; replays, reorders and heartbeats about older
// generations are ignored (replays are counted).
func (w *Waggler) Heartbeat(hb Heartbeat) {
	var fx effects
	w.mu.Lock()
	if w.life.Stopped() {
		w.mu.Unlock()
		return
	}
	now := w.clock.Now()
	obs := w.mon.observe(hb, now)
	switch obs.Verdict {
	case hbReplay:
		w.m.HeartbeatsReplayed.Inc()
		w.log.Debug("heartbeat replayed or reordered: ignored", attemptFields(hb.Key, zap.String("worker", hb.WorkerID), zap.Uint64("seq", hb.Seq))...)
		fx.observe(sentinel.Observation{Node: workerNode(hb.WorkerID), Kind: sentinel.Replay, At: now})
	case hbStale:
		w.log.Debug("heartbeat for an assignment this waggler does not hold: ignored", attemptFields(hb.Key, zap.String("worker", hb.WorkerID), zap.Uint64("generation", hb.Generation))...)
	case hbAccepted:
		w.m.HeartbeatsReceived.Inc()
		e := w.byKey[hb.Key]
		if obs.Gap > 0 {
			w.m.HeartbeatsMissed.Add(float64(obs.Gap))
			w.log.Info("heartbeats missing from the sequence", attemptFields(hb.Key, zap.String("worker", hb.WorkerID), zap.Uint64("seq", hb.Seq), zap.Uint64("missed", obs.Gap))...)
		}
		if obs.Recovered {
			w.log.Info("worker heard from again", attemptFields(hb.Key, zap.String("worker", hb.WorkerID))...)
			if e != nil {
				w.dropBackup(e)
				w.pump(&fx)
			}
		}
		node := workerNode(hb.WorkerID)
		if hb.CPUPercent > 0 {
			fx.observe(sentinel.Observation{Node: node, Kind: sentinel.CPU, Value: hb.CPUPercent, At: now})
		}
		if hb.MemBytes > 0 {
			fx.observe(sentinel.Observation{Node: node, Kind: sentinel.Mem, Value: float64(hb.MemBytes), At: now})
		}
		fx.progress = append(fx.progress, port.TaskProgress{
			AttemptKey: hb.Key,
			WorkerID:   hb.WorkerID,
			Seq:        hb.Seq,
			StepsDone:  hb.Progress.StepsDone,
			StepsTotal: hb.Progress.StepsTotal,
			ETA:        hb.Progress.ETA,
			CPUPercent: hb.CPUPercent,
			MemBytes:   hb.MemBytes,
			Message:    hb.Progress.Message,
			At:         now,
		})
	}
	w.mu.Unlock()
	w.apply(fx)
}

// Report takes a worker's final report on an assignment: the worker is free
// again, and the result goes to the sink unless the assignment is stale
// (cancelled, or failed over to another generation). It returns false only
// when the Waggler is closed: the worker keeps the report for the next one.
func (w *Waggler) Report(r Report) bool {
	var fx effects
	w.mu.Lock()
	if w.life.Stopped() {
		w.mu.Unlock()
		return false
	}
	ww := w.workers[r.WorkerID]
	w.reportLocked(ww, r, &fx)
	w.freeReporter(ww, r.Generation)
	w.pump(&fx)
	w.settle()
	w.mu.Unlock()
	w.apply(fx)
	return true
}

// reportLocked decides what r, from worker ww (nil: unknown here), means
// for its attempt; w.mu held.
func (w *Waggler) reportLocked(ww *wagWorker, r Report, fx *effects) {
	e := w.byKey[r.Key]
	current := ww != nil && e != nil && e.worker == ww && e.gen == r.Generation
	switch {
	case current && r.Cancelled:
		// Stopped by a cancel this Waggler did not send (a predecessor's,
		// reaching a run adopted here): the attempt is not done, so it
		// runs again under a new generation.
		w.log.Warn("current assignment stopped by a cancel not sent here: queued again", attemptFields(r.Key, zap.String("worker", r.WorkerID), zap.Uint64("generation", r.Generation))...)
		w.requeue(e)
	case r.Cancelled:
		// The answer to a cancel: it frees the worker (freeReporter) and
		// is never the attempt's result. The attempt was cancelled by the
		// engine, or moved to another generation whose report is the one
		// awaited.
		w.stale++
		w.log.Debug("report on a cancelled assignment: the worker is free", attemptFields(r.Key, zap.String("worker", r.WorkerID), zap.Uint64("generation", r.Generation))...)
	case current:
		w.complete(ww, e, r, fx)
	case e != nil && !e.cancelled && w.completesEarlier(e, r.Generation):
		// Queued again because its worker registered without it, or held
		// back because a predecessor's worker might run it: the report
		// was on its way all the same.
		w.log.Info("result of an earlier assignment taken", attemptFields(r.Key, zap.String("worker", r.WorkerID), zap.Uint64("generation", r.Generation))...)
		w.completeEarlier(e, r, fx)
	case e == nil && r.Generation>>32 < w.epoch && !w.cancelled.has(r.Key) && !w.finished(r.Key):
		// An assignment of a predecessor Waggler that finished before the
		// leader handed the attempt over (the pool kept the report while
		// it had no Waggler): a completion of the attempt all the same.
		// The engine records one result per attempt; remembering it
		// answers the handoff when it comes.
		w.log.Info("result of a predecessor's assignment taken", attemptFields(r.Key, zap.String("worker", r.WorkerID), zap.Uint64("generation", r.Generation))...)
		w.finish(resultOf(r), fx)
	default:
		w.stale++
		w.log.Debug("stale result discarded", attemptFields(r.Key, zap.String("worker", r.WorkerID), zap.Uint64("generation", r.Generation))...)
	}
}

// complete takes r, the report of e's current assignment, on ww: the
// attempt's result, and evidence for the worker; w.mu held.
func (w *Waggler) complete(ww *wagWorker, e *entry, r Report, fx *effects) {
	now := w.clock.Now()
	w.runs.observe(r.FinishedAt.Sub(r.StartedAt))
	if ww.node == w.node {
		w.localFreed = now
		if !e.assignedAt.IsZero() {
			w.localTurn.observe(now.Sub(e.assignedAt))
		}
	}
	// A completion is the program's evidence, and its node's too: the
	// node carried the work. What goes wrong is the program's alone.
	fx.observe(sentinel.Observation{Node: ww.subject, Capability: w.capability, Kind: sentinel.Completed, At: now})
	if ww.subject != ww.node {
		fx.observe(sentinel.Observation{Node: ww.node, Capability: w.capability, Kind: sentinel.Completed, At: now})
	}
	w.setState(StateCollecting)
	w.release(e)
	w.mon.stop(r.Key, e.gen)
	w.dropBackup(e)
	e.worker = nil
	w.running--
	w.finish(resultOf(r), fx)
}

// completeEarlier takes r, the report of an earlier assignment of e, as
// the attempt's result: a newer assignment of it, if one went out, is
// stopped; w.mu held.
func (w *Waggler) completeEarlier(e *entry, r Report, fx *effects) {
	if nw := e.worker; nw != nil {
		w.mon.stop(r.Key, e.gen)
		w.dropBackup(e)
		nw.entry = nil // busy until it reports the cancel
		fx.cancels = append(fx.cancels, cancelEffect{w: nw.w, key: r.Key, gen: e.gen})
		e.worker = nil
		w.running--
	} else {
		w.dropWaiting(e)
	}
	w.release(e)
	w.finish(resultOf(r), fx)
}

// freeReporter frees ww (nil: none) when the report of generation gen
// answers what it was busy with; a worker declared dead takes work again;
// w.mu held.
func (w *Waggler) freeReporter(ww *wagWorker, gen uint64) {
	if ww != nil && ww.busyGen == gen {
		ww.entry = nil
		w.setBusy(ww, 0)
		if ww.dead {
			w.markAlive(ww, "worker declared dead reported back: it takes work again")
		}
		w.free(ww)
	}
}

// resultOf is the attempt's result that r reports.
func resultOf(r Report) port.TaskResult {
	return port.TaskResult{
		AttemptKey: r.Key, OK: r.OK, Output: r.Output, OutputJSON: r.OutputJSON, Error: r.Error,
		WorkerID: r.WorkerID, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
	}
}

// WorkerDead declares a worker dead at once (a memberlist dead event for
// its node), short-cutting the heartbeat ladder: its attempt fails over.
func (w *Waggler) WorkerDead(workerID string) {
	w.declareDead(func(ww *wagWorker) bool { return ww.id == workerID })
}

// workersOfNodeDead declares the workers of node dead (see WorkerDead).
func (w *Waggler) workersOfNodeDead(node string) {
	w.declareDead(func(ww *wagWorker) bool { return ww.node == node })
}

// declareDead takes the live workers that match out of service, all of
// them first, then fails over what they ran: an attempt never fails over
// to another worker declared dead with its own (one of the same node).
func (w *Waggler) declareDead(match func(*wagWorker) bool) {
	var fx effects
	w.mu.Lock()
	if w.life.Stopped() {
		w.mu.Unlock()
		return
	}
	var ids []string
	for id, ww := range w.workers {
		if !ww.dead && match(ww) {
			w.markDead(ww)
			ids = append(ids, id)
		}
	}
	slices.Sort(ids) // failovers in a stable order
	now := w.clock.Now()
	for _, id := range ids {
		for _, a := range w.mon.workerDead(id, now) {
			w.alarm(a, &fx)
		}
	}
	w.settle()
	w.mu.Unlock()
	w.apply(fx)
}

// workersOfNodeAlive puts back into service the workers of node declared
// dead while idle: memberlist declared the node failed, and it is a member
// again. A node that was only slow refutes the failure, and its pool's
// stream to this Waggler never broke, so it does not register again: its
// idle workers would otherwise stay out of service for as long as the
// stream lives. A worker declared dead while it ran an attempt comes back
// when it reports on it (its slot is free only then), and one whose stream
// went away comes back when its pool registers again.
func (w *Waggler) workersOfNodeAlive(node string) {
	var fx effects
	w.mu.Lock()
	if w.life.Stopped() {
		w.mu.Unlock()
		return
	}
	for _, ww := range w.workers {
		if ww.node == node && ww.dead && ww.busyGen == 0 && ww.w != nil {
			w.markAlive(ww, "the node of a worker declared dead is a member again: the worker takes work again")
			w.free(ww)
		}
	}
	w.pump(&fx)
	w.settle()
	w.mu.Unlock()
	w.apply(fx)
}

// Heartbeats takes a pool's heartbeats of one interval (the Target side of
// an in-process pool).
func (w *Waggler) Heartbeats(hbs []Heartbeat) {
	for _, hb := range hbs {
		w.Heartbeat(hb)
	}
}

// Release implements Target: an in-process Waggler takes reports at once,
// so it keeps none.
func (w *Waggler) Release() []Report { return nil }

// Leave implements Target: the workers are declared dead at once (see
// WorkerDead); registering one again revives it.
func (w *Waggler) Leave(workerIDs []string) {
	for _, id := range workerIDs {
		w.WorkerDead(id)
	}
}

// free puts a worker back in the available set if it is.
func (w *Waggler) free(ww *wagWorker) {
	if ww.available() && !ww.idle {
		w.idle = append(w.idle, ww)
		ww.idle = true
	}
}

// Quarantine sets the nodes and worker programs (NODE/PROGRAM) whose
// workers get no work: what runs there is cancelled on its worker and
// queued again — the same attempt, to run under a new generation
// elsewhere, so the quarantined worker's late result is refused — and
// nothing is assigned there until it is released. The workers are not
// declared dead: they free up when they report the cancel, and work again
// once released.
func (w *Waggler) Quarantine(nodes map[string]bool) {
	var fx effects
	w.mu.Lock()
	if w.life.Stopped() {
		w.mu.Unlock()
		return
	}
	w.quarantined = nodes
	for key, e := range w.byKey {
		if e.worker == nil || !nodes[e.worker.node] && !nodes[e.worker.subject] {
			continue
		}
		old := e.worker
		w.mon.stop(key, e.gen)
		w.dropBackup(e)
		fx.cancels = append(fx.cancels, cancelEffect{w: old.w, key: key, gen: e.gen})
		old.entry = nil // busy until it reports the cancel
		e.worker = nil
		w.running--
		w.failovers++
		w.pushFront(e)
		w.log.Warn("attempt moved off a quarantined node", attemptFields(key, zap.String("worker", old.id))...)
	}
	w.pump(&fx)
	w.settle()
	w.mu.Unlock()
	w.apply(fx)
}

func (w *Waggler) anyAlive() bool {
	for _, ww := range w.workers {
		if !ww.dead {
			return true
		}
	}
	return false
}
