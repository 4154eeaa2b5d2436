package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/spec"
	"github.com/robonet/robonet/engine/value"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// RegisterWorkflow compiles a spec and stores it as an immutable version.
// Registering the same definition again is a no-op (Existing set). A
// different definition under a registered (name, version) fails with an
// error wrapping ErrVersionConflict that names both hashes. A spec that
// does not compile fails with a spec.ErrorList (errors.As) listing every
// problem with its position. Everything that can reject the spec runs
// before the version is written, so a rejected spec leaves nothing behind.
func (e *Engine) RegisterWorkflow(ctx context.Context, file string, src []byte) (WorkflowInfo, error) {
	pe, err := e.compile(file, src)
	if err != nil {
		return WorkflowInfo{}, fmt.Errorf("register workflow %s: %w", file, err)
	}
	if err := e.checkChildren(ctx, pe, file, src); err != nil {
		return WorkflowInfo{}, err
	}
	pe, existing, err := e.register(ctx, pe)
	if err != nil {
		return WorkflowInfo{}, err
	}
	info := pe.info
	info.Existing = existing
	return info, nil
}

// compile compiles a spec and builds its plan, which is everything that
// can reject it, without touching the Store. The entry has no store id yet.
func (e *Engine) compile(file string, src []byte) (*planEntry, error) {
	wf, err := spec.Compile(file, src, spec.Options{Limits: e.cfg.Spec})
	if err != nil {
		return nil, err
	}
	pe, err := e.q.newPlanEntry(0, wf)
	if err != nil {
		// The compiler accepted what the plan refuses: the spec is still
		// the client's to fix.
		return nil, fmt.Errorf("%w: %w", port.ErrInvalidArgument, err)
	}
	return pe, nil
}

// register stores a compiled workflow and returns its cached plan entry.
func (e *Engine) register(ctx context.Context, pe *planEntry) (*planEntry, bool, error) {
	wf := pe.wf
	ir, err := proto.MarshalOptions{Deterministic: true}.Marshal(wf)
	if err != nil {
		return nil, false, fmt.Errorf("register workflow %s v%d: encoding the IR: %w", wf.GetName(), wf.GetVersion(), err)
	}
	hash := spec.Hash(wf)
	existing := false
	cur, err := e.cfg.Store.GetWorkflow(ctx, wf.GetName(), wf.GetVersion())
	switch {
	case err == nil && cur.IRHash != hash:
		return nil, false, e.conflict(wf, cur.IRHash, hash)
	case err == nil:
		existing = true
	case !errors.Is(err, port.ErrNotFound):
		return nil, false, fmt.Errorf("register workflow %s v%d: %w", wf.GetName(), wf.GetVersion(), err)
	}
	wfv, err := e.cfg.Store.RegisterWorkflow(ctx, port.WorkflowVersion{Name: wf.GetName(), Version: wf.GetVersion(), IRHash: hash, IR: ir})
	// A submission by name reads the new latest version from now on (also
	// when the write failed: it may have committed).
	e.latestVersions.forget(wf.GetName())
	e.triggers.forget()
	if errors.Is(err, port.ErrVersionConflict) { // registered concurrently
		if cur, gerr := e.cfg.Store.GetWorkflow(ctx, wf.GetName(), wf.GetVersion()); gerr == nil {
			return nil, false, e.conflict(wf, cur.IRHash, hash)
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("register workflow %s v%d: %w", wf.GetName(), wf.GetVersion(), err)
	}
	pe = e.q.plans.put(wfv, pe)
	if !existing {
		e.log.Info("workflow registered", zap.String("workflow", wf.GetName()), zap.Uint32("version", wf.GetVersion()),
			zap.String("ir_hash", hash))
	}
	return pe, existing, nil
}

func (e *Engine) conflict(wf *robonetv1.Workflow, stored, submitted string) error {
	return fmt.Errorf("workflow %s version %d is already registered with a different definition "+
		"(registered %s, this spec %s): versions are immutable, bump `version` to register the change: %w",
		wf.GetName(), wf.GetVersion(), stored, submitted, port.ErrVersionConflict)
}

// Submit starts a workflow instance: a registered version (Version 0: the
// latest) or an inline spec, registered on the way. The inputs are bound
// before anything is queued, so bad input leaves nothing behind (the error
// wraps graph.ErrInvalidInput). Submit returns once the instance is
// committed; a running engine with room stores it claimed and starts it at
// once (see reserve), or is woken to claim it. With an idempotency key
// already used for the same version, the earlier instance is returned with
// Existing set.
func (e *Engine) Submit(ctx context.Context, req SubmitRequest) (SubmitResult, error) {
	if err := checkDeadline(req.Deadline); err != nil {
		return SubmitResult{}, fmt.Errorf("submit: %w", err)
	}
	var (
		pe    *planEntry
		moved bool
		err   error
	)
	if req.Dev && len(req.Spec) > 0 && req.Name == "" {
		pe, moved, err = e.registerInlineDev(ctx, req.Spec, req.SpecFile, true, func(pe *planEntry) error {
			if _, err := pe.plan.BindInputs(req.Inputs); err != nil {
				return fmt.Errorf("submit %s: %w", pe.info.Name, err)
			}
			return nil
		})
	} else {
		pe, err = e.resolve(ctx, req)
	}
	if err != nil {
		return SubmitResult{}, err
	}
	what := fmt.Sprintf("submit %s v%d", pe.info.Name, pe.info.Version)
	pins, err := e.childPins(ctx, pe)
	if err != nil {
		return SubmitResult{}, fmt.Errorf("%s: %w", what, err)
	}
	in, err := e.newInstance(pe, req.Inputs, req.IdempotencyKey, req.Deadline, pins)
	if err != nil {
		return SubmitResult{}, fmt.Errorf("%s: %w", what, err)
	}
	reserved := e.reserve(1)
	if reserved > 0 {
		in.Claim = e.submitClaim()
	}
	q, err := e.submits.queue(e.cfg.Store, in)
	if reserved > 0 {
		var qs []port.Queued
		if err == nil {
			qs = []port.Queued{q}
		}
		e.adopt(pe, []port.NewInstance{in}, qs, reserved)
	}
	if err != nil {
		return SubmitResult{}, fmt.Errorf("%s: %w", what, err)
	}
	if !q.Existing {
		e.cfg.Metrics.InstancesSubmitted.Inc()
		if !q.Claimed {
			e.wakeClaimer()
		}
		e.log.Debug("instance submitted", zap.Stringer("instance", q.ID), zap.String("workflow", pe.info.Name))
	}
	return SubmitResult{InstanceID: q.ID, Workflow: pe.info, Existing: q.Existing, DevVersion: moved}, nil
}

// SubmitBatch starts an instance of one workflow per item. Every item is
// checked and its inputs bound before anything is queued: an invalid item
// fails the call naming its index, with nothing queued. The instances are
// queued in one store transaction (all or none) and the call returns after
// its commit. Keys work per item as in Submit; an item repeating an
// earlier item's key gets that item's instance, Existing set.
func (e *Engine) SubmitBatch(ctx context.Context, req SubmitBatchRequest) (SubmitBatchResult, error) {
	switch {
	case len(req.Items) == 0:
		return SubmitBatchResult{}, fmt.Errorf("submit batch: no items: give at least one: %w", port.ErrInvalidArgument)
	case len(req.Items) > MaxSubmitBatchItems:
		return SubmitBatchResult{}, fmt.Errorf("submit batch: %d items, at most %d a call: split the batch: %w",
			len(req.Items), MaxSubmitBatchItems, port.ErrInvalidArgument)
	}
	for i, it := range req.Items {
		if err := checkDeadline(it.Deadline); err != nil {
			return SubmitBatchResult{}, fmt.Errorf("submit batch: item %d: %w", i, err)
		}
	}
	pe, err := e.resolveBatch(ctx, req)
	if err != nil {
		return SubmitBatchResult{}, err
	}
	what := fmt.Sprintf("submit %d instances of %s v%d", len(req.Items), pe.info.Name, pe.info.Version)
	pins, err := e.childPins(ctx, pe)
	if err != nil {
		return SubmitBatchResult{}, fmt.Errorf("%s: %w", what, err)
	}
	ins := make([]port.NewInstance, len(req.Items))
	for i, it := range req.Items {
		if ins[i], err = e.newInstance(pe, it.Inputs, it.IdempotencyKey, it.Deadline, pins); err != nil {
			return SubmitBatchResult{}, fmt.Errorf("%s: item %d: %w", what, i, err)
		}
	}
	reserved := e.reserve(len(ins))
	if reserved > 0 {
		claim := e.submitClaim()
		for i := range reserved {
			ins[i].Claim = claim
		}
	}
	q, err := e.cfg.Store.QueueInstances(ctx, ins)
	if err == nil && len(q) != len(ins) {
		err = fmt.Errorf("the store answered %d instances for %d", len(q), len(ins))
		q = nil // nothing of it can be trusted
	}
	if reserved > 0 {
		e.adopt(pe, ins, q, reserved)
	}
	if err != nil {
		return SubmitBatchResult{}, fmt.Errorf("%s: %w", what, err)
	}
	queued := false
	for _, qi := range q {
		if !qi.Existing {
			e.cfg.Metrics.InstancesSubmitted.Inc()
		}
		queued = queued || (!qi.Existing && !qi.Claimed)
	}
	if queued {
		e.wakeClaimer()
	}
	e.log.Debug("instances submitted", zap.Int("count", len(q)), zap.String("workflow", pe.info.Name))
	return SubmitBatchResult{Workflow: pe.info, Instances: q}, nil
}

// resolveBatch is resolve for a batch: an inline spec is registered only
// once every item's inputs bind, so a refused batch leaves nothing behind,
// not even the workflow version.
func (e *Engine) resolveBatch(ctx context.Context, req SubmitBatchRequest) (*planEntry, error) {
	if len(req.Spec) == 0 || req.Name != "" {
		return e.resolve(ctx, SubmitRequest{Name: req.Name, Version: req.Version, Spec: req.Spec, SpecFile: req.SpecFile})
	}
	return e.registerInline(ctx, req.Spec, req.SpecFile, func(pe *planEntry) error {
		for i, it := range req.Items {
			if _, err := pe.plan.BindInputs(it.Inputs); err != nil {
				return fmt.Errorf("submit %d instances of %s v%d: item %d: %w", len(req.Items), pe.info.Name, pe.info.Version, i, err)
			}
		}
		return nil
	})
}

// registerInline compiles an inline spec, runs check on its plan and
// registers it only if check passes: inputs are checked before anything is
// written, so a submission with bad inputs leaves nothing behind, not even
// the workflow version.
func (e *Engine) registerInline(ctx context.Context, src []byte, file string, check func(*planEntry) error) (*planEntry, error) {
	pe, _, err := e.registerInlineDev(ctx, src, file, false, check)
	return pe, err
}

// registerInlineDev is registerInline with the Dev loop (see
// SubmitRequest.Dev): moved reports that the spec went to another version
// than its own.
func (e *Engine) registerInlineDev(ctx context.Context, src []byte, file string, dev bool, check func(*planEntry) error) (pe *planEntry, moved bool, err error) {
	if file == "" {
		file = "inline spec"
	}
	if pe, err = e.compile(file, src); err != nil {
		return nil, false, fmt.Errorf("submit %s: %w", file, err)
	}
	if err := check(pe); err != nil {
		return nil, false, err
	}
	if err := e.checkChildren(ctx, pe, file, src); err != nil {
		return nil, false, err
	}
	registered, _, err := e.register(ctx, pe)
	if !dev || !errors.Is(err, port.ErrVersionConflict) {
		return registered, false, err
	}
	v, err := e.devVersion(ctx, pe.wf)
	if err != nil {
		return nil, false, err
	}
	wf := proto.CloneOf(pe.wf)
	wf.Version = v
	if pe, err = e.q.newPlanEntry(0, wf); err != nil {
		return nil, false, fmt.Errorf("%w: %w", port.ErrInvalidArgument, err)
	}
	registered, existing, err := e.register(ctx, pe)
	if err == nil && !existing {
		e.log.Info("edited spec registered as a new version (dev)", zap.String("workflow", wf.GetName()), zap.Uint32("version", v))
	}
	return registered, err == nil, err
}

// maxDevScan bounds the versions devVersion compares a spec with.
const maxDevScan = 1000

// devVersion is the version an edited spec goes to under Dev: a
// registered version of its name with the same definition, else the one
// after the highest registered.
func (e *Engine) devVersion(ctx context.Context, wf *robonetv1.Workflow) (uint32, error) {
	versions, err := e.cfg.Store.ListWorkflows(ctx, port.WorkflowFilter{Name: wf.GetName(), Limit: maxDevScan})
	if err != nil {
		return 0, fmt.Errorf("submit %s (dev): %w", wf.GetName(), err)
	}
	var top uint32
	for _, v := range versions {
		same := proto.CloneOf(wf)
		same.Version = v.Version
		if spec.Hash(same) == v.IRHash {
			return v.Version, nil
		}
		top = max(top, v.Version)
	}
	if top == math.MaxUint32 {
		return 0, fmt.Errorf("submit %s (dev): every version number is taken: %w", wf.GetName(), port.ErrVersionConflict)
	}
	return top + 1, nil
}

func checkDeadline(d time.Duration) error {
	switch {
	case d < 0:
		return fmt.Errorf("deadline %s is negative: %w", d, port.ErrInvalidArgument)
	case d > MaxDeadline:
		return fmt.Errorf("deadline %s is too large, the maximum is %s: %w", d, MaxDeadline, port.ErrInvalidArgument)
	}
	return nil
}

// newInstance binds one submission's inputs and builds its queue row;
// pins are the versions its child workflows named without one run.
func (e *Engine) newInstance(pe *planEntry, inputs map[string]any, key string, deadline time.Duration, pins []childPin) (port.NewInstance, error) {
	bound, err := pe.plan.BindInputs(inputs)
	if err != nil {
		return port.NewInstance{}, err
	}
	enc, err := value.Encode(bound)
	if err != nil {
		return port.NewInstance{}, fmt.Errorf("encoding the inputs: %w", err)
	}
	st := instanceState{pins: pins}
	if deadline > 0 {
		st.deadline = deadline
		st.deadlineAt = e.cfg.Clock.Now().Add(deadline)
	}
	id, partition := e.newID()
	return port.NewInstance{
		ID:                id,
		Partition:         partition,
		WorkflowVersionID: pe.id,
		Inputs:            enc,
		State:             st.encode(nil),
		IdempotencyKey:    key,
	}, nil
}

// newID mints a new instance's id in one of the partitions this engine
// owns, in turn, so a submission never costs a hop to another owner; an
// engine that owns none named (a single server) mints a random id, which
// is in partition 0 of a mesh of one.
func (e *Engine) newID() (uuid.UUID, int) {
	if len(e.owned) == 0 {
		id := uuid.New()
		return id, port.PartitionOf(id, e.cfg.PartitionCount)
	}
	p := e.owned[int(e.next.Add(1))%len(e.owned)]
	return port.NewIDIn(p, e.cfg.PartitionCount), p
}

// resolve finds (or registers) the workflow version a submission names.
func (e *Engine) resolve(ctx context.Context, req SubmitRequest) (*planEntry, error) {
	switch {
	case len(req.Spec) > 0 && req.Name != "":
		return nil, fmt.Errorf("submit: give a workflow name or an inline spec, not both: %w", port.ErrInvalidArgument)
	case len(req.Spec) > 0:
		return e.registerInline(ctx, req.Spec, req.SpecFile, func(pe *planEntry) error {
			if _, err := pe.plan.BindInputs(req.Inputs); err != nil {
				return fmt.Errorf("submit %s v%d: %w", pe.info.Name, pe.info.Version, err)
			}
			return nil
		})
	case req.Name == "":
		return nil, fmt.Errorf("submit: a workflow name or an inline spec is required: %w", port.ErrInvalidArgument)
	case req.Version == 0:
		pe, err := e.latest(ctx, req.Name)
		switch {
		case errors.Is(err, port.ErrNotFound):
			return nil, fmt.Errorf("submit %s: no version of this workflow is registered: %w", req.Name, port.ErrNotFound)
		case err != nil:
			return nil, fmt.Errorf("submit %s: %w", req.Name, err)
		}
		return pe, nil
	default:
		wfv, err := e.cfg.Store.GetWorkflow(ctx, req.Name, req.Version)
		if err != nil {
			return nil, fmt.Errorf("submit %s v%d: %w", req.Name, req.Version, err)
		}
		pe, err := e.q.plans.add(wfv)
		if err != nil {
			return nil, fmt.Errorf("submit %s v%d: %w", req.Name, req.Version, err)
		}
		return pe, nil
	}
}

// ListWorkflows lists registered versions (see Query.ListWorkflows).
func (e *Engine) ListWorkflows(ctx context.Context, name string, limit int) ([]WorkflowInfo, error) {
	return e.q.ListWorkflows(ctx, name, limit)
}

// ListInstances lists instances, newest first, with paging (see
// Query.ListInstances); instances this engine holds show their live state.
func (e *Engine) ListInstances(ctx context.Context, req ListRequest) (ListResult, error) {
	return e.q.listInstances(ctx, req, e.liveState)
}

// liveState is the state of an instance this engine holds: the live one
// (RUNNING or GATHERING where the Store says running), terminal once its
// completion is durable; it waits out a completion being written.
func (e *Engine) liveState(ctx context.Context, id uuid.UUID) (port.InstanceState, bool, error) {
	v, ok := e.held.Load(id)
	if !ok {
		return "", false, nil
	}
	h := v.(*holder)
	if err := h.settled(ctx); err != nil {
		return "", false, err
	}
	st, ok := h.state.Load().(port.InstanceState)
	if ok && !st.Terminal() && h.paused.Load() {
		st = port.StatePaused
	}
	return st, ok, nil
}
