package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/robonet/robonet/engine/expr"
	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/clock"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Query is the read side of the engine: workflow versions and their
// compiled plans, and instances as the Store shows them — views, lists and
// watches. A server has one for its whole life and answers reads with it
// whether or not it leads; the Engine of each leadership term shares it
// (so plans are compiled once per node, not once per term) and adds what
// only the runloop knows, the live state of the instances it holds. Query
// starts no goroutine and needs no term.
type Query struct {
	cfg   Config
	log   *zap.Logger
	env   *expr.Env
	plans plans
}

// NewQuery builds the read side over cfg.Store with cfg's limits (Spec,
// SpreadLimit, StepCost) and WatchPollInterval; the runloop's fields of
// cfg are not used.
func NewQuery(cfg Config) (*Query, error) {
	cfg = cfg.WithDefaults()
	if cfg.Store == nil {
		return nil, fmt.Errorf("engine config: Store is required")
	}
	env, err := expr.NewEnv(cfg.Spec.Expr)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	q := &Query{cfg: cfg, log: cfg.Logger.Named("query").With(zap.String("node", cfg.NodeName)), env: env}
	q.plans = plans{q: q, by: make(map[int64]*planEntry)}
	return q, nil
}

// ListWorkflows lists up to limit registered versions (0: the Store's
// default), newest first within a name; name "" lists every workflow. It
// decodes each version's IR for its description and task count but builds
// no plans: listing must stay cheap however many large versions are
// stored. A version whose IR cannot be decoded is listed as unreadable.
func (q *Query) ListWorkflows(ctx context.Context, name string, limit int) ([]WorkflowInfo, error) {
	wfs, err := q.cfg.Store.ListWorkflows(ctx, port.WorkflowFilter{Name: name, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	out := make([]WorkflowInfo, 0, len(wfs))
	for _, wfv := range wfs {
		info := WorkflowInfo{Name: wfv.Name, Version: wfv.Version, IRHash: wfv.IRHash, CreatedAt: wfv.CreatedAt}
		var wf robonetv1.Workflow
		if err := proto.Unmarshal(wfv.IR, &wf); err != nil {
			info.Description = "(unreadable: the stored IR does not decode: " + err.Error() + ")"
		} else {
			info.Description, info.Tasks, info.Capabilities = wf.GetDescription(), len(wf.GetTasks()), capabilitiesOf(&wf)
		}
		out = append(out, info)
	}
	return out, nil
}

// ListInstances lists instances, newest first, with paging, from the Store.
// RUNNING and GATHERING are one status in the Store: filtering by either
// lists both.
func (q *Query) ListInstances(ctx context.Context, req ListRequest) (ListResult, error) {
	return q.listInstances(ctx, req, nil)
}

// listInstances is ListInstances; live, when set, gives the state of an
// instance the caller holds, which wins over the Store's (see
// Engine.ListInstances).
func (q *Query) listInstances(ctx context.Context, req ListRequest, live func(context.Context, uuid.UUID) (port.InstanceState, bool, error)) (ListResult, error) {
	f := port.InstanceFilter{WorkflowName: req.Workflow, IDPrefix: req.IDPrefix, CreatedAfter: req.CreatedAfter, Limit: req.Limit, PageToken: req.PageToken}
	seen := map[port.InstanceState]bool{}
	wanted := map[port.InstanceState]bool{}
	for _, st := range req.States {
		wanted[st] = true
		s := st
		switch {
		case st == port.StateGathering:
			s = port.StateRunning
		case st == port.StatePaused: // a live instance paused: the Store says queued or running
			for _, s := range []port.InstanceState{port.StatePending, port.StateRunning} {
				if !seen[s] {
					seen[s] = true
					f.Statuses = append(f.Statuses, s)
				}
			}
			continue
		case !st.Durable():
			return ListResult{}, fmt.Errorf("list instances: unknown state %q: %w", st, port.ErrInvalidArgument)
		}
		if !seen[s] {
			seen[s] = true
			f.Statuses = append(f.Statuses, s)
		}
	}
	// Rows a held instance's state drops (see below) leave a short page:
	// the next rows of the Store fill it, so a page is short only at the
	// end (clients stop at an empty page). Whole store pages are read, so
	// the store's token continues after the last row looked at.
	limit := req.Limit
	if limit <= 0 {
		limit = port.DefaultInstanceLimit
	}
	f.Limit = limit
	var out ListResult
	for range maxListRefills {
		page, err := q.cfg.Store.ListInstances(ctx, f)
		if err != nil {
			return ListResult{}, fmt.Errorf("list instances: %w", err)
		}
		for _, rec := range page.Instances {
			sum := summaryOf(rec)
			if live != nil {
				st, ok, err := live(ctx, rec.ID)
				if err != nil {
					return ListResult{}, fmt.Errorf("list instances: %w", err)
				}
				if ok {
					sum.State = st
				}
			}
			if len(wanted) > 0 && !wanted[sum.State] {
				// The Store's row matched the filter; the held instance
				// has moved on (GATHERING where RUNNING was asked, or
				// finished since the page was read): what a get says now
				// wins.
				continue
			}
			out.Instances = append(out.Instances, sum)
		}
		out.NextPageToken = page.NextPageToken
		if len(out.Instances) >= limit || page.NextPageToken == "" {
			break
		}
		f.PageToken, f.Limit = page.NextPageToken, limit-len(out.Instances)
	}
	return out, nil
}

// summaryOf is a stored instance's summary.
func summaryOf(rec port.InstanceRecord) InstanceSummary {
	sum := InstanceSummary{
		ID:        rec.ID,
		Workflow:  rec.WorkflowName,
		Version:   rec.WorkflowVersion,
		State:     recordState(rec),
		Error:     rec.Error,
		CreatedAt: rec.CreatedAt,
	}
	if rec.FinishedAt != nil {
		sum.FinishedAt = *rec.FinishedAt
	}
	if rec.Parent != nil {
		sum.Parent = rec.Parent.InstanceID
	}
	return sum
}

// maxListRefills bounds the store pages one listing reads to fill a page
// rows were dropped from.
const maxListRefills = 8

// GetInstance returns an instance with its tasks from the Store: the
// snapshot restored, the recorded results replayed on top, timings from
// the task history.
func (q *Query) GetInstance(ctx context.Context, id uuid.UUID) (InstanceView, error) {
	rec, pe, err := q.record(ctx, id)
	if err != nil {
		return InstanceView{}, err
	}
	hist, err := q.cfg.Store.TaskHistory(ctx, id)
	if err != nil {
		return InstanceView{}, fmt.Errorf("get instance %s: %w", id, err)
	}
	v, err := q.recordView(pe, rec, hist)
	if err != nil {
		return InstanceView{}, err
	}
	return v, q.signalViews(ctx, &v, pe)
}

// record reads an instance's stored record and the plan of its version.
func (q *Query) record(ctx context.Context, id uuid.UUID) (port.InstanceRecord, *planEntry, error) {
	rec, err := q.cfg.Store.GetInstance(ctx, id)
	if err != nil {
		return port.InstanceRecord{}, nil, err // the store's error says "get instance ID" already
	}
	pe, err := q.plans.get(ctx, rec.WorkflowVersionID)
	if err != nil {
		return port.InstanceRecord{}, nil, fmt.Errorf("get instance %s: %w", id, err)
	}
	return rec, pe, nil
}

// recordView builds a view from a stored record and its history.
func (q *Query) recordView(pe *planEntry, rec port.InstanceRecord, hist []port.ActionResult) (InstanceView, error) {
	v, err := recordHead(rec)
	if err != nil {
		return InstanceView{}, err
	}
	st, err := decodeState(rec.State)
	if err != nil {
		return InstanceView{}, fmt.Errorf("instance %s: %w", rec.ID, err)
	}
	if !st.startedAt.IsZero() && v.StartedAt.IsZero() {
		v.StartedAt = st.startedAt
	}
	g, err := recordGraph(pe, rec, st, v.Inputs, hist, q.cfg.Clock.Now())
	if err != nil {
		return InstanceView{}, fmt.Errorf("instance %s: %w", rec.ID, err)
	}
	v.Tasks = taskViews(pe, g, historySource(pe, hist))
	childViews(&v, pe, &st)
	boundAttempts(&v)
	return v, nil
}

// recordHead is the view of an instance's record without its tasks: what
// the row says, its inputs and, once it completed, its outputs. The error
// is the outputs'.
func recordHead(rec port.InstanceRecord) (InstanceView, error) {
	v := InstanceView{
		ID:              rec.ID,
		Workflow:        rec.WorkflowName,
		Version:         rec.WorkflowVersion,
		State:           recordState(rec),
		Error:           rec.Error,
		CreatedAt:       rec.CreatedAt,
		CancelRequested: rec.CancelRequested,
		Parent:          rec.Parent,
		Paused:          rec.Paused && !rec.Status.Terminal(),
		Run:             max(rec.Run, 1),
	}
	if rec.StartedAt != nil {
		v.StartedAt = *rec.StartedAt
	}
	if rec.FinishedAt != nil {
		v.FinishedAt = *rec.FinishedAt
	}
	if in, err := value.Decode(rec.Inputs); err == nil {
		v.Inputs, _ = in.(map[string]any)
	}
	if rec.Status == port.StateComplete && len(rec.Output) > 0 {
		out, err := value.Decode(rec.Output)
		if err != nil {
			return InstanceView{}, fmt.Errorf("instance %s: decoding its outputs: %w", rec.ID, err)
		}
		v.Outputs, _ = out.(map[string]any)
	}
	return v, nil
}

// recordGraph is the graph of a stored instance as its owner has it: the
// snapshot (or a fresh start, if the owner has not written one yet), with
// the results recorded since replayed on top; what the owner would
// dispatch is shown as running. The error is the snapshot's.
func recordGraph(pe *planEntry, rec port.InstanceRecord, st instanceState, inputs map[string]any, hist []port.ActionResult,
	now time.Time) (*graph.Graph, error) {
	g, err := storedGraph(pe.plan, rec.ID.String(), st)
	if err != nil {
		return nil, err
	}
	var fx []graph.Effect
	switch {
	case len(st.graph) > 0:
		if !rec.Status.Terminal() {
			fx = g.Resume(now)
		}
	case rec.Status == port.StateRunning:
		fx, _ = g.Start(inputs, now) // an error leaves the graph PENDING
	}
	if fx != nil {
		drive(g, pe, newRecorded(hist), fx, now, nil, nil, func(graph.Effect) {})
		// The state is the record's (recordState), not the replay's: a
		// list reads the record, and a get must show what a list shows.
	}
	return g, nil
}

// historySource is what taskViews needs of a stored instance besides its
// graph, read from its recorded results: each task's first start and last
// finish, and each execution's attempts.
func historySource(pe *planEntry, hist []port.ActionResult) viewSource {
	started := make(map[int32]time.Time)
	finished := make(map[int32]time.Time)
	for _, r := range hist {
		ref, ok := pe.parseExecution(r.ExecutionID)
		if !ok {
			continue
		}
		if t, ok := started[ref.Node]; !r.StartedAt.IsZero() && (!ok || r.StartedAt.Before(t)) {
			started[ref.Node] = r.StartedAt
		}
		if r.FinishedAt.After(finished[ref.Node]) {
			finished[ref.Node] = r.FinishedAt
		}
	}
	byRef := historyAttempts(pe, hist)
	return viewSource{
		times: func(node int32) (time.Time, time.Time) { return started[node], finished[node] },
		attempts: func(out []AttemptView, ref graph.TaskRef, info graph.TaskInfo) []AttemptView {
			done := byRef[ref]
			var last uint32
			if len(done) > 0 {
				last = done[len(done)-1].Attempt
			}
			return appendUnrecorded(append(out, done...), ref, info, last, AttemptView{})
		},
	}
}

// signalViews adds the instance's signals to v, when its workflow waits
// for any (the Store is not asked otherwise).
func (q *Query) signalViews(ctx context.Context, v *InstanceView, pe *planEntry) error {
	if !pe.plan.HasWaits() {
		return nil
	}
	sigs, err := q.cfg.Store.ListSignals(ctx, v.ID)
	if err != nil {
		return fmt.Errorf("get instance %s: its signals: %w", v.ID, err)
	}
	v.Signals = make([]SignalInfo, 0, len(sigs))
	for _, s := range sigs {
		v.Signals = append(v.Signals, SignalInfo{Seq: s.Seq, Name: s.Name, Payload: s.Payload, At: s.CreatedAt,
			Consumed: s.Consumed, By: s.ConsumedBy})
	}
	return nil
}

// WatchInstance streams the events of an instance as the Store shows them
// (see Engine.WatchInstance): a snapshot, then an EventState for each
// status change, polled every WatchPollInterval, until it is terminal.
func (q *Query) WatchInstance(ctx context.Context, id uuid.UUID, afterSeq uint64, send func(Event) error) error {
	cursor := afterSeq
	_, err := q.watchStore(ctx, id, &cursor, send, nil, nil, nil)
	return err
}

// watchStore follows an instance through the Store until it finishes
// (done) or held reports that the caller holds it (not done). claimed,
// when set, returns a channel closed at the caller's next claim, which
// is worth checking held at once. view, when set, builds the snapshots
// (nil: the Store's view, GetInstance).
func (q *Query) watchStore(ctx context.Context, id uuid.UUID, cursor *uint64, send func(Event) error,
	held func(uuid.UUID) bool, claimed func() <-chan struct{}, view func(context.Context, uuid.UUID) (InstanceView, error)) (done bool, err error) {
	if view == nil {
		view = q.GetInstance
	}
	next := func(ev Event) error {
		*cursor++
		ev.Seq = *cursor
		ev.Time = q.cfg.Clock.Now()
		ev.Index = -1 // instance events only
		return send(ev)
	}
	var (
		timer clock.Timer
		last  port.InstanceState
	)
	for first := true; ; first = false {
		var claim <-chan struct{}
		if claimed != nil {
			claim = claimed()
		}
		if held != nil && held(id) {
			return false, nil
		}
		rec, err := q.cfg.Store.GetInstance(ctx, id)
		if err != nil {
			return false, fmt.Errorf("watch instance %s: %w", id, err)
		}
		terminal, state := rec.Status.Terminal(), recordState(rec)
		switch {
		case first || (terminal && state != last):
			v, err := view(ctx, id)
			if err != nil {
				return false, fmt.Errorf("watch instance %s: %w", id, err)
			}
			if err := next(Event{Kind: EventSnapshot, State: v.State, Instance: &v}); err != nil {
				return false, err
			}
			if first && terminal {
				// A finished instance: its whole history, as recorded.
				if err := q.replayHistory(ctx, rec, cursor, send); err != nil {
					return false, err
				}
			}
		case state != last:
			if err := next(Event{Kind: EventState, State: state}); err != nil {
				return false, err
			}
		}
		if terminal {
			ev := Event{Kind: EventState, State: rec.Status, Error: rec.Error}
			if len(rec.Output) > 0 {
				ev.Output, _ = value.Decode(rec.Output)
			}
			return true, next(ev)
		}
		last = state
		if timer == nil {
			timer = q.cfg.Clock.NewTimer(q.cfg.WatchPollInterval)
			defer timer.Stop()
		} else {
			timer.Reset(q.cfg.WatchPollInterval)
		}
		select {
		case <-timer.C():
		case <-claim:
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// replayHistory sends the recorded attempts of a finished instance as the
// events they were — each attempt's start and its outcome, at the times
// recorded — in the order they were recorded, before its final state.
func (q *Query) replayHistory(ctx context.Context, rec port.InstanceRecord, cursor *uint64, send func(Event) error) error {
	pe, err := q.plans.get(ctx, rec.WorkflowVersionID)
	if err != nil {
		return fmt.Errorf("watch instance %s: %w", rec.ID, err)
	}
	hist, err := q.cfg.Store.TaskHistory(ctx, rec.ID)
	if err != nil {
		return fmt.Errorf("watch instance %s: %w", rec.ID, err)
	}
	state := rec.Status
	emit := func(ev Event) error {
		*cursor++
		ev.Seq, ev.State = *cursor, state
		return send(ev)
	}
	for _, ar := range hist {
		ref, ok := pe.parseExecution(ar.ExecutionID)
		if !ok {
			continue
		}
		name, iter := pe.task(ref.Node).GetName(), ref.Index >= 0 && pe.task(ref.Node).GetLoop() != nil
		if !ar.StartedAt.IsZero() {
			if err := emit(Event{Kind: EventTaskStarted, Time: ar.StartedAt, Task: name, Index: ref.Index, Iteration: iter, Attempt: ar.Attempt}); err != nil {
				return err
			}
		}
		done := Event{Kind: EventTaskCompleted, Time: ar.FinishedAt, Task: name, Index: ref.Index, Iteration: iter, Attempt: ar.Attempt}
		if ar.OK {
			if len(ar.Output) > 0 {
				done.Output, _ = value.Decode(ar.Output)
			}
		} else {
			done.Kind, done.Error = EventTaskFailed, ar.Error
		}
		if err := emit(done); err != nil {
			return err
		}
	}
	return nil
}
