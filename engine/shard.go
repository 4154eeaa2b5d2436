package engine

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/internal/clock"
)

// A shard is one goroutine that owns a disjoint set of instances (chosen by
// instance id) and everything about them: the graphs, their timers, their
// event logs. Nothing else touches a graph, so graphs need no locks; the
// rest of the engine talks to a shard through its mailbox, and a shard
// talks to the world through the outbox (dispatches and cancels) and the
// flusher (durable writes), each fed once per loop iteration.
type shard struct {
	e     *Engine
	idx   int
	log   *zap.Logger
	inbox *mailbox[shardMsg]
	done  chan struct{} // closed when run returns

	insts  map[uuid.UUID]*instance
	timers timerHeap
	// deadTimers counts the entries of instances that left memory
	// (dropTimers).
	deadTimers int
	timer      clock.Timer
	armed      time.Time // when timer fires; zero: stopped

	// Per-iteration output, handed over at the end of each iteration.
	out []outOp
	fl  []flushItem

	msgs    []shardMsg
	work    []graph.Effect
	running []running
	lastSeq map[uuid.UUID]uint64 // event numbering of instances that left
	quit    bool
}

// shardMsg is one message to a shard: a result, a progress report, or a
// function run on the shard's goroutine.
type shardMsg struct {
	result   *port.TaskResult
	progress *port.TaskProgress
	fn       func(s *shard)
}

// holder is the part of a held instance other goroutines may read: whether
// it is still held, and its state for listings.
type holder struct {
	id    uuid.UUID
	shard *shard
	gone  atomic.Bool
	// heldBack: claimed and not started yet (admission.go).
	heldBack atomic.Bool
	// paused: PauseInstance holds it (views say PAUSED while it is live).
	paused atomic.Bool
	// state is the instance's client-facing state: set by its shard while
	// it runs, and to its terminal state by the flusher as soon as the
	// completion is durable — before the shard hears of it — so that from
	// the commit on every read on this node (gets, lists, new watches)
	// says finished, as the Store does.
	state atomic.Value // InstanceState
	// committing is set while the instance's completion is being written:
	// a channel closed once the write's outcome is known. Readers wait for
	// it (settled), so no read shows the instance running while the Store
	// may already say it finished.
	committing atomic.Pointer[chan struct{}]
}

// settled waits until no completion of the instance is being written.
func (h *holder) settled(ctx context.Context) error {
	p := h.committing.Load()
	if p == nil {
		return nil
	}
	select {
	case <-*p:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// terminal returns the instance's terminal state once its completion is
// durable ("" before).
func (h *holder) terminal() port.InstanceState {
	if st, ok := h.state.Load().(port.InstanceState); ok && st.Terminal() {
		return st
	}
	return ""
}

// instance is one held workflow instance. Only its shard touches it.
type instance struct {
	id        uuid.UUID
	h         *holder
	pe        *planEntry
	g         *graph.Graph  // nil when the instance could not be hydrated
	envelope  instanceState // the stored facts around the snapshot (state.go)
	createdAt time.Time
	lg        *zap.Logger
	rec       recorded // recorded results not yet replayed (hydration only)

	graphState graph.State        // the graph's state last seen
	shown      port.InstanceState // the state clients see (clientState)
	// resolvedAny: some attempt's result was applied (or the instance was
	// restored mid-run). Until then a graph that is gathering — every task
	// dispatched — is shown as RUNNING: nothing has been gathered yet.
	resolvedAny bool
	// gatherMarked: GATHERING was sent to the Store (or the Store had it
	// when the instance was claimed); shown stays RUNNING until it is
	// durable (gathered).
	gatherMarked bool
	log          *eventLog
	announced    []bool  // per task: its resolution was announced
	started      []int64 // per task: first dispatch (Unix ns)
	finished     []int64 // per task: resolution (Unix ns)
	progress     map[graph.TaskRef]*liveProgress
	lost         map[graph.TaskRef]int // times an attempt in flight was reported lost
	history      attemptBook           // attempts per execution, for the view (attempts.go)

	// Snapshot amortisation, see settle.
	snapBytes, sinceBytes, sinceCount int
	structural                        bool
	// joins is the graph's Stats.Joins when settle last looked: a join
	// decided since makes the next snapshot structural.
	joins uint64

	// resuming is set while the instance's hydration dispatches what an
	// earlier engine may have in flight (TaskDispatch.Resumed).
	resuming bool
	// parent is the task attempt that started the instance, when it is a
	// child instance: told of the outcome once it is durable.
	parent *port.ParentRef

	// Waits, signals and pause (waits.go).
	waiting map[string][]waitingAttempt // signal → attempts of wait: {signal} tasks in flight
	signals []port.SignalRecord         // received, not taken by a wait yet, by seq
	// knownSignals are the seqs of the signals received (by a claim or a
	// delivery) in this life: deliveries of one batch may come out of
	// order, and a duplicate is delivered again.
	knownSignals map[int64]struct{}
	wake         int64 // the store's wake counter as last seen (Park.WakeSeen)
	paused       bool
	held         []graph.Effect // dispatches held back by the pause
	heldTimers   []graph.Timer  // timers that fired during the pause
	parkArmed    bool           // a park check is in the timer heap
	parking      bool           // the park is being written: the instance takes nothing more
	parkUntil    time.Time      // when the parked instance is due again (zero: on a wake)
	run          int            // the instance's run (1, then one more per retry)
	timers       int            // entries of this instance in its shard's timer heap

	finishing    bool   // Finished seen; the completion is being written
	failReason   string // overrides the terminal state: FAILED with this error
	cancelReason string
}

func newShard(e *Engine, idx int) *shard {
	return &shard{
		e:       e,
		idx:     idx,
		log:     e.log.With(zap.Int("shard", idx)),
		inbox:   newMailbox[shardMsg](),
		done:    make(chan struct{}),
		insts:   make(map[uuid.UUID]*instance),
		lastSeq: make(map[uuid.UUID]uint64),
	}
}

// send runs fn on the shard's goroutine.
func (s *shard) send(fn func(s *shard)) { s.inbox.push(shardMsg{fn: fn}) }

func (s *shard) now() time.Time { return s.e.cfg.Clock.Now() }

// run is the shard's loop: messages, then due timers, then hand the
// iteration's dispatches and writes over in one go.
func (s *shard) run(ctx context.Context) {
	defer close(s.done)
	s.timer = clock.Idle(s.e.cfg.Clock)
	defer s.timer.Stop()
	for !s.quit {
		select {
		case <-ctx.Done():
			return
		case <-s.inbox.signal:
			s.msgs = s.inbox.take(s.msgs)
			for i := range s.msgs {
				if s.quit {
					break
				}
				s.handle(&s.msgs[i])
			}
		case <-s.timer.C():
			s.armed = time.Time{}
			s.fireDue()
		}
		s.handOver()
		s.arm()
	}
}

func (s *shard) handle(m *shardMsg) {
	switch {
	case m.result != nil:
		s.onResult(m.result)
	case m.progress != nil:
		s.onProgress(m.progress)
	case m.fn != nil:
		m.fn(s)
	}
}

// handOver passes the iteration's output to the outbox and the flusher.
func (s *shard) handOver() {
	if len(s.out) > 0 {
		s.e.outbox.push(s.out)
		clear(s.out)
		s.out = s.out[:0]
	}
	if len(s.fl) > 0 {
		s.e.flusher.push(s.fl)
		clear(s.fl)
		s.fl = s.fl[:0]
	}
}

// clientState is the state clients see of a live instance (see
// resolvedAny).
func (inst *instance) clientState() port.InstanceState {
	return clientState(inst.graphState, inst.resolvedAny)
}

// visibleState is the state a view shows: shown, or GATHERING once the
// flusher made that durable and before the shard heard of it (a list on
// this node reads the holder, and a get must not show less).
func (inst *instance) visibleState() port.InstanceState {
	if inst.shown == port.StateRunning {
		if st, _ := inst.h.state.Load().(port.InstanceState); st == port.StateGathering {
			return st
		}
	}
	return inst.shown
}

func clientState(st graph.State, resolvedAny bool) port.InstanceState {
	if st == graph.Gathering && !resolvedAny {
		return port.StateRunning
	}
	return apiState(st)
}

// apiState maps a graph state to the client-facing one.
func apiState(st graph.State) port.InstanceState {
	switch st {
	case graph.Pending:
		return port.StatePending
	case graph.Running:
		return port.StateRunning
	case graph.Gathering:
		return port.StateGathering
	case graph.Complete:
		return port.StateComplete
	case graph.Failed:
		return port.StateFailed
	default:
		return port.StateCancelled
	}
}

// recordState is a stored instance's client-facing state: its status's,
// PAUSED for a live one paused, and GATHERING for a running one its owner
// recorded so (Progress.Gathering).
func recordState(rec port.InstanceRecord) port.InstanceState {
	if rec.Paused && !rec.Status.Terminal() {
		return port.StatePaused
	}
	if rec.Status == port.StateRunning && rec.Gathering {
		return port.StateGathering
	}
	return rec.Status
}
