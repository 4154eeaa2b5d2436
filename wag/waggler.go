package wag

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/internal/clock"
	"github.com/robonet/robonet/internal/lifecycle"
	"github.com/robonet/robonet/internal/metrics"
	"github.com/robonet/robonet/sentinel"
	"github.com/robonet/robonet/trust"
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
	Cancel(key port.AttemptKey, generation uint64)
}

// Assignment is one attempt given to one worker. Generation is the
// Waggler's own counter, prefixed with its epoch (epoch<<32 | n), so that
// the generations of successive Wagglers of a capability never collide: a
// failover re-runs the same attempt (same AttemptKey, same input) under a
// new generation, and anything a worker sends about another generation is
// discarded.
type Assignment struct {
	port.TaskDispatch
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
	Key        port.AttemptKey
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
	return WorkerNode(workerID)
}

// SubjectSep separates, in the name of a worker program's pool, the
// subject the program is judged as from the program's own name:
// SUBJECT~NAME (see WorkerSubject).
const SubjectSep = "~"

// WorkerSubject is the trust subject of a worker (package trust): its
// node for the node's own slots (NODE/CAPABILITY/N), the program for the
// slots of a worker program's pool (NODE/CAPABILITY/PROGRAM-N, see
// slotPrefix), named NODE/PROGRAM — or NODE/SUBJECT for a pool named
// SUBJECT~PROGRAM (the node names a program connected with a worker
// token after the token). A Waggler keeps a program's probation, rank,
// quarantine and evidence apart from its node's; what is about the
// machine (node deaths, verified runs on distinct nodes, locality) stays
// the node's.
func WorkerSubject(workerID string) string {
	node, _, slot := ParseWorkerID(workerID)
	if slot == "" || isDigits(slot) {
		return node
	}
	if i := strings.LastIndexByte(slot, '-'); i > 0 && isDigits(slot[i+1:]) {
		slot = slot[:i]
	}
	if subject, _, ok := strings.Cut(slot, SubjectSep); ok && subject != "" {
		slot = subject
	}
	return trust.ProgramSubject(node, slot)
}

func isDigits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// uplink is where a Waggler reports: its host, which forwards to the
// engine leader.
type uplink interface {
	port.ResultSink
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
	subject  string // WorkerSubject(id): node, or NODE/PROGRAM
	dead     bool
	busyGen  uint64 // generation the worker is executing, 0 when free
	entry    *entry // live attempt it runs (nil when free, cancelled or failed over)
	reserved *entry // attempt it stands by for as a pre-selected backup
	idle     bool   // in Waggler.idle: freeing a worker after each report need not scan it
}

// newWagWorker is the worker id as the Waggler knows it, with its node and
// trust subject read from the id once; wk is nil until the worker
// registers (a worker known first from an adopted or inherited attempt).
func newWagWorker(id string, wk Worker) *wagWorker {
	return &wagWorker{w: wk, id: id, node: WorkerNode(id), subject: WorkerSubject(id)}
}

func (ww *wagWorker) available() bool {
	return ww.w != nil && !ww.dead && ww.busyGen == 0 && ww.reserved == nil
}

// entry is one attempt held by the Waggler, queued or running.
type entry struct {
	d         port.TaskDispatch
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
	// orphaned is when a queued attempt pinned to a node (TaskDispatch.Node)
	// was first seen with no live worker of that node; zero otherwise.
	orphaned time.Time
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
	results  []port.TaskResult
	progress []port.TaskProgress
	observed []sentinel.Observation
}

func (fx *effects) observe(o sentinel.Observation) { fx.observed = append(fx.observed, o) }

type runEffect struct {
	w Worker
	a Assignment
}

type cancelEffect struct {
	w   Worker
	key port.AttemptKey
	gen uint64
}

// Waggler coordinates the workers of one capability: it queues attempts,
// hands each to a free worker, watches the worker's sequenced heartbeats on
// the missed-heartbeat ladder, fails the attempt over to a backup worker
// when its worker dies, and forwards exactly one result per finished
// assignment to the engine's sink. It holds no durable state: the engine
// re-dispatches whatever a lost Waggler held.
//
// All methods are safe for concurrent use. They are in four files: this
// one (the type, its lifecycle, its status and the effects applied after
// unlocking), waggler_dispatch.go (attempts in from the engine, queued and
// assigned), waggler_workers.go (workers in: registrations, heartbeats,
// reports, deaths) and waggler_failover.go (the ladder's tick and the
// failover of an attempt to a backup worker).
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
	// quarantined are the nodes and worker programs (trust subjects)
	// whose workers get nothing (under mu).
	quarantined map[string]bool
	// trust, when set, bounds the attempts each subject's workers run at
	// once (Trust.Allowance, cached in allowance for half a heartbeat
	// interval) and is told what the workers do.
	trust     Trust
	allowance map[string]int
	// rank caches Trust.Rank per subject like allowance.
	rank map[string]int
	// busy counts, per node and per worker program (a program's busy
	// workers count for both), the workers executing an attempt (busyGen
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
	life    lifecycle.State // New, Running from start, Stopped from close
	state   WagglerState
	mon     *monitor
	m       *metrics.WagCapability // this capability's series
	queue   []*entry               // FIFO from head; cancelled entries are skipped
	head    int
	queued  int
	running int
	byKey   map[port.AttemptKey]*entry
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
	pinned       int                 // attempts held here pinned to a node (TaskDispatch.Node)
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
		byKey:      make(map[port.AttemptKey]*entry),
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

// Capability is the capability this Waggler coordinates.
func (w *Waggler) Capability() string { return w.capability }

// Epoch is the epoch of this Waggler's assignment.
func (w *Waggler) Epoch() uint64 { return w.epoch }

// start arms the ladder: the monitor ticks every half interval.
func (w *Waggler) start() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.life.Start("wag: waggler") != nil {
		return // running already, or closed: nothing to start
	}
	w.stopTick = w.cb.every(w.clock, w.interval/2, w.tick)
}

// close drops everything queued or running (the engine re-dispatches it
// after a restart), ignores workers from now on, and waits for the ticker.
func (w *Waggler) close() {
	w.mu.Lock()
	if w.life.Stop() == lifecycle.Stopped {
		w.mu.Unlock()
		return
	}
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
func attemptFields(k port.AttemptKey, more ...zap.Field) []zap.Field {
	return append([]zap.Field{
		zap.Stringer("instance", k.InstanceID), // formatted only if logged
		zap.String("task", k.ExecutionID),
		zap.Uint32("attempt", k.Attempt),
	}, more...)
}
