package engine

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/value"
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
	timer  clock.Timer
	armed  time.Time // when timer fires; zero: stopped

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
	result   *TaskResult
	progress *TaskProgress
	fn       func(s *shard)
}

// holder is the part of a held instance other goroutines may read: whether
// it is still held, and its state for listings.
type holder struct {
	id    uuid.UUID
	shard *shard
	gone  atomic.Bool
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
func (h *holder) terminal() InstanceState {
	if st, ok := h.state.Load().(InstanceState); ok && st.Terminal() {
		return st
	}
	return ""
}

// instance is one held workflow instance. Only its shard touches it.
type instance struct {
	id        uuid.UUID
	h         *holder
	pe        *planEntry
	g         *graph.Graph // nil when the instance could not be hydrated
	st        instanceState
	createdAt time.Time
	lg        *zap.Logger
	rec       recorded // recorded results not yet replayed (hydration only)

	state graph.State   // last state seen (events, structure changes)
	api   InstanceState // state reported to clients
	// resolvedAny: some attempt's result was applied (or the instance was
	// restored mid-run). Until then a graph that is gathering — every task
	// dispatched — is shown as RUNNING: nothing has been gathered yet.
	resolvedAny bool
	log         *eventLog
	announced   []bool  // per task: its resolution was announced
	started     []int64 // per task: first dispatch (Unix ns)
	finished    []int64 // per task: resolution (Unix ns)
	progress    map[graph.TaskRef]*TaskProgress
	lost        map[graph.TaskRef]int // times an attempt in flight was reported lost
	history     attemptBook           // attempts per execution, for the view (attempts.go)

	// Snapshot amortisation, see settle.
	snapBytes, sinceBytes, sinceCount int
	structural                        bool

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

// ---- timers ----

type timerEntry struct {
	at       time.Time
	inst     *instance
	deadline bool        // the workflow deadline; else a graph timer
	t        graph.Timer // graph timer
}

type timerHeap []timerEntry

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timerEntry)) }
func (h *timerHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = timerEntry{}
	*h = old[:len(old)-1]
	return x
}

// arm points the shard's timer at the earliest entry.
func (s *shard) arm() {
	if len(s.timers) == 0 {
		if !s.armed.IsZero() {
			s.timer.Stop()
			s.armed = time.Time{}
		}
		return
	}
	at := s.timers[0].at
	if s.armed.Equal(at) {
		return
	}
	s.timer.Reset(at.Sub(s.now()))
	s.armed = at
}

// fireDue handles every timer that is due. Timers of instances that left
// are dropped here; the graph ignores timers that no longer apply.
func (s *shard) fireDue() {
	now := s.now()
	for len(s.timers) > 0 && !s.timers[0].at.After(now) {
		te := heap.Pop(&s.timers).(timerEntry)
		inst := te.inst
		if s.insts[inst.id] != inst || inst.finishing {
			continue
		}
		if te.deadline {
			s.deadlineExceeded(inst, now)
			continue
		}
		s.fire(inst, te.t, now)
	}
}

// fire hands a due graph timer to the graph. A timeout that fails an attempt
// is recorded as that attempt's result, so a later hydration replays the
// same failure.
func (s *shard) fire(inst *instance, t graph.Timer, now time.Time) {
	fx := inst.g.Fire(t, now)
	if fx == nil {
		return
	}
	if t.Kind == graph.Timeout {
		info := inst.g.Task(t.Task)
		ar := ActionResult{InstanceID: inst.id, ExecutionID: inst.pe.executionID(t.Task), Attempt: t.Attempt,
			Error: info.Error, FinishedAt: now}
		if p := inst.progress[t.Task]; p != nil && p.Attempt == t.Attempt {
			ar.WorkerID = p.WorkerID // the worker it timed out on, as its last heartbeat said
		}
		s.record(inst, t.Task, ar)
		delete(inst.progress, t.Task)
		s.taskFailedLog(inst, t.Task, t.Attempt, info.Error)
		s.emit(inst, Event{Kind: EventTaskFailed, Task: inst.pe.task(t.Task.Node).GetName(), Index: t.Task.Index,
			Attempt: t.Attempt, Error: info.Error})
		s.resolvedTask(inst, t.Task, now)
	}
	s.process(inst, fx, now)
	s.settle(inst)
}

// ---- hydration ----

// hydrate takes a claimed instance into memory: restore (or start) its
// graph, replay what was recorded, apply a pending cancel request and arm
// its deadline.
func (s *shard) hydrate(c ClaimedInstance, pe *planEntry, perr error, h *holder) {
	if old := s.insts[c.ID]; old != nil { // our lease lapsed and we claimed it again
		s.evict(old, "claimed again after its lease lapsed")
	}
	now := s.now()
	inst := &instance{
		id:        c.ID,
		h:         h,
		pe:        pe,
		createdAt: c.CreatedAt,
		lg:        s.log.With(zap.Stringer("instance", c.ID)),
		api:       StateRunning,
		progress:  make(map[graph.TaskRef]*TaskProgress),
	}
	h.state.Store(StateRunning)
	last, ok := s.lastSeq[c.ID]
	if !ok {
		last = s.e.cfg.Term << 32
	}
	delete(s.lastSeq, c.ID)
	inst.log = newEventLog(s.e.cfg.EventLogSize, last)
	s.insts[c.ID] = inst

	if perr != nil {
		s.failEarly(inst, fmt.Sprintf("cannot load its workflow version: %v", perr))
		return
	}
	st, err := decodeState(c.State)
	if err != nil {
		s.failEarly(inst, fmt.Sprintf("cannot read its stored state: %v", err))
		return
	}
	inst.st = st
	inst.rec = newRecorded(c.Results)
	inst.history.hydrated(pe, c.Results)
	n := pe.plan.NumTasks()
	inst.announced = make([]bool, n)
	inst.started = make([]int64, n)
	inst.finished = make([]int64, n)

	var fx []graph.Effect
	fresh := len(st.graph) == 0
	switch {
	case c.CancelRequested:
		// Cancelled before it ran, or while its previous owner ran it:
		// nothing new is dispatched, and attempts left in flight are
		// cancelled.
		if fresh {
			inst.g = pe.plan.NewGraph(c.ID.String())
		} else if inst.g, err = pe.plan.Restore(c.ID.String(), st.graph); err != nil {
			s.failEarly(inst, fmt.Sprintf("cannot restore its snapshot: %v", err))
			return
		}
		inst.state = inst.g.State()
		inst.cancelReason = "cancelled by request"
		if fx = inst.g.Cancel(now); fx == nil {
			fx = inst.g.Resume(now) // already terminal: Finished again
		}
		fresh = false
	case fresh:
		inputs, err := value.Decode(c.Inputs)
		in, isMap := inputs.(map[string]any)
		if err != nil || (!isMap && inputs != nil) {
			s.failEarly(inst, fmt.Sprintf("cannot read its stored inputs: %v", err))
			return
		}
		inst.g = pe.plan.NewGraph(c.ID.String())
		if fx, err = inst.g.Start(in, now); err != nil {
			s.failEarly(inst, fmt.Sprintf("cannot start: %v", err))
			return
		}
		inst.st.startedAt = now
		// No snapshot for the start: what was stored at submission plus
		// the results recorded later replays it (hydration starts a fresh
		// graph again and replays them), and an instance living past one
		// group commit would otherwise write its row twice.
		if inst.state = inst.g.State(); !inst.state.Terminal() {
			inst.api = inst.clientState()
			inst.h.state.Store(inst.api)
		}
		s.emit(inst, Event{Kind: EventState})
		inst.lg.Info("instance started", zap.String("workflow", pe.info.Name), zap.Uint32("version", pe.info.Version))
	default:
		if inst.g, err = pe.plan.Restore(c.ID.String(), st.graph); err != nil {
			s.failEarly(inst, fmt.Sprintf("cannot restore its snapshot: %v", err))
			return
		}
		inst.state = inst.g.State()
		inst.resolvedAny = true // restored mid-run
		inst.st.graph = nil     // every later snapshot is taken from the graph
		fx = inst.g.Resume(now)
		inst.lg.Info("instance resumed", zap.String("workflow", pe.info.Name), zap.Uint32("version", pe.info.Version),
			zap.Int("recorded_results", len(c.Results)))
	}
	// The snapshot restored is st.graph; it counts as written.
	inst.snapBytes = len(c.State)
	if fresh {
		s.announceRoots(inst, now)
	}
	s.process(inst, fx, now)
	if !fresh {
		s.markResolved(inst, c.Results)
	}
	inst.rec = nil // every recorded attempt still relevant was replayed above

	if !inst.finishing && !st.deadlineAt.IsZero() {
		if now.Before(st.deadlineAt) {
			heap.Push(&s.timers, timerEntry{at: st.deadlineAt, inst: inst, deadline: true})
		} else {
			s.deadlineExceeded(inst, now)
		}
	}
	s.settle(inst)
}

// markResolved marks the tasks a restored instance had resolved as
// announced (watchers get them in a snapshot) and takes their times from
// the recorded results.
func (s *shard) markResolved(inst *instance, results []ActionResult) {
	for node := range inst.announced {
		switch inst.g.Task(graph.Ref(int32(node))).Status {
		case graph.TaskCompleted, graph.TaskFailed, graph.TaskSkipped, graph.TaskCancelled:
			inst.announced[node] = true
		}
	}
	for _, r := range results {
		ref, ok := inst.pe.parseExecution(r.ExecutionID)
		if !ok {
			continue
		}
		if st := unixNanos(r.StartedAt); st != 0 && (inst.started[ref.Node] == 0 || st < inst.started[ref.Node]) {
			inst.started[ref.Node] = st
		}
		if inst.announced[ref.Node] {
			inst.finished[ref.Node] = max(inst.finished[ref.Node], unixNanos(r.FinishedAt))
		}
	}
}

// failEarly fails an instance that cannot run at all (its workflow or state
// cannot be read).
func (s *shard) failEarly(inst *instance, reason string) {
	inst.lg.Error("instance cannot run", zap.String("reason", reason))
	inst.finishing = true
	inst.failReason = reason
	s.fl = append(s.fl, flushItem{inst: inst, completion: &Completion{
		InstanceID: inst.id, Owner: s.e.cfg.Owner, Status: StatusFailed, Error: reason,
	}})
}

// ---- events from the Waggler layer ----

func (s *shard) onResult(r *TaskResult) {
	inst := s.insts[r.InstanceID]
	if inst == nil || inst.finishing || inst.g == nil {
		s.e.ignoreResult(r, "instance not held here")
		return
	}
	ref, ok := inst.pe.parseExecution(r.ExecutionID)
	if !ok {
		s.e.ignoreResult(r, "unknown execution")
		return
	}
	if info := inst.g.Task(ref); info.Status != graph.TaskRunning || info.Attempt != r.Attempt {
		s.e.ignoreResult(r, "attempt not in flight")
		return
	}
	now := s.now()
	if r.Lost {
		if inst.lost == nil {
			inst.lost = make(map[graph.TaskRef]int)
		}
		inst.lost[ref]++
		if n := inst.lost[ref]; n <= MaxLost {
			inst.lg.Info("attempt lost by the Waggler layer; dispatching it again", zap.String("task", r.ExecutionID),
				zap.Uint32("attempt", r.Attempt), zap.Int("times", n), zap.String("reason", r.Error))
			s.process(inst, inst.g.Redispatch(ref, r.Attempt, now), now)
			s.settle(inst)
			return
		}
		// Lost over and over: a failed attempt (the policy decides).
		r.OK, r.Error = false, fmt.Sprintf("lost %d times by the Waggler layer (last: %s)", inst.lost[ref], r.Error)
	}
	delete(inst.lost, ref)
	inst.resolvedAny = true
	ar := ActionResult{InstanceID: inst.id, ExecutionID: r.ExecutionID, Attempt: r.Attempt, WorkerID: r.WorkerID,
		StartedAt: r.StartedAt, FinishedAt: r.FinishedAt}
	var res graph.Result
	if r.OK {
		// The ResultSink contract asks for canonical outputs, and encoding
		// checks that while it walks the value: normalise (a second walk)
		// only when a dispatcher sent something else. A sender that
		// encoded the output already says so with OutputJSON.
		out, enc, err := r.Output, r.OutputJSON, error(nil)
		if enc == nil {
			enc, err = value.Encode(out)
		}
		if err != nil {
			if out, err = value.Normalize(r.Output); err == nil {
				enc, err = value.Encode(out)
			}
		}
		if err != nil {
			ar.Error = "invalid output: " + err.Error()
		} else {
			ar.OK, ar.Output, res.Output = true, enc, out
		}
	} else {
		ar.Error = r.Error
		if ar.Error == "" {
			ar.Error = "failed"
		}
	}
	m := s.e.cfg.Metrics.Capability(inst.pe.task(ref.Node).GetCapability())
	if ar.OK {
		m.Completed.Inc()
	} else {
		m.Failed.Inc()
		res.Err = errors.New(ar.Error)
	}
	if !r.StartedAt.IsZero() && r.FinishedAt.After(r.StartedAt) {
		m.Duration.Observe(r.FinishedAt.Sub(r.StartedAt).Seconds())
	}
	start := time.Now()
	defer func() { s.e.cfg.Metrics.Propagation.Observe(time.Since(start).Seconds()) }()
	fx := inst.g.Complete(ref, r.Attempt, res, now)
	s.record(inst, ref, ar)
	delete(inst.progress, ref)
	name := inst.pe.task(ref.Node).GetName()
	if ar.OK {
		s.emit(inst, Event{Kind: EventTaskCompleted, Task: name, Index: ref.Index, Attempt: r.Attempt, Output: res.Output})
	} else {
		s.taskFailedLog(inst, ref, r.Attempt, ar.Error)
		s.emit(inst, Event{Kind: EventTaskFailed, Task: name, Index: ref.Index, Attempt: r.Attempt, Error: ar.Error})
	}
	s.resolvedTask(inst, ref, now)
	s.process(inst, fx, now)
	s.settle(inst)
}

func (s *shard) onProgress(p *TaskProgress) {
	inst := s.insts[p.InstanceID]
	if inst == nil || inst.finishing || inst.g == nil {
		return
	}
	ref, ok := inst.pe.parseExecution(p.ExecutionID)
	if !ok {
		return
	}
	if info := inst.g.Task(ref); info.Status != graph.TaskRunning || info.Attempt != p.Attempt {
		return
	}
	if cur := inst.progress[ref]; cur != nil && cur.WorkerID == p.WorkerID && p.Seq <= cur.Seq {
		return // a replayed or reordered heartbeat
	}
	cp := *p
	inst.progress[ref] = &cp
	s.emit(inst, Event{Kind: EventTaskProgress, Task: inst.pe.task(ref.Node).GetName(), Index: ref.Index,
		Attempt: p.Attempt, Progress: &cp})
}

// record queues an accepted result of ref for the next group commit.
func (s *shard) record(inst *instance, ref graph.TaskRef, ar ActionResult) {
	s.fl = append(s.fl, flushItem{inst: inst, results: []ActionResult{ar}})
	inst.history.finished(ref, ar)
	inst.sinceCount++
	inst.sinceBytes += resultBytes(ar)
}

func (s *shard) taskFailedLog(inst *instance, ref graph.TaskRef, attempt uint32, reason string) {
	t := inst.pe.task(ref.Node)
	inst.lg.Warn("task attempt failed", zap.String("task", inst.pe.executionID(ref)),
		zap.String("capability", t.GetCapability()), zap.Uint32("attempt", attempt), zap.String("error", reason))
}

// ---- applying effects ----

// process applies the effects of one graph call (replaying recorded
// attempts first during hydration).
func (s *shard) process(inst *instance, fx []graph.Effect, now time.Time) {
	if len(fx) == 0 {
		return
	}
	var replayed int
	s.work, replayed = drive(inst.g, inst.pe, inst.rec, fx, now, s.work, func(e graph.Effect) { s.effect(inst, e, now) })
	inst.sinceBytes += replayed
	if replayed > 0 {
		inst.sinceCount++
	}
}

// effect applies one effect.
func (s *shard) effect(inst *instance, e graph.Effect, now time.Time) {
	pe := inst.pe
	switch e.Kind {
	case graph.Dispatch:
		t := pe.task(e.Task.Node)
		s.e.cfg.Metrics.Capability(t.GetCapability()).Dispatched.Inc()
		key := AttemptKey{InstanceID: inst.id, ExecutionID: pe.executionID(e.Task), Attempt: e.Attempt}
		s.out = append(s.out, outOp{h: inst.h, d: TaskDispatch{
			AttemptKey: key,
			Term:       s.e.cfg.Term,
			Workflow:   pe.info.Name,
			Task:       t.GetName(),
			Index:      e.Task.Index,
			Capability: t.GetCapability(),
			Action:     t.GetAction(),
			Input:      e.Input,
			Timeout:    t.GetTimeout().AsDuration(),
			Verify:     int(t.GetVerify()),
		}})
		if inst.started[e.Task.Node] == 0 {
			inst.started[e.Task.Node] = now.UnixNano()
		}
		inst.history.dispatched(e.Task, now)
		if e.Task.Index == 0 && e.Attempt == 1 {
			inst.structural = true // a spread expanded
		}
		s.emit(inst, Event{Kind: EventTaskStarted, Task: t.GetName(), Index: e.Task.Index, Attempt: e.Attempt})
	case graph.Cancel:
		s.cancelOp(inst, e.Task, e.Attempt)
		delete(inst.progress, e.Task)
		s.emit(inst, Event{Kind: EventTaskCancelled, Task: pe.task(e.Task.Node).GetName(), Index: e.Task.Index, Attempt: e.Attempt})
	case graph.SetTimer:
		heap.Push(&s.timers, timerEntry{at: e.Timer.At, inst: inst, t: e.Timer})
		if e.Timer.Kind == graph.Retry {
			s.e.cfg.Metrics.Capability(pe.task(e.Timer.Task.Node).GetCapability()).Retried.Inc()
			s.emit(inst, Event{Kind: EventTaskRetrying, Task: pe.task(e.Timer.Task.Node).GetName(), Index: e.Timer.Task.Index,
				Attempt: e.Timer.Attempt, RetryAt: e.Timer.At})
		}
	case graph.Finished:
		s.finish(inst, e.State)
	}
}

// resolvedTask announces what a completion or timeout of ref resolved: the
// task itself (a plain task, or a spread whose barrier fired) and, through
// the successor lists, tasks resolved without running (skipped, failed
// guards, empty spreads). O(d) in the tasks it touches.
func (s *shard) resolvedTask(inst *instance, ref graph.TaskRef, now time.Time) {
	if ref.Index < 0 {
		// The attempt's own event said it; mark the task if it resolved.
		switch inst.g.Task(ref).Status {
		case graph.TaskCompleted, graph.TaskFailed:
			inst.announced[ref.Node] = true
			inst.finished[ref.Node] = now.UnixNano()
			s.announceFrom(inst, inst.pe.succ[ref.Node], now)
		}
		return
	}
	s.announceFrom(inst, []int32{ref.Node}, now)
}

// announceRoots announces the roots resolved by Start and what follows.
func (s *shard) announceRoots(inst *instance, now time.Time) {
	var roots []int32
	for node := range inst.announced {
		if len(inst.pe.task(int32(node)).GetNeeds()) == 0 {
			roots = append(roots, int32(node))
		}
	}
	s.announceFrom(inst, roots, now)
}

func (s *shard) announceFrom(inst *instance, nodes []int32, now time.Time) {
	queue := append([]int32(nil), nodes...)
	for len(queue) > 0 {
		node := queue[0]
		queue = queue[1:]
		if inst.announced[node] {
			continue
		}
		info := inst.g.Task(graph.Ref(node))
		ev := Event{Task: inst.pe.task(node).GetName(), Index: -1, Attempt: info.Attempt}
		switch info.Status {
		case graph.TaskCompleted:
			ev.Kind, ev.Output = EventTaskCompleted, info.Output
		case graph.TaskFailed:
			ev.Kind, ev.Error = EventTaskFailed, info.Error
		case graph.TaskSkipped:
			ev.Kind = EventTaskSkipped
		default:
			continue // not resolved: nothing to say, and nothing after it resolved
		}
		inst.announced[node] = true
		inst.finished[node] = now.UnixNano()
		s.emit(inst, ev)
		queue = append(queue, inst.pe.succ[node]...)
	}
}

// emit appends an event to the instance's log.
func (s *shard) emit(inst *instance, ev Event) {
	ev.Time = s.now()
	if ev.Kind == EventState {
		ev.Index = -1
	}
	if ev.State == "" {
		ev.State = inst.api
	}
	inst.log.append(ev)
}

// settle runs after every event of an instance: it reports state changes
// and decides whether to write a snapshot.
//
// Snapshot amortisation: results are durable on their own (hydration
// replays them), so a snapshot only bounds the replay. One is written when
// a spread expanded (its width is not one result), and otherwise once at
// least minSnapshotResults results were recorded since the last snapshot
// and they weigh at least half of it (payload + 32 bytes per result).
// Snapshot sizes then grow geometrically while results accumulate, so the
// bytes written over an instance's life are a small multiple of its final
// snapshot — O(n) for an n-wide spread, where a snapshot per completion
// would be O(n²). Neither the start nor a change of state (RUNNING to
// GATHERING) needs one: replay reproduces both, and an instance that lives
// past a group commit would write its row again for each.
func (s *shard) settle(inst *instance) {
	if inst.finishing {
		return
	}
	if st := inst.g.State(); !st.Terminal() && (st != inst.state || clientState(st, inst.resolvedAny) != inst.api) {
		inst.state = st
		inst.api = inst.clientState()
		inst.h.state.Store(inst.api)
		s.emit(inst, Event{Kind: EventState})
	}
	if inst.structural || (inst.sinceCount >= minSnapshotResults && 2*inst.sinceBytes >= inst.snapBytes) {
		s.snapshot(inst)
	}
}

func (s *shard) snapshot(inst *instance) {
	snap, err := inst.g.Snapshot()
	if err != nil {
		inst.lg.Error("cannot snapshot the instance", zap.Error(err))
		return
	}
	b := inst.st.encode(snap)
	s.fl = append(s.fl, flushItem{inst: inst, state: b})
	inst.snapBytes, inst.sinceBytes, inst.sinceCount, inst.structural = len(b), 0, 0, false
}

// ---- the end of an instance ----

// finish queues the completion of an instance that reached a terminal
// state; it is reported only once it is durable (see completed).
func (s *shard) finish(inst *instance, st graph.State) {
	inst.finishing = true
	c := &Completion{InstanceID: inst.id, Owner: s.e.cfg.Owner}
	switch {
	case inst.failReason != "":
		c.Status, c.Error = StatusFailed, inst.failReason
	case st == graph.Complete:
		out, err := value.Encode(inst.g.Outputs())
		if err != nil {
			c.Status, c.Error = StatusFailed, "encoding the outputs: "+err.Error()
			inst.failReason = c.Error
		} else {
			c.Status, c.Output = StatusComplete, out
		}
	case st == graph.Failed:
		c.Status, c.Error = StatusFailed, inst.g.Err().Error()
	default:
		c.Status, c.Error = StatusCancelled, inst.cancelReason
		if c.Error == "" {
			c.Error = "cancelled"
		}
	}
	if snap, err := inst.g.Snapshot(); err == nil {
		c.State = inst.st.encode(snap)
	} else {
		inst.lg.Error("cannot snapshot the finished instance", zap.Error(err))
	}
	s.fl = append(s.fl, flushItem{inst: inst, completion: c})
}

// completed runs once the completion of inst is durable.
func (s *shard) completed(inst *instance, c *Completion) {
	if s.insts[inst.id] != inst {
		return
	}
	inst.api = statusState(c.Status)
	inst.h.state.Store(inst.api)
	s.e.cfg.Metrics.InstanceFinished(string(c.Status))
	ev := Event{Kind: EventState, Error: c.Error}
	if c.Status == StatusComplete && inst.g != nil {
		ev.Output = inst.g.Outputs()
	}
	s.emit(inst, ev)
	fields := []zap.Field{zap.String("state", string(inst.api))}
	if c.Error != "" {
		fields = append(fields, zap.String("error", c.Error))
	}
	if !inst.st.startedAt.IsZero() {
		fields = append(fields, zap.Duration("duration", s.now().Sub(inst.st.startedAt)))
	}
	inst.lg.Info("instance finished", fields...)
	s.remove(inst)
}

// cancel applies a cancellation (by request) to a held instance.
func (s *shard) cancel(inst *instance, reason string, now time.Time) {
	if inst.finishing || inst.g == nil {
		return
	}
	inst.cancelReason = reason
	s.process(inst, inst.g.Cancel(now), now)
	s.settle(inst)
}

// deadlineExceeded fails an instance whose deadline passed: its in-flight
// attempts are cancelled (graph.Cancel) and the completion says FAILED.
func (s *shard) deadlineExceeded(inst *instance, now time.Time) {
	if inst.finishing || inst.g == nil {
		return
	}
	inst.failReason = fmt.Sprintf("deadline exceeded after %s", inst.st.deadline)
	inst.lg.Warn("instance deadline exceeded", zap.Duration("deadline", inst.st.deadline))
	s.process(inst, inst.g.Cancel(now), now)
	s.settle(inst)
}

// evict drops an instance this engine no longer owns: its in-flight
// attempts are cancelled and nothing more is written or dispatched for it.
func (s *shard) evict(inst *instance, reason string) {
	if s.insts[inst.id] != inst {
		return
	}
	s.e.evictions.Add(1)
	inst.lg.Warn("instance evicted", zap.String("reason", reason))
	for _, a := range s.inFlight(inst) {
		s.cancelOp(inst, a.ref, a.attempt)
	}
	if len(s.lastSeq) > 100_000 { // bound the memory of numbering
		clear(s.lastSeq)
	}
	s.lastSeq[inst.id] = inst.log.last()
	s.remove(inst)
}

// remove forgets an instance. Timer entries may still point at it until
// they fire, so its graph and per-task state are released here.
func (s *shard) remove(inst *instance) {
	delete(s.insts, inst.id)
	inst.g, inst.rec, inst.progress = nil, nil, nil
	inst.announced, inst.started, inst.finished = nil, nil, nil
	inst.h.gone.Store(true)
	inst.log.close()
	s.e.held.CompareAndDelete(inst.id, inst.h)
	s.e.heldCount.Add(-1)
	s.e.wakeClaimer()
}

// cancelOp queues the cancellation of attempt of ref.
func (s *shard) cancelOp(inst *instance, ref graph.TaskRef, attempt uint32) {
	s.out = append(s.out, outOp{h: inst.h, cancel: true, d: TaskDispatch{
		AttemptKey: AttemptKey{InstanceID: inst.id, ExecutionID: inst.pe.executionID(ref), Attempt: attempt},
		Term:       s.e.cfg.Term,
		Capability: inst.pe.task(ref.Node).GetCapability(),
	}})
}

// running is one attempt in flight.
type running struct {
	ref     graph.TaskRef
	attempt uint32
}

// inFlight lists the attempts of inst that are running.
func (s *shard) inFlight(inst *instance) []running {
	out := s.running[:0]
	if inst.g == nil || inst.finishing {
		return out
	}
	for node := range inst.pe.plan.NumTasks() {
		ref := graph.Ref(int32(node))
		info := inst.g.Task(ref)
		switch info.Status {
		case graph.TaskRunning:
			out = append(out, running{ref, info.Attempt})
		case graph.TaskSpreading:
			for i := range info.Width {
				r := graph.TaskRef{Node: int32(node), Index: i}
				if ii := inst.g.Task(r); ii.Status == graph.TaskRunning {
					out = append(out, running{r, ii.Attempt})
				}
			}
		}
	}
	s.running = out[:0]
	return out
}

// shutdown is the shard's part of a graceful Stop: cancel what runs, write
// a last snapshot of every live instance so the next owner replays little,
// and end the loop.
func (s *shard) shutdown() {
	for _, inst := range s.insts {
		if inst.g == nil || inst.finishing {
			continue
		}
		for _, a := range s.inFlight(inst) {
			s.cancelOp(inst, a.ref, a.attempt)
		}
		if inst.sinceCount > 0 || inst.structural {
			s.snapshot(inst)
		}
		inst.log.close()
	}
	s.quit = true
}

// clientState is the state clients see of a live instance (see
// resolvedAny).
func (inst *instance) clientState() InstanceState { return clientState(inst.state, inst.resolvedAny) }

func clientState(st graph.State, resolvedAny bool) InstanceState {
	if st == graph.Gathering && !resolvedAny {
		return StateRunning
	}
	return apiState(st)
}

// apiState maps a graph state to the client-facing one.
func apiState(st graph.State) InstanceState {
	switch st {
	case graph.Pending:
		return StatePending
	case graph.Running:
		return StateRunning
	case graph.Gathering:
		return StateGathering
	case graph.Complete:
		return StateComplete
	case graph.Failed:
		return StateFailed
	default:
		return StateCancelled
	}
}

// statusState maps a Store status to the client-facing state.
func statusState(st InstanceStatus) InstanceState {
	switch st {
	case StatusQueued:
		return StatePending
	case StatusRunning:
		return StateRunning
	case StatusComplete:
		return StateComplete
	case StatusFailed:
		return StateFailed
	default:
		return StateCancelled
	}
}

// minSnapshotResults is the fewest results recorded between two amortised
// snapshots: a small instance replays a few dozen results on hydration
// (microseconds each) rather than rewriting its snapshot as it goes.
const minSnapshotResults = 32
