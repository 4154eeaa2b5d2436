package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/value"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Operations on an instance's life beyond submit and cancel: signals,
// events that start workflows, retry from the failed step, pause and
// resume (docs/workflows.md; the shard's side is in waits.go). Each is
// recorded in the Store before it is applied, like a cancel: applied at
// once when this engine holds the instance, and otherwise by its owner,
// or the next, when the instance is claimed — every one of them makes the
// instance due at once.

// SignalInstance records a signal for a live instance and delivers it to
// the wait that takes it — now, if one of the instance's tasks is waiting
// for it, or when one reaches its wait. A finished instance fails with
// ErrInstanceFinished, an unknown one with ErrNotFound, a name no task of
// the workflow waits for with ErrUnknownSignal, and an instance holding
// Config.MaxPendingSignals signals no wait took with ErrTooManySignals. The
// same idempotency key twice delivers once (Duplicate).
func (e *Engine) SignalInstance(ctx context.Context, req SignalRequest) (SignalResult, error) {
	what := fmt.Sprintf("signal %s to instance %s", req.Name, req.InstanceID)
	rec, pe, err := e.q.record(ctx, req.InstanceID)
	if err != nil {
		return SignalResult{}, fmt.Errorf("%s: %w", what, err)
	}
	if rec.Status.Terminal() {
		return SignalResult{}, fmt.Errorf("%s: it is already %s: %w", what, rec.Status, ErrInstanceFinished)
	}
	if waits := pe.waitSignals; !slices.Contains(waits, req.Name) {
		hint := "its workflow has no wait: {signal: …} task"
		if len(waits) > 0 {
			hint = "its workflow waits for " + strings.Join(waits, ", ")
		}
		return SignalResult{}, fmt.Errorf("%s: %s %s v%d: %w", what, hint, pe.info.Name, pe.info.Version, ErrUnknownSignal)
	}
	payload := req.Payload
	if len(payload) == 0 {
		payload = []byte("null")
	}
	out, err := e.signals.record(e.cfg.Store, port.NewSignal{InstanceID: req.InstanceID, Name: req.Name,
		Payload: payload, IdempotencyKey: req.IdempotencyKey, MaxPending: e.cfg.MaxPendingSignals})
	if err == nil {
		err = out.Err
	}
	sig, wake, existing := out.Record, out.Wake, out.Existing
	switch {
	case errors.Is(err, port.ErrTooManySignals):
		return SignalResult{}, fmt.Errorf("%s: it holds %d signals no wait took yet, the pending-signals limit: %w",
			what, e.cfg.MaxPendingSignals, err)
	case errors.Is(err, port.ErrNotFound):
		if r, gerr := e.cfg.Store.GetInstance(ctx, req.InstanceID); gerr == nil && r.Status.Terminal() {
			return SignalResult{}, fmt.Errorf("%s: it is already %s: %w", what, r.Status, ErrInstanceFinished)
		}
		return SignalResult{}, fmt.Errorf("%s: %w", what, err)
	case err != nil:
		return SignalResult{}, fmt.Errorf("%s: %w", what, err)
	}
	res := SignalResult{Seq: sig.Seq, Duplicate: existing}
	if sig.Consumed {
		return res, nil
	}
	// Recorded. Delivered now if held here (a duplicate too: the first
	// sender may have died between its record and its delivery; the shard
	// knows each signal once); otherwise the claim that the record made
	// due brings it.
	delivered := make(chan bool, 1)
	// An error here is the caller's context ending while the shard had
	// not run the delivery yet: the signal is recorded, so the claim that
	// the record made due (or the shard, later) delivers it.
	ok, _ := e.onShard(ctx, req.InstanceID, func(s *shard, inst *instance) {
		delivered <- s.receiveSignal(inst, sig, wake)
	})
	if ok {
		res.Delivered = <-delivered && !existing
	} else {
		e.wakeClaimer()
	}
	return res, nil
}

// PauseInstance pauses a live instance: no new attempt of it is
// dispatched (attempts in flight finish and are recorded) and the timers
// that fire are held until ResumeInstance. It shows PAUSED; a cancel still
// works. Pausing a paused instance is a no-op.
func (e *Engine) PauseInstance(ctx context.Context, id uuid.UUID) error {
	return e.setInstancePaused(ctx, id, true)
}

// ResumeInstance ends a pause: what it held back is dispatched and the
// timers it held fire. Resuming an instance that is not paused is a no-op.
func (e *Engine) ResumeInstance(ctx context.Context, id uuid.UUID) error {
	return e.setInstancePaused(ctx, id, false)
}

func (e *Engine) setInstancePaused(ctx context.Context, id uuid.UUID, paused bool) error {
	verb := "resume"
	if paused {
		verb = "pause"
	}
	wake, err := e.cfg.Store.SetPaused(ctx, id, paused)
	if err != nil {
		if errors.Is(err, port.ErrNotFound) {
			if rec, gerr := e.cfg.Store.GetInstance(ctx, id); gerr == nil && rec.Status.Terminal() {
				return fmt.Errorf("%s instance %s: it is already %s: %w", verb, id, rec.Status, ErrInstanceFinished)
			}
			return fmt.Errorf("%s instance %s: no such instance: %w", verb, id, port.ErrNotFound)
		}
		return fmt.Errorf("%s instance %s: %w", verb, id, err)
	}
	// As for a signal: the change is recorded, and an instance the shard
	// did not reach is claimed with it.
	ok, _ := e.onShard(ctx, id, func(s *shard, inst *instance) {
		if paused {
			s.pause(inst, wake)
		} else {
			s.resume(inst, wake)
		}
	})
	if !ok {
		e.wakeClaimer()
	}
	return nil
}

// RetryInstance takes a FAILED or CANCELLED instance back to RUNNING, in
// place: its failed, cancelled and skipped tasks, and every task downstream
// of them (or of from, when set), run again with new attempts; completed
// tasks keep their recorded outputs and do not run. The instance keeps its
// id, its history keeps both runs (a task's attempts go on numbering from
// where they were), and its deadline, if it had one, starts again. A live
// instance fails with ErrInstanceLive, a completed one with
// ErrNotRetryable.
func (e *Engine) RetryInstance(ctx context.Context, id uuid.UUID, from string) (RetryResult, error) {
	what := fmt.Sprintf("retry instance %s", id)
	if from != "" {
		what += " from " + from
	}
	rec, pe, err := e.q.record(ctx, id)
	if err != nil {
		return RetryResult{}, fmt.Errorf("%s: %w", what, err)
	}
	switch {
	case !rec.Status.Terminal():
		return RetryResult{}, fmt.Errorf("%s: it is %s; wait for it to finish, or cancel it first: %w", what, recordState(rec), port.ErrInstanceLive)
	case rec.Status == port.StateComplete:
		return RetryResult{}, fmt.Errorf("%s: %w (submit it again to run it anew)", what, port.ErrNotRetryable)
	}
	var fromNode int32 = -1
	if from != "" {
		n, ok := pe.plan.Lookup(from)
		if !ok {
			return RetryResult{}, fmt.Errorf("%s: workflow %s v%d has no task %q (its tasks: %s): %w", what,
				pe.info.Name, pe.info.Version, from, strings.Join(pe.taskNames(), ", "), port.ErrInvalidArgument)
		}
		fromNode = n
	}
	hist, err := e.cfg.Store.TaskHistory(ctx, id)
	if err != nil {
		return RetryResult{}, fmt.Errorf("%s: %w", what, err)
	}
	st, err := decodeState(rec.State)
	if err != nil {
		return RetryResult{}, fmt.Errorf("%s: %w", what, err)
	}
	inputs, err := value.Decode(rec.Inputs)
	in, _ := inputs.(map[string]any)
	if err != nil {
		return RetryResult{}, fmt.Errorf("%s: its stored inputs do not decode: %w", what, err)
	}
	now := e.cfg.Clock.Now()
	ended := e.endedGraph(pe, id, st, in, hist, now)
	rerun := rerunSet(pe, ended, fromNode)
	g, err := e.retryGraph(pe, id, st, in, hist, ended, rerun, now)
	if err != nil {
		return RetryResult{}, fmt.Errorf("%s: %w", what, err)
	}
	snap, err := g.Snapshot()
	if err != nil {
		return RetryResult{}, fmt.Errorf("%s: %w", what, err)
	}
	if st.deadline > 0 {
		st.deadlineAt = now.Add(st.deadline)
	}
	st.startedAt = time.Time{}
	re, err := e.cfg.Store.ReopenInstance(ctx, port.ReopenRequest{ID: id, State: st.encode(snap),
		Partition: port.PartitionOf(id, e.cfg.PartitionCount)})
	if err != nil {
		return RetryResult{}, fmt.Errorf("%s: %w", what, err)
	}
	e.wakeClaimer()
	names := make([]string, 0, len(rerun))
	for _, n := range rerun {
		names = append(names, pe.task(n).GetName())
	}
	slices.Sort(names)
	return RetryResult{Run: re.Run, Tasks: names}, nil
}

// rerunSet is what a retry runs again: every task that did not complete
// in the run that ended (failed, cancelled, skipped, never reached), the
// task from if set, and everything downstream of those. ended nil (the
// run that ended cannot be rebuilt) runs everything again.
func rerunSet(pe *planEntry, ended *graph.Graph, from int32) []int32 {
	var seeds []int32
	for node := range pe.plan.NumTasks() {
		if ended == nil || ended.Task(graph.Ref(int32(node))).Status != graph.TaskCompleted {
			seeds = append(seeds, int32(node))
		}
	}
	if from >= 0 {
		seeds = append(seeds, from)
	}
	return pe.plan.Downstream(seeds)
}

// lastAttempt is the highest attempt a task (any of its spread elements or
// iterations) dispatched in the graph of a run.
func lastAttempt(g *graph.Graph, node int32) uint32 {
	info := g.Task(graph.Ref(node))
	last := info.Attempt
	for i := int32(0); i < max(info.Width, info.Iterations); i++ {
		last = max(last, g.Task(graph.TaskRef{Node: node, Index: i}).Attempt)
	}
	return last
}

// endedGraph is the graph of the run that ended: its final snapshot, or,
// when it has none (it failed before it could run), its recorded results
// replayed on a fresh start. nil when neither can be had: everything runs
// again.
func (e *Engine) endedGraph(pe *planEntry, id uuid.UUID, st instanceState, in map[string]any, hist []port.ActionResult, now time.Time) *graph.Graph {
	if len(st.graph) > 0 {
		if g, err := pe.plan.Restore(id.String(), st.graph); err == nil {
			return g
		}
	}
	g := pe.plan.NewGraph(id.String())
	g.SetDepth(st.depth)
	fx, err := g.Start(in, now)
	if err != nil {
		return nil
	}
	drive(g, pe, newRecorded(hist), fx, now, nil, e.cfg.Dispatcher.Nodes, func(graph.Effect) {})
	return g
}

// retryGraph builds the new run's graph: a fresh start whose tasks outside
// rerun are answered by their recorded results (they completed), and whose
// tasks in rerun number their attempts on from the last recorded one.
func (e *Engine) retryGraph(pe *planEntry, id uuid.UUID, st instanceState, in map[string]any, hist []port.ActionResult,
	ended *graph.Graph, rerun []int32, now time.Time) (*graph.Graph, error) {
	again := make(map[int32]bool, len(rerun))
	base := make(map[int32]uint32, len(rerun))
	for _, n := range rerun {
		again[n] = true
		if ended != nil {
			// Attempts dispatched and never recorded (cancelled in
			// flight) count too: a new attempt never reuses a key.
			base[n] = lastAttempt(ended, n)
		}
	}
	var kept []port.ActionResult
	for _, r := range hist {
		ref, ok := pe.parseExecution(r.ExecutionID)
		if !ok {
			continue
		}
		if again[ref.Node] {
			base[ref.Node] = max(base[ref.Node], r.Attempt)
		} else {
			kept = append(kept, r)
		}
	}
	g := pe.plan.NewGraph(id.String())
	g.SetDepth(st.depth)
	for n, b := range base {
		g.SetAttemptBase(n, b)
	}
	fx, err := g.Start(in, now)
	if err != nil {
		return nil, fmt.Errorf("its inputs no longer bind: %w", err)
	}
	// What the replay would dispatch now is dropped: the claim that takes
	// the instance resumes the graph, which dispatches it then.
	drive(g, pe, newRecorded(kept), fx, now, nil, e.cfg.Dispatcher.Nodes, func(graph.Effect) {})
	return g, nil
}

// Events.

// triggerTTL bounds how stale the map of triggered workflows may be: a
// workflow registered on another server starts taking events within it.
const triggerTTL = time.Second

// triggers caches which workflows (their latest versions) an event starts.
type triggers struct {
	mu sync.Mutex
	at time.Time
	by map[string][]triggered
}

type triggered struct {
	name    string
	version uint32
}

// forget drops the cache: a workflow was registered here.
func (t *triggers) forget() {
	t.mu.Lock()
	t.at = time.Time{}
	t.mu.Unlock()
}

// maxTriggerScan bounds the workflow versions read to find the triggered
// ones (docs/limits.md).
const maxTriggerScan = 10_000

// triggeredBy returns the latest versions of the workflows whose trigger
// lists event.
func (e *Engine) triggeredBy(ctx context.Context, event string) ([]triggered, error) {
	t := &e.triggers
	t.mu.Lock()
	defer t.mu.Unlock()
	now := e.cfg.Clock.Now()
	if t.by == nil || now.Sub(t.at) >= triggerTTL {
		wfs, err := e.cfg.Store.ListWorkflows(ctx, port.WorkflowFilter{Limit: maxTriggerScan})
		if err != nil {
			return nil, err
		}
		by := make(map[string][]triggered)
		seen := make(map[string]bool)
		for _, wfv := range wfs { // newest first within a name
			if seen[wfv.Name] {
				continue
			}
			seen[wfv.Name] = true
			var wf robonetv1.Workflow
			if proto.Unmarshal(wfv.IR, &wf) != nil {
				continue
			}
			for _, ev := range wf.GetTrigger().GetEvents() {
				by[ev] = append(by[ev], triggered{name: wfv.Name, version: wfv.Version})
			}
		}
		t.by, t.at = by, now
	}
	return t.by[event], nil
}

// PublishEvent starts an instance of every workflow whose latest version
// lists the event in its trigger, with the payload as its event input. With
// an idempotency key, each workflow gets one instance per key however many
// times the event is published — across a failover between the publish
// and the start too: the key is the instance's idempotency key, kept by
// the store. Workflows registered on another server take events within a
// second. The instances that did start are returned with an error naming
// the workflows that could not.
func (e *Engine) PublishEvent(ctx context.Context, req EventRequest) (EventResult, error) {
	what := "publish event " + req.Name
	wfs, err := e.triggeredBy(ctx, req.Name)
	if err != nil {
		return EventResult{}, fmt.Errorf("%s: %w", what, err)
	}
	payload := any(nil)
	if len(req.Payload) > 0 {
		if payload, err = value.Decode(req.Payload); err != nil {
			return EventResult{}, fmt.Errorf("%s: the payload is not JSON (%w): %w", what, err, port.ErrInvalidArgument)
		}
	}
	key := req.IdempotencyKey
	if key == "" {
		key = uuid.NewString() // each publish is its own event
	}
	var out EventResult
	var errs []error
	for _, w := range wfs {
		res, err := e.Submit(ctx, SubmitRequest{Name: w.name, Version: w.version, Inputs: map[string]any{"event": payload},
			IdempotencyKey: "event:" + req.Name + ":" + key + ":" + w.name})
		if err != nil {
			errs = append(errs, fmt.Errorf("workflow %s v%d: %w", w.name, w.version, err))
			continue
		}
		out.Started = append(out.Started, EventStart{Workflow: w.name, Version: w.version, InstanceID: res.InstanceID, Existing: res.Existing})
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("%s: %w", what, errors.Join(errs...))
	}
	return out, nil
}
