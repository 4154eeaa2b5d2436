package wag

import (
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
)

// Register adds workers (a pool's slots) and adopts what they run: the
// Target side of an in-process pool.
//
// Workers and what they run are taken in one step, so that no attempt is
// handed meanwhile to a worker that turns out to be busy.
func (w *Waggler) Register(workers []Worker, running []Running) {
	var fx effects
	w.mu.Lock()
	if w.life.Stopped() {
		w.mu.Unlock()
		return
	}
	for _, wk := range workers {
		if err := w.addWorkerLocked(wk); err != nil {
			w.log.Debug("worker registered twice", zap.String("worker", wk.ID()))
		}
	}
	w.adoptLocked(running, &fx)
	// A worker lists everything it runs when it registers: an attempt
	// bound to it here (handed over by the leader, or assigned before its
	// stream went away) that it does not list is not running. Either it
	// finished and its report follows the registration (a pool sends the
	// reports it kept right after registering), or it was lost. It stays
	// bound until the next tick at least half an interval from now, so
	// that a report on its way completes it rather than racing a second
	// run, and is queued again then — well before the heartbeat ladder.
	now := w.clock.Now()
	for _, wk := range workers {
		ww := w.workers[wk.ID()]
		if e := ww.entry; e != nil && !runs(running, ww.id, e.d.AttemptKey, e.gen) {
			w.log.Info("a worker registered without an attempt bound to it: queued again unless its report follows",
				attemptFields(e.d.AttemptKey, zap.String("worker", ww.id), zap.Uint64("generation", e.gen))...)
			w.unlisted[e] = unlisted{gen: e.gen, since: now}
		}
	}
	w.pump(&fx)
	w.settle()
	w.mu.Unlock()
	w.apply(fx)
}

// Adopt takes over attempts a worker reports running (it registered with
// this Waggler after its predecessor's loss): they are not run again. An
// attempt this Waggler has queued is taken out of the queue; one it knows
// runs elsewhere is left there, and the worker is told to cancel its copy.
// Each adopted attempt is watched from now on, with a fresh deadline.
func (w *Waggler) Adopt(running []Running) {
	var fx effects
	w.mu.Lock()
	if w.life.Stopped() {
		w.mu.Unlock()
		return
	}
	w.adoptLocked(running, &fx)
	w.pump(&fx)
	w.settle()
	w.mu.Unlock()
	w.apply(fx)
}

// adoptLocked is Adopt with w.mu held; the caller pumps.
func (w *Waggler) adoptLocked(running []Running, fx *effects) {
	now := w.clock.Now()
	for _, r := range running {
		ww := w.workers[r.WorkerID]
		if ww == nil {
			ww = newWagWorker(r.WorkerID, nil)
			w.workers[r.WorkerID] = ww
		}
		key := r.AttemptKey
		if w.cancelled.has(key) || w.finished(key) {
			// Cancelled (the cancel reached this Waggler before the
			// worker did) or finished here already: the copy is stopped.
			w.stopCopy(ww, key, r.Generation, fx)
			continue
		}
		if e, ok := w.byKey[key]; ok {
			switch {
			case e.worker == ww && e.gen == r.Generation:
				continue // inherited with its worker: already bound
			case e.worker != nil:
				w.stopCopy(ww, key, r.Generation, fx)
				continue
			default: // queued or held back here: the worker's copy wins
				w.dropWaiting(e)
			}
		}
		e := &entry{d: r.TaskDispatch, gen: r.Generation, worker: ww}
		w.hold(e)
		w.ranOn(e, ww.node)
		w.removeIdle(ww)
		w.setBusy(ww, r.Generation)
		ww.entry = e
		w.running++
		w.mon.start(key, r.Generation, ww.id, now)
		fx.started = append(fx.started, w.startedOf(e, now))
		w.log.Info("adopted a running attempt", attemptFields(key, zap.String("worker", ww.id), zap.Uint64("generation", r.Generation))...)
	}
}

// stopCopy tells a worker to stop a copy of an attempt that is not its to
// run, and counts it busy until it reports on that copy: no attempt is
// handed to it meanwhile.
func (w *Waggler) stopCopy(ww *wagWorker, key port.AttemptKey, gen uint64, fx *effects) {
	w.removeIdle(ww)
	w.setBusy(ww, gen)
	ww.entry = nil
	if ww.w != nil {
		fx.cancels = append(fx.cancels, cancelEffect{w: ww.w, key: key, gen: gen})
	}
	w.log.Info("a worker runs a copy not its to run: stopped", attemptFields(key, zap.String("worker", ww.id), zap.Uint64("generation", gen))...)
}

// runs reports whether running lists the attempt key under gen on worker.
func runs(running []Running, worker string, key port.AttemptKey, gen uint64) bool {
	for _, r := range running {
		if r.WorkerID == worker && r.AttemptKey == key && r.Generation == gen {
			return true
		}
	}
	return false
}

// requeue takes a running attempt off its worker, which does not run it
// (the worker stays in service), and queues it first; the generation it
// ran under stays acceptable for a report still on its way (prevGen).
func (w *Waggler) requeue(e *entry) {
	ww := e.worker
	w.mon.stop(e.d.AttemptKey, e.gen)
	w.dropBackup(e)
	e.prevGen, e.gen, e.worker = e.gen, 0, nil
	ww.entry = nil
	if g := e.d.Group; g != "" {
		// The run did not run there: its node may take it (unless
		// another run of the group is there).
		node := ww.node
		if !slices.ContainsFunc(w.groups[g], func(o *entry) bool { return o.worker != nil && o.worker.node == node }) {
			delete(w.groupNodes[g], node)
		}
	}
	w.setBusy(ww, 0)
	w.running--
	w.free(ww)
	w.setState(StateDispatching)
	w.pushFront(e)
}

// Inherit takes over attempts of a predecessor Waggler: those known to run
// on a worker are bound to it and wait for its heartbeats — a fresh
// deadline, InheritGrace from now, after which the ladder fails them over
// if the worker stays silent — the others are queued. Attempts already
// held are ignored.
func (w *Waggler) Inherit(handoffs []Handoff) {
	var fx effects
	sv := w.serving(slices.ContainsFunc(handoffs, func(h Handoff) bool { return h.MayRun }))
	w.mu.Lock()
	if w.life.Stopped() {
		w.mu.Unlock()
		return
	}
	now := w.clock.Now()
	queued := false
	for _, h := range handoffs {
		if _, dup := w.byKey[h.AttemptKey]; dup {
			continue
		}
		if r, ok := w.done.get(h.AttemptKey); ok {
			fx.results = append(fx.results, r) // finished here already
			continue
		}
		e := &entry{d: h.TaskDispatch}
		w.hold(e)
		if h.WorkerID != "" && w.nodeDead != nil && w.nodeDead(workerNode(h.WorkerID)) {
			w.log.Info("inherited attempt ran on a failed node: queued", append(attemptFields(h.AttemptKey), zap.String("worker", h.WorkerID))...)
			h.WorkerID = ""
		}
		if h.WorkerID == "" && h.MayRun {
			e.unsure = true
			w.unsure = append(w.unsure, unsureEntry{e: e, until: now.Add(w.grace)})
			w.holding.Store(int32(len(w.unsure)))
			continue
		}
		if h.WorkerID == "" {
			w.queue = append(w.queue, e)
			w.queued++
			queued = true
			continue
		}
		ww := w.workers[h.WorkerID]
		if ww != nil && ww.w != nil {
			// Registered here, and it listed what it runs: not this
			// attempt (else it would be held already). Its report, if it
			// finished, may still be on its way.
			w.log.Info("inherited attempt is not running on its worker (registered here without it): queued", append(attemptFields(h.AttemptKey), zap.String("worker", h.WorkerID))...)
			e.prevGen = h.Generation
			w.queue = append(w.queue, e)
			w.queued++
			queued = true
			continue
		}
		if ww == nil {
			ww = newWagWorker(h.WorkerID, nil)
			w.workers[h.WorkerID] = ww
		}
		w.removeIdle(ww)
		e.gen, e.worker = h.Generation, ww
		w.setBusy(ww, h.Generation)
		ww.entry = e
		w.running++
		w.ranOn(e, ww.node)
		// Judged as if last heard a grace from now: the worker has to
		// learn of this Waggler and register first.
		w.mon.start(h.AttemptKey, h.Generation, ww.id, now.Add(w.grace))
	}
	if w.releaseUnsure(now, sv) || queued {
		w.setState(StateDispatching)
	}
	w.pump(&fx)
	w.settle()
	w.mu.Unlock()
	w.apply(fx)
}

// servingView is which nodes serve a Waggler's capability, as the mesh
// tells it (Config.ServingNodes); known is false when it cannot tell.
type servingView struct {
	nodes []string
	known bool
}

// serving asks for the nodes serving the capability when need is true.
// It is called before w.mu is taken: membership has locks of its own.
func (w *Waggler) serving(need bool) servingView {
	if !need || w.servingNodes == nil {
		return servingView{}
	}
	nodes, known := w.servingNodes(w.capability)
	return servingView{nodes: nodes, known: known}
}

// releaseUnsure queues the attempts held back as maybe running (see
// Waggler.unsure) whose deadline passed, and all of them once every node
// serving the capability (sv) has a worker registered here, another
// node's last at least half an interval ago: a worker running one would
// have listed it, and one that finished it would have sent its report (a
// pool sends the reports it kept right after registering).
func (w *Waggler) releaseUnsure(now time.Time, sv servingView) bool {
	if len(w.unsure) == 0 {
		return false
	}
	all := sv.known && now.Sub(w.registeredAt) >= w.interval/2 && w.registeredFrom(sv.nodes)
	kept := w.unsure[:0]
	released := 0
	for _, u := range w.unsure {
		switch {
		case u.e.cancelled:
			// Cancelled, adopted from a worker that runs it, or completed
			// by the report of a predecessor's worker.
		case all || !now.Before(u.until):
			u.e.unsure = false
			w.queue = append(w.queue, u.e)
			w.queued++
			released++
		default:
			kept = append(kept, u)
		}
	}
	clear(w.unsure[len(kept):])
	w.unsure = kept
	w.holding.Store(int32(len(kept)))
	if released == 0 {
		return false
	}
	why := "every node serving the capability registered without them"
	if !all {
		why = "their grace passed before every node serving the capability registered"
	}
	w.log.Info("attempts a predecessor may have started queued", zap.Int("attempts", released), zap.String("why", why))
	w.setState(StateDispatching)
	return true
}

// registeredFrom reports whether every one of nodes has a worker
// registered here (one the Waggler can reach, not declared dead).
func (w *Waggler) registeredFrom(nodes []string) bool {
	if len(nodes) == 0 {
		return true
	}
	reg := make(map[string]bool, len(nodes))
	for _, ww := range w.workers {
		if ww.w != nil && !ww.dead {
			reg[ww.node] = true
		}
	}
	for _, n := range nodes {
		if !reg[n] {
			return false
		}
	}
	return true
}

// unsureHeld counts the attempts held back as maybe running.
func (w *Waggler) unsureHeld() int {
	n := 0
	for _, u := range w.unsure {
		if !u.e.cancelled {
			n++
		}
	}
	return n
}

// Detach takes workers whose stream went away out of the pool of free
// workers; what they run stays theirs, watched by the ladder, until they
// register again (AddWorker) or are declared dead.
func (w *Waggler) Detach(workerIDs []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, id := range workerIDs {
		if ww := w.workers[id]; ww != nil {
			ww.w = nil
			w.removeIdle(ww)
			if r := ww.reserved; r != nil {
				r.backup = nil
				ww.reserved = nil
			}
		}
	}
}
