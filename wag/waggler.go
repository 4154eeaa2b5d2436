package wag

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine"
)

// WagglerState is the state of a Waggler (DESIGN §6):
//
//	IDLE → DISPATCHING → MONITORING → COLLECTING → IDLE
//	                        │   ▲
//	                        ▼   │
//	                      FAILOVER → DISPATCHING
//
// A Waggler coordinates many attempts at once, so its state is the state of
// its latest step; see the package doc for the exact rules.
type WagglerState uint8

// Waggler states.
const (
	StateIdle        WagglerState = iota // no attempt queued or running
	StateDispatching                     // attempts wait for a worker, or are being handed to one
	StateMonitoring                      // attempts run; heartbeats are watched
	StateCollecting                      // a result is being collected and forwarded
	StateFailover                        // a worker died; its attempt is being reassigned
)

func (s WagglerState) String() string {
	switch s {
	case StateIdle:
		return "IDLE"
	case StateDispatching:
		return "DISPATCHING"
	case StateMonitoring:
		return "MONITORING"
	case StateCollecting:
		return "COLLECTING"
	case StateFailover:
		return "FAILOVER"
	}
	return fmt.Sprintf("WagglerState(%d)", uint8(s))
}

// Worker is a Waggler's handle on one worker slot: a goroutine of a local
// pool today, a slot of a remote worker behind a gRPC stream with the mesh.
// A worker reports back through the Waggler's Heartbeat and Report. Its
// methods must not block.
type Worker interface {
	// ID names the worker uniquely within its Waggler, e.g.
	// "node-1/code.exec/3".
	ID() string
	// Run starts an assignment; the Waggler gives a worker one at a time.
	Run(a Assignment)
	// Cancel asks the worker to stop an assignment; its report, if any
	// still comes, is discarded.
	Cancel(key engine.AttemptKey, generation uint64)
}

// Assignment is one attempt given to one worker. Generation is the
// Waggler's own counter: a failover re-runs the same attempt (same
// AttemptKey, same input) under a new generation, and anything a worker
// sends about an older generation is discarded.
type Assignment struct {
	engine.TaskDispatch
	Generation uint64
}

// WagglerStatus is a snapshot of a Waggler, for observation.
type WagglerStatus struct {
	Capability     string
	State          WagglerState
	Queued         int    // attempts waiting for a worker
	Running        int    // attempts assigned to a worker
	Workers        int    // workers not declared dead
	Failovers      uint64 // attempts reassigned after their worker died
	ReplaysIgnored uint64 // heartbeats ignored as replays or reorders
}

// Errors of Dispatch.
var (
	// ErrBusy means a capability's queue is full: retry the dispatch later.
	ErrBusy = errors.New("wag: queue full")
	// ErrNotRunning means the Waggler layer is not started or has stopped.
	ErrNotRunning = errors.New("wag: not running")
)

// wagWorker is the Waggler's book-keeping for one worker.
type wagWorker struct {
	w        Worker
	id       string
	dead     bool
	busyGen  uint64 // generation the worker is executing, 0 when free
	entry    *entry // live attempt it runs (nil when free, cancelled or failed over)
	reserved *entry // attempt it stands by for as a pre-selected backup
}

func (ww *wagWorker) available() bool { return !ww.dead && ww.busyGen == 0 && ww.reserved == nil }

// entry is one attempt held by the Waggler, queued or running.
type entry struct {
	d         engine.TaskDispatch
	gen       uint64     // generation of the current assignment, 0 while queued
	worker    *wagWorker // nil while queued
	backup    *wagWorker // pre-selected on the alert rung
	cancelled bool       // removed while queued; skipped by the queue
	noticed   bool       // "waiting: no worker" progress sent
}

// effects are calls a Waggler makes after releasing its lock, so that
// neither the sink nor a worker is ever called with the lock held.
type effects struct {
	runs     []runEffect
	cancels  []cancelEffect
	results  []engine.TaskResult
	progress []engine.TaskProgress
}

type runEffect struct {
	w Worker
	a Assignment
}

type cancelEffect struct {
	w   Worker
	key engine.AttemptKey
	gen uint64
}

// Waggler coordinates the workers of one capability: it queues attempts,
// hands each to a free worker, watches the worker's sequenced heartbeats on
// the missed-heartbeat ladder, fails the attempt over to a backup worker
// when its worker dies, and forwards exactly one result per finished
// assignment to the engine's sink. It holds no durable state: the engine
// re-dispatches whatever a lost Waggler held.
//
// All methods are safe for concurrent use.
type Waggler struct {
	capability string
	name       string
	sink       engine.ResultSink
	clock      Clock
	log        *zap.Logger
	interval   time.Duration
	queueSize  int

	cb       callbacks
	stopTick func()
	// onTransition, when set (tests), sees every state change, lock held.
	onTransition func(from, to WagglerState)

	mu        sync.Mutex
	started   bool
	closed    bool
	state     WagglerState
	mon       *monitor
	queue     []*entry // FIFO from head; cancelled entries are skipped
	head      int
	queued    int
	running   int
	byKey     map[engine.AttemptKey]*entry
	workers   map[string]*wagWorker
	idle      []*wagWorker // available workers, most recently freed last
	nextGen   uint64
	failovers uint64
	stale     uint64 // reports discarded as stale
}

func newWaggler(cfg Config, capability string, log *zap.Logger) *Waggler {
	name := cfg.NodeName + "/" + capability
	return &Waggler{
		capability: capability,
		name:       name,
		sink:       cfg.Sink,
		clock:      cfg.Clock,
		log:        log.With(zap.String("capability", capability), zap.String("waggler", name)),
		interval:   cfg.HeartbeatInterval,
		queueSize:  cfg.QueueSize,
		mon:        newMonitor(cfg.HeartbeatInterval, cfg.MissedHeartbeats),
		byKey:      make(map[engine.AttemptKey]*entry),
		workers:    make(map[string]*wagWorker),
	}
}

// Capability is the capability this Waggler coordinates.
func (w *Waggler) Capability() string { return w.capability }

// start arms the ladder: the monitor ticks every half interval.
func (w *Waggler) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started || w.closed {
		return
	}
	w.started = true
	w.stopTick = w.cb.every(w.clock, w.interval/2, w.tick)
}

// close drops everything queued or running (the engine re-dispatches it
// after a restart), ignores workers from now on, and waits for the ticker.
func (w *Waggler) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.queue, w.head, w.queued, w.running = nil, 0, 0, 0
	clear(w.byKey)
	w.mon = newMonitor(w.interval, w.mon.deadAfter)
	w.setState(StateIdle)
	stop := w.stopTick
	w.mu.Unlock()
	if stop != nil {
		stop()
	}
	w.cb.close()
}

// Status is a snapshot of the Waggler.
func (w *Waggler) Status() WagglerStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	alive := 0
	for _, ww := range w.workers {
		if !ww.dead {
			alive++
		}
	}
	return WagglerStatus{
		Capability:     w.capability,
		State:          w.state,
		Queued:         w.queued,
		Running:        w.running,
		Workers:        alive,
		Failovers:      w.failovers,
		ReplaysIgnored: w.mon.replays,
	}
}

// AddWorker adds a worker. Adding the id of a worker declared dead revives
// it under the new handle (a node that came back); adding a live one is an
// error.
func (w *Waggler) AddWorker(wk Worker) error {
	var fx effects
	w.mu.Lock()
	id := wk.ID()
	if ww, ok := w.workers[id]; ok {
		if !ww.dead {
			w.mu.Unlock()
			return fmt.Errorf("wag: waggler %s already has worker %q", w.name, id)
		}
		ww.w, ww.dead, ww.busyGen, ww.entry = wk, false, 0, nil
		w.log.Info("worker is back", zap.String("worker", id))
		w.free(ww)
	} else {
		ww := &wagWorker{w: wk, id: id}
		w.workers[id] = ww
		w.idle = append(w.idle, ww)
	}
	w.pump(&fx)
	w.settle()
	w.mu.Unlock()
	w.apply(fx)
	return nil
}

// admit checks that n more attempts may be queued.
func (w *Waggler) admit() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrNotRunning
	}
	if w.queued >= w.queueSize {
		return fmt.Errorf("%w: capability %s has %d attempts waiting for a worker (limit %d)", ErrBusy, w.capability, w.queued, w.queueSize)
	}
	return nil
}

// enqueue accepts attempts (duplicates of attempts it holds are ignored:
// dispatch is at-least-once) and hands them to free workers.
func (w *Waggler) enqueue(tasks []engine.TaskDispatch) {
	var fx effects
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	added := 0
	for _, d := range tasks {
		if _, dup := w.byKey[d.AttemptKey]; dup {
			continue
		}
		e := &entry{d: d}
		w.byKey[d.AttemptKey] = e
		w.queue = append(w.queue, e)
		w.queued++
		added++
	}
	if added > 0 {
		w.setState(StateDispatching)
		w.pump(&fx)
		w.settle()
	}
	w.mu.Unlock()
	w.apply(fx)
}

// cancel drops attempts: queued ones leave the queue, running ones are
// cancelled on their worker and their results discarded. Unknown keys are
// ignored.
func (w *Waggler) cancel(keys []engine.AttemptKey) {
	var fx effects
	w.mu.Lock()
	changed := false
	for _, key := range keys {
		e, ok := w.byKey[key]
		if !ok {
			continue
		}
		changed = true
		delete(w.byKey, key)
		e.cancelled = true
		w.dropBackup(e)
		if e.worker == nil {
			w.queued--
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

// Heartbeat takes a heartbeat from a worker. Accepted ones are forwarded to
// the sink as progress; replays, reorders and heartbeats about older
// generations are ignored (replays are counted).
func (w *Waggler) Heartbeat(hb Heartbeat) {
	var fx effects
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	now := w.clock.Now()
	obs := w.mon.observe(hb, now)
	switch obs.Verdict {
	case hbReplay:
		w.log.Debug("heartbeat replayed or reordered: ignored", attemptFields(hb.Key, zap.String("worker", hb.WorkerID), zap.Uint64("seq", hb.Seq))...)
	case hbStale:
		w.log.Debug("heartbeat for an assignment this waggler does not hold: ignored", attemptFields(hb.Key, zap.String("worker", hb.WorkerID), zap.Uint64("generation", hb.Generation))...)
	case hbAccepted:
		e := w.byKey[hb.Key]
		if obs.Gap > 0 {
			w.log.Info("heartbeats missing from the sequence", attemptFields(hb.Key, zap.String("worker", hb.WorkerID), zap.Uint64("seq", hb.Seq), zap.Uint64("missed", obs.Gap))...)
		}
		if obs.Recovered {
			w.log.Info("worker heard from again", attemptFields(hb.Key, zap.String("worker", hb.WorkerID))...)
			if e != nil {
				w.dropBackup(e)
				w.pump(&fx)
			}
		}
		fx.progress = append(fx.progress, engine.TaskProgress{
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
// (cancelled, or failed over to another generation).
func (w *Waggler) Report(r Report) {
	var fx effects
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	ww := w.workers[r.WorkerID]
	e := w.byKey[r.Key]
	current := ww != nil && e != nil && e.worker == ww && e.gen == r.Generation
	if current {
		w.setState(StateCollecting)
		delete(w.byKey, r.Key)
		w.mon.stop(r.Key, e.gen)
		w.dropBackup(e)
		e.worker = nil
		w.running--
		fx.results = append(fx.results, engine.TaskResult{
			AttemptKey: r.Key,
			OK:         r.OK,
			Output:     r.Output,
			Error:      r.Error,
			WorkerID:   r.WorkerID,
			StartedAt:  r.StartedAt,
			FinishedAt: r.FinishedAt,
		})
	} else {
		w.stale++
		w.log.Debug("stale result discarded", attemptFields(r.Key, zap.String("worker", r.WorkerID), zap.Uint64("generation", r.Generation))...)
	}
	if ww != nil && ww.busyGen == r.Generation {
		ww.busyGen, ww.entry = 0, nil
		if ww.dead {
			ww.dead = false
			w.log.Info("worker declared dead reported back: it takes work again", zap.String("worker", ww.id))
		}
		w.free(ww)
	}
	w.pump(&fx)
	w.settle()
	w.mu.Unlock()
	w.apply(fx)
}

// WorkerDead declares a worker dead at once (a memberlist dead event for
// its node), short-cutting the heartbeat ladder: its attempt fails over.
func (w *Waggler) WorkerDead(workerID string) {
	var fx effects
	w.mu.Lock()
	ww, ok := w.workers[workerID]
	if !ok || w.closed || ww.dead {
		w.mu.Unlock()
		return
	}
	w.markDead(ww)
	for _, a := range w.mon.workerDead(workerID, w.clock.Now()) {
		w.alarm(a, &fx)
	}
	w.settle()
	w.mu.Unlock()
	w.apply(fx)
}

// tick runs the ladder and tells the engine about attempts that wait for a
// capability no worker offers.
func (w *Waggler) tick() {
	var fx effects
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	now := w.clock.Now()
	for _, a := range w.mon.tick(now) {
		w.alarm(a, &fx)
	}
	if w.queued > 0 && !w.anyAlive() {
		for _, e := range w.queue[w.head:] {
			if e.cancelled || e.noticed || e.worker != nil {
				continue
			}
			e.noticed = true
			fx.progress = append(fx.progress, engine.TaskProgress{
				AttemptKey: e.d.AttemptKey,
				Message:    "waiting: no worker offers capability " + w.capability,
				At:         now,
			})
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
			if b := w.takeIdle(e.worker); b != nil {
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
	fx.cancels = append(fx.cancels, cancelEffect{w: old.w, key: e.d.AttemptKey, gen: e.gen})
	old.entry = nil // busyGen stays: a late report frees (and revives) it
	e.worker = nil
	w.running--
	w.failovers++
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

// pump hands queued attempts to available workers.
func (w *Waggler) pump(fx *effects) {
	for w.queued > 0 && len(w.idle) > 0 {
		e := w.popQueue()
		ww := w.idle[len(w.idle)-1]
		w.idle = w.idle[:len(w.idle)-1]
		w.setState(StateDispatching)
		w.assign(e, ww, fx)
	}
}

// assign gives an attempt to a worker under a new generation.
func (w *Waggler) assign(e *entry, ww *wagWorker, fx *effects) {
	w.nextGen++
	e.gen = w.nextGen
	e.worker = ww
	ww.busyGen = e.gen
	ww.entry = e
	w.running++
	w.mon.start(e.d.AttemptKey, e.gen, ww.id, w.clock.Now())
	fx.runs = append(fx.runs, runEffect{w: ww.w, a: Assignment{TaskDispatch: e.d, Generation: e.gen}})
}

// settle sets the resting state after a step.
func (w *Waggler) settle() {
	switch {
	case w.queued > 0:
		w.setState(StateDispatching)
	case w.running > 0:
		w.setState(StateMonitoring)
	default:
		w.setState(StateIdle)
	}
}

func (w *Waggler) setState(s WagglerState) {
	if s == w.state {
		return
	}
	if w.onTransition != nil {
		w.onTransition(w.state, s)
	}
	w.state = s
}

// free puts a worker back in the available set if it is.
func (w *Waggler) free(ww *wagWorker) {
	if ww.available() && !slices.Contains(w.idle, ww) {
		w.idle = append(w.idle, ww)
	}
}

// dropBackup releases an attempt's pre-selected backup.
func (w *Waggler) dropBackup(e *entry) {
	if b := e.backup; b != nil {
		e.backup = nil
		b.reserved = nil
		w.free(b)
	}
}

// takeIdle takes an available worker other than not, or nil.
func (w *Waggler) takeIdle(not *wagWorker) *wagWorker {
	for i := len(w.idle) - 1; i >= 0; i-- {
		if ww := w.idle[i]; ww != not {
			w.idle = slices.Delete(w.idle, i, i+1)
			return ww
		}
	}
	return nil
}

func (w *Waggler) removeIdle(ww *wagWorker) {
	if i := slices.Index(w.idle, ww); i >= 0 {
		w.idle = slices.Delete(w.idle, i, i+1)
	}
}

func (w *Waggler) anyAlive() bool {
	for _, ww := range w.workers {
		if !ww.dead {
			return true
		}
	}
	return false
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

// apply makes the calls collected under the lock.
func (w *Waggler) apply(fx effects) {
	for _, c := range fx.cancels {
		c.w.Cancel(c.key, c.gen)
	}
	for _, r := range fx.runs {
		r.w.Run(r.a)
	}
	ctx := context.Background()
	for _, p := range fx.progress {
		w.sink.TaskProgress(ctx, p)
	}
	for _, r := range fx.results {
		w.sink.TaskResult(ctx, r)
	}
}

// attemptFields are the log fields of an attempt.
func attemptFields(k engine.AttemptKey, more ...zap.Field) []zap.Field {
	return append([]zap.Field{
		zap.String("instance", k.InstanceID.String()),
		zap.String("task", k.ExecutionID),
		zap.Uint32("attempt", k.Attempt),
	}, more...)
}
