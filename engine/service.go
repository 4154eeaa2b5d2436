package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

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
		return nil, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
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
	case !errors.Is(err, ErrNotFound):
		return nil, false, fmt.Errorf("register workflow %s v%d: %w", wf.GetName(), wf.GetVersion(), err)
	}
	wfv, err := e.cfg.Store.RegisterWorkflow(ctx, WorkflowVersion{Name: wf.GetName(), Version: wf.GetVersion(), IRHash: hash, IR: ir})
	if errors.Is(err, ErrVersionConflict) { // registered concurrently
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
		wf.GetName(), wf.GetVersion(), stored, submitted, ErrVersionConflict)
}

// Submit starts a workflow instance: a registered version (Version 0: the
// latest) or an inline spec, registered on the way. The inputs are bound
// before anything is queued, so bad input leaves nothing behind (the error
// wraps graph.ErrInvalidInput). Submit returns once the instance is
// committed; a running engine is woken to claim it at once. With an
// idempotency key already used for the same version, the earlier instance
// is returned with Existing set.
func (e *Engine) Submit(ctx context.Context, req SubmitRequest) (SubmitResult, error) {
	if req.Deadline < 0 {
		return SubmitResult{}, fmt.Errorf("submit: deadline %s is negative: %w", req.Deadline, ErrInvalidArgument)
	}
	if req.Deadline > MaxDeadline {
		return SubmitResult{}, fmt.Errorf("submit: deadline %s is too large, the maximum is %s: %w", req.Deadline, MaxDeadline, ErrInvalidArgument)
	}
	pe, err := e.resolve(ctx, req)
	if err != nil {
		return SubmitResult{}, err
	}
	what := fmt.Sprintf("submit %s v%d", pe.info.Name, pe.info.Version)
	bound, err := pe.plan.BindInputs(req.Inputs)
	if err != nil {
		return SubmitResult{}, fmt.Errorf("%s: %w", what, err)
	}
	inputs, err := value.Encode(bound)
	if err != nil {
		return SubmitResult{}, fmt.Errorf("%s: encoding the inputs: %w", what, err)
	}
	var st instanceState
	if req.Deadline > 0 {
		st.deadline = req.Deadline
		st.deadlineAt = e.cfg.Clock.Now().Add(req.Deadline)
	}
	q, err := e.submits.queue(ctx, e.cfg.Store, NewInstance{
		ID:                uuid.New(),
		WorkflowVersionID: pe.id,
		Inputs:            inputs,
		State:             st.encode(nil),
		IdempotencyKey:    req.IdempotencyKey,
	})
	if err != nil {
		return SubmitResult{}, fmt.Errorf("%s: %w", what, err)
	}
	if !q.Existing {
		e.wakeClaimer()
		e.log.Debug("instance submitted", zap.Stringer("instance", q.ID), zap.String("workflow", pe.info.Name))
	}
	return SubmitResult{InstanceID: q.ID, Workflow: pe.info, Existing: q.Existing}, nil
}

// resolve finds (or registers) the workflow version a submission names.
func (e *Engine) resolve(ctx context.Context, req SubmitRequest) (*planEntry, error) {
	switch {
	case len(req.Spec) > 0 && req.Name != "":
		return nil, fmt.Errorf("submit: give a workflow name or an inline spec, not both: %w", ErrInvalidArgument)
	case len(req.Spec) > 0:
		file := req.SpecFile
		if file == "" {
			file = "inline spec"
		}
		pe, err := e.compile(file, req.Spec)
		if err != nil {
			return nil, fmt.Errorf("submit %s: %w", file, err)
		}
		// Check the inputs before registering, so a submission with bad
		// inputs writes nothing at all, not even the workflow version.
		if _, err := pe.plan.BindInputs(req.Inputs); err != nil {
			return nil, fmt.Errorf("submit %s v%d: %w", pe.info.Name, pe.info.Version, err)
		}
		pe, _, err = e.register(ctx, pe)
		return pe, err
	case req.Name == "":
		return nil, fmt.Errorf("submit: a workflow name or an inline spec is required: %w", ErrInvalidArgument)
	case req.Version == 0:
		wfs, err := e.cfg.Store.ListWorkflows(ctx, WorkflowFilter{Name: req.Name, Limit: 1})
		if err != nil {
			return nil, fmt.Errorf("submit %s: %w", req.Name, err)
		}
		if len(wfs) == 0 {
			return nil, fmt.Errorf("submit %s: no version of this workflow is registered: %w", req.Name, ErrNotFound)
		}
		pe, err := e.q.plans.add(wfs[0])
		if err != nil {
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

// liveState is the state of a running instance this engine holds.
func (e *Engine) liveState(id uuid.UUID) (InstanceState, bool) {
	h, ok := e.held.Load(id)
	if !ok {
		return "", false
	}
	st, ok := h.(*holder).state.Load().(InstanceState)
	return st, ok && !st.Terminal()
}
