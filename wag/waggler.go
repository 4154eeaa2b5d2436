package wag

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/internal/clock"
	"github.com/robonet/robonet/internal/metrics"
	"github.com/robonet/robonet/sentinel"
)

// WagglerState is the state of a Waggler (docs/architecture.md, "Workers
// and Wagglers"):
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

// Worker is a Waggler's handle on one worker slot: a goroutine of a pool on
// this node, or a slot of another node's pool behind its work stream. A
// worker reports back through the Waggler's Heartbeat and Report. Its
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
// Waggler's own counter, prefixed with its epoch (epoch<<32 | n), so that
// the generations of successive Wagglers of a capability never collide: a
// failover re-runs the same attempt (same AttemptKey, same input) under a
// new generation, and anything a worker sends about another generation is
// discarded.
type Assignment struct {
	engine.TaskDispatch
	Generation uint64
}

// Running is an assignment a worker reports it is running when it
// registers with a Waggler — typically a successor, which adopts it instead
// of running it again.
type Running struct {
	Assignment
	WorkerID  string
	StartedAt time.Time
}

// Started says which worker runs an attempt, under which generation. The
// leader's Router keeps it, so that a successor Waggler can be told whose
// heartbeats to wait for, and it is the node and worker of the attempt's
// history.
type Started struct {
	Key        engine.AttemptKey
	Capability string
	Epoch      uint64
	WorkerID   string
	Generation uint64
	At         time.Time
}

// Node is the node of the worker (worker ids are node/capability/slot).
func (s Started) Node() string { return workerNode(s.WorkerID) }

// workerNode is the node part of a worker id.
func workerNode(workerID string) string {
	if i := strings.IndexByte(workerID, '/'); i >= 0 {
		return workerID[:i]
	}
	return workerID
}

// uplink is where a Waggler reports: its host, which forwards to the
// engine leader.
type uplink interface {
	engine.ResultSink
	// TaskStarted reports attempts assigned to workers, a batch at a time.
	TaskStarted(ss []Started)
}

// WagglerStatus is a snapshot of a Waggler, for observation.
type WagglerStatus struct {
	Capability     string
	Epoch          uint64
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
	// ErrTooLarge means an attempt cannot cross to the node it must reach:
	// its message would be larger than that node (or this one) takes. It
	// fails the attempt; sending it again would fail again.
	ErrTooLarge = errors.New("wag: too large for a message")
)

// wagWorker is the Waggler's book-keeping for one worker. w is nil while
// the Waggler knows of the worker only from the attempt it runs (inherited
// from a predecessor) or after its stream went away: such a worker gets no
// new work until it registers.
type wagWorker struct {
	w        Worker
	id       string
	node     string // workerNode(id)
	dead     bool
	busyGen  uint64 // generation the worker is executing, 0 when free
	entry    *entry // live attempt it runs (nil when free, cancelled or failed over)
	reserved *entry // attempt it stands by for as a pre-selected backup
	idle     bool   // in Waggler.idle: freeing a worker after each report need not scan it
}

func (ww *wagWorker) available() bool {
	return ww.w != nil && !ww.dead && ww.busyGen == 0 && ww.reserved == nil
}

// entry is one attempt held by the Waggler, queued or running.
type entry struct {
	d         engine.TaskDispatch
	gen       uint64     // generation of the current assignment, 0 while queued
	worker    *wagWorker // nil while queued
	backup    *wagWorker // pre-selected on the alert rung
	cancelled bool       // removed while queued; skipped by the queue
	// assignedAt is when the current assignment was made here (zero for
	// one adopted or inherited from a predecessor).
	assignedAt time.Time
	noticed    bool // "waiting: no worker" progress sent
	// unsure: held back in Waggler.unsure, not queued (see there).
	unsure bool
	// prevGen is the generation of an assignment that ended without a
	// report while the attempt is queued again: one inherited from a
	// predecessor that its worker, registered here, does not run, or one
	// whose worker registered again without it. Its worker may still hold
	// the report (a pool keeps reports while it has no Waggler); when it
	// arrives it completes the attempt instead of being discarded.
	prevGen uint64
}

// unsureEntry is an attempt held back because it may run on a worker,
// and when it is queued at the latest.
type unsureEntry struct {
	e     *entry
	until time.Time
}

// unlisted is an attempt's assignment that its worker did not list when it
// registered.
type unlisted struct {
	gen   uint64
	since time.Time
}

// effects are calls a Waggler makes after releasing its lock, so that
// neither the sink nor a worker is ever called with the lock held.
type effects struct {
	started  []Started
	runs     []runEffect
	cancels  []cancelEffect
	results  []engine.TaskResult
	progress []engine.TaskProgress
	observed []sentinel.Observation
}

func (fx *effects) observe(o sentinel.Observation) { fx.observed = append(fx.observed, o) }

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
	epoch      uint64
	name       string
	node       string // this Waggler's node
	sink       uplink
	clock      clock.Clock
	log        *zap.Logger
	interval   time.Duration
	queueSize  int
	grace      time.Duration // InheritGrace
	// nodeDead, when set, tells whether memberlist declared a node failed
	// (the host's view): an inherited attempt whose worker ran there is
	// queued at once.
	nodeDead func(node string) bool
	// servingNodes is Config.ServingNodes: which nodes must register
	// before attempts held back as maybe running are queued.
	servingNodes func(capability string) (nodes []string, known bool)
	// quarantined are the nodes whose workers get nothing (under mu).
	quarantined map[string]bool
	// trust, when set, bounds the attempts each node's workers run at
	// once (Trust.Allowance, cached in allowance for half a heartbeat
	// interval) and is told what the workers do.
	trust     Trust
	allowance map[string]int
	// rank caches Trust.Rank per node like allowance.
	rank map[string]int
	// busy counts, per node, the workers executing an attempt (busyGen
	// set), under mu.
	busy map[string]int
	// runs follows how long this capability's attempts run, under mu:
	// short ones stay on this node (see waitLocal). localTurn follows the
	// time from assigning an attempt to one of this node's workers to its
	// report (the run, and the queueing and reporting around it), and
	// localFreed is when one of them last reported.
	runs       runTimes
	localTurn  runTimes
	localFreed time.Time

	cb       callbacks
	stopTick func()
	// onTransition, when set (tests), sees every state change, lock held.
	onTransition func(from, to WagglerState)

	mu      sync.Mutex
	started bool
	closed  bool
	state   WagglerState
	mon     *monitor
	m       *metrics.WagCapability // this capability's series
	queue   []*entry               // FIFO from head; cancelled entries are skipped
	head    int
	queued  int
	running int
	byKey   map[engine.AttemptKey]*entry
	// unlisted are attempts whose worker registered without listing them,
	// with when: the worker finished them (its report follows the
	// registration) or lost them. One not reported by the next tick at
	// least half an interval later is queued again.
	unlisted map[*entry]unlisted
	// unsure are inherited attempts that may run on a worker the leader
	// did not hear of (Handoff.MayRun), each with the time it is queued
	// at the latest. They are neither queued nor running: a worker that
	// registers with one keeps it (adoptLocked), and the rest are queued
	// once every node serving the capability has registered a worker
	// here, or at their deadline (releaseUnsure).
	unsure []unsureEntry
	// holding is len(unsure), read without mu: whether a step has to ask
	// for the serving nodes (before it locks; see serving).
	holding atomic.Int32
	// registeredAt is when a worker of another node last registered (or
	// was added): the reports such a pool kept follow its registration on
	// its stream. This node's pools hand theirs over in the same call.
	registeredAt time.Time
	groups       map[string][]*entry // runs of one verified attempt (TaskDispatch.Group) held here
	// groupNodes are the nodes each group's runs were given to, while the
	// group is held: no node takes two runs of a group, even after the
	// first finished.
	groupNodes map[string]map[string]bool
	workers    map[string]*wagWorker
	idle       []*wagWorker // available workers, most recently freed last
	nextGen    uint64
	failovers  uint64
	stale      uint64 // reports discarded as stale
	// cancelled remembers, for rememberResults, attempts cancelled while
	// this Waggler did not hold them, so that a worker registering one
	// later is told to stop it rather than having it adopted.
	cancelled tombstones
	// done remembers the results this Waggler reported, for
	// rememberResults: a dispatch of an attempt it finished — a new leader
	// dispatching again what its predecessor had in flight, before the
	// result reached it — is answered with the result again instead of
	// running the attempt twice.
	done doneResults
}

func newWaggler(cfg Config, capability string, epoch uint64, sink uplink, log *zap.Logger) *Waggler {
	name := cfg.NodeName + "/" + capability
	return &Waggler{
		capability: capability,
		epoch:      epoch,
		nextGen:    epoch << 32,
		name:       name,
		node:       cfg.NodeName,
		sink:       sink,
		clock:      cfg.Clock,
		log:        log.With(zap.String("capability", capability), zap.String("waggler", name), zap.Uint64("epoch", epoch)),
		interval:   cfg.HeartbeatInterval,
		queueSize:  cfg.QueueSize,
		grace:      cfg.InheritGrace,
		mon:        newMonitor(cfg.HeartbeatInterval, cfg.MissedHeartbeats),
		m:          cfg.Metrics.Capability(capability),
		byKey:      make(map[engine.AttemptKey]*entry),
		unlisted:   make(map[*entry]unlisted),
		groups:     map[string][]*entry{},
		groupNodes: map[string]map[string]bool{},
		workers:    make(map[string]*wagWorker),
		trust:      cfg.Trust,
		allowance:  map[string]int{},
		rank:       map[string]int{},
		busy:       map[string]int{},
	}
}

// setBusy sets the generation ww executes (0: free), counting the busy
// workers of its node.
func (w *Waggler) setBusy(ww *wagWorker, gen uint64) {
	node := ww.node
	switch {
	case ww.busyGen == 0 && gen != 0:
		w.busy[node]++
	case ww.busyGen != 0 && gen == 0:
		if w.busy[node]--; w.busy[node] <= 0 {
			delete(w.busy, node)
		}
	}
	ww.busyGen = gen
}

// Capability is the capability this Waggler coordinates.
func (w *Waggler) Capability() string { return w.capability }

// Epoch is the epoch of this Waggler's assignment.
func (w *Waggler) Epoch() uint64 { return w.epoch }

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
	w.unsure = nil
	w.holding.Store(0)
	clear(w.byKey)
	clear(w.unlisted)
	clear(w.groups)
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
		Epoch:          w.epoch,
		State:          w.state,
		Queued:         w.queued + w.unsureHeld(),
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
	ww := &wagWorker{w: wk, id: id, node: workerNode(id)}
	w.workers[id] = ww
	w.free(ww)
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
func (w *Waggler) finished(key engine.AttemptKey) bool {
	return w.done.has(key)
}

// finish records a result to report: in fx, and in done.
func (w *Waggler) finish(r engine.TaskResult, fx *effects) {
	fx.results = append(fx.results, r)
	w.done.add(r, w.clock.Now())
}

// cancel drops attempts: queued ones leave the queue, running ones are
// cancelled on their worker and their results discarded. Unknown keys are
// ignored.
func (w *Waggler) cancel(keys []engine.AttemptKey) {
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
// (cancelled, or failed over to another generation). It returns false only
// when the Waggler is closed: the worker keeps the report for the next one.
func (w *Waggler) Report(r Report) bool {
	var fx effects
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return false
	}
	ww := w.workers[r.WorkerID]
	e := w.byKey[r.Key]
	current := ww != nil && e != nil && e.worker == ww && e.gen == r.Generation
	res := engine.TaskResult{
		AttemptKey: r.Key, OK: r.OK, Output: r.Output, OutputJSON: r.OutputJSON, Error: r.Error,
		WorkerID: r.WorkerID, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
	}
	switch {
	case current && r.Cancelled:
		// Stopped by a cancel this Waggler did not send (a predecessor's,
		// reaching a run adopted here): the attempt is not done, so it
		// runs again under a new generation.
		w.log.Warn("current assignment stopped by a cancel not sent here: queued again", attemptFields(r.Key, zap.String("worker", r.WorkerID), zap.Uint64("generation", r.Generation))...)
		w.requeue(e)
	case r.Cancelled:
		// The answer to a cancel: it frees the worker (below) and is never
		// the attempt's result. The attempt was cancelled by the engine,
		// or moved to another generation whose report is the one awaited.
		w.stale++
		w.log.Debug("report on a cancelled assignment: the worker is free", attemptFields(r.Key, zap.String("worker", r.WorkerID), zap.Uint64("generation", r.Generation))...)
	case current:
		now := w.clock.Now()
		w.runs.observe(r.FinishedAt.Sub(r.StartedAt))
		if ww.node == w.node {
			w.localFreed = now
			if !e.assignedAt.IsZero() {
				w.localTurn.observe(now.Sub(e.assignedAt))
			}
		}
		fx.observe(sentinel.Observation{Node: ww.node, Capability: w.capability, Kind: sentinel.Completed, At: now})
		w.setState(StateCollecting)
		w.release(e)
		w.mon.stop(r.Key, e.gen)
		w.dropBackup(e)
		e.worker = nil
		w.running--
		w.finish(res, &fx)
	case e != nil && !e.cancelled && w.completesEarlier(e, r.Generation):
		// Queued again because its worker registered without it, or held
		// back because a predecessor's worker might run it: the report
		// was on its way all the same. It completes the attempt, and a
		// new assignment of it, if one went out, is stopped.
		w.log.Info("result of an earlier assignment taken", attemptFields(r.Key, zap.String("worker", r.WorkerID), zap.Uint64("generation", r.Generation))...)
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
		w.finish(res, &fx)
	case e == nil && r.Generation>>32 < w.epoch && !w.cancelled.has(r.Key) && !w.finished(r.Key):
		// An assignment of a predecessor Waggler that finished before the
		// leader handed the attempt over (the pool kept the report while
		// it had no Waggler): a completion of the attempt all the same.
		// The engine records one result per attempt; remembering it
		// answers the handoff when it comes.
		w.log.Info("result of a predecessor's assignment taken", attemptFields(r.Key, zap.String("worker", r.WorkerID), zap.Uint64("generation", r.Generation))...)
		w.finish(res, &fx)
	default:
		w.stale++
		w.log.Debug("stale result discarded", attemptFields(r.Key, zap.String("worker", r.WorkerID), zap.Uint64("generation", r.Generation))...)
	}
	if ww != nil && ww.busyGen == r.Generation {
		ww.entry = nil
		w.setBusy(ww, 0)
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
	return true
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
	if w.closed {
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
	if w.closed {
		w.mu.Unlock()
		return
	}
	for _, ww := range w.workers {
		if ww.node == node && ww.dead && ww.busyGen == 0 && ww.w != nil {
			ww.dead = false
			w.log.Info("the node of a worker declared dead is a member again: the worker takes work again", zap.String("worker", ww.id))
			w.free(ww)
		}
	}
	w.pump(&fx)
	w.settle()
	w.mu.Unlock()
	w.apply(fx)
}

// tick runs the ladder and tells the engine about attempts that wait for a
// capability no worker offers.
func (w *Waggler) tick() {
	var fx effects
	sv := w.serving(w.holding.Load() > 0)
	w.mu.Lock()
	if w.closed {
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
			case e.d.Group != "" && !w.placeable(e):
				msg = "waiting: verify runs each attempt on distinct worker nodes, and no other node serving " +
					w.capability + " is available"
			default:
				continue
			}
			e.noticed = true
			fx.progress = append(fx.progress, engine.TaskProgress{AttemptKey: e.d.AttemptKey, Message: msg, At: now})
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
	fx.observe(sentinel.Observation{Node: old.node, Capability: w.capability, Kind: sentinel.Lost, At: w.clock.Now()})
	fx.cancels = append(fx.cancels, cancelEffect{w: old.w, key: e.d.AttemptKey, gen: e.gen})
	old.entry = nil // busyGen stays: a late report frees (and revives) it
	e.worker = nil
	w.running--
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
	plainBlocked := false
	for w.queued > 0 && len(w.idle) > 0 {
		if plainBlocked && len(w.groups) == 0 {
			break
		}
		e := w.popQueue()
		if plainBlocked && e.d.Group == "" {
			held = append(held, e)
			continue
		}
		i := w.pickIdle(e)
		if i < 0 {
			plainBlocked = plainBlocked || e.d.Group == ""
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
	w.byKey[e.d.AttemptKey] = e
	if g := e.d.Group; g != "" {
		w.groups[g] = append(w.groups[g], e)
	}
}

func (w *Waggler) release(e *entry) {
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
	fx.observe(sentinel.Observation{Node: ww.node, Capability: w.capability, Kind: sentinel.Accepted, At: now})
	w.mon.start(e.d.AttemptKey, e.gen, ww.id, now)
	fx.runs = append(fx.runs, runEffect{w: ww.w, a: Assignment{TaskDispatch: e.d, Generation: e.gen}})
	fx.started = append(fx.started, w.startedOf(e, now))
}

func (w *Waggler) startedOf(e *entry, now time.Time) Started {
	return Started{Key: e.d.AttemptKey, Capability: w.capability, Epoch: w.epoch, WorkerID: e.worker.id, Generation: e.gen, At: now}
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
	if ww.available() && !ww.idle {
		w.idle = append(w.idle, ww)
		ww.idle = true
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
// Quarantine sets the nodes whose workers get no work: what runs there is
// cancelled on its worker and queued again — the same attempt, to run
// under a new generation elsewhere, so the quarantined worker's late
// result is refused — and nothing is assigned there until the node is
// released. The workers are not declared dead: they free up when they
// report the cancel, and work again once released.
func (w *Waggler) Quarantine(nodes map[string]bool) {
	var fx effects
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.quarantined = nodes
	for key, e := range w.byKey {
		if e.worker == nil || !nodes[e.worker.node] {
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
		if c.w != nil {
			c.w.Cancel(c.key, c.gen)
		}
	}
	for _, r := range fx.runs {
		r.w.Run(r.a)
	}
	if len(fx.started) > 0 {
		w.sink.TaskStarted(fx.started)
	}
	ctx := context.Background()
	for _, p := range fx.progress {
		w.sink.TaskProgress(ctx, p)
	}
	for _, r := range fx.results {
		w.sink.TaskResult(ctx, r)
	}
	if w.trust != nil {
		for _, o := range fx.observed {
			w.trust.Observe(o)
		}
	}
}

// attemptFields are the log fields of an attempt.
func attemptFields(k engine.AttemptKey, more ...zap.Field) []zap.Field {
	return append([]zap.Field{
		zap.Stringer("instance", k.InstanceID), // formatted only if logged
		zap.String("task", k.ExecutionID),
		zap.Uint32("attempt", k.Attempt),
	}, more...)
}
