package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/spec"
	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/clock"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Child workflows: a task whose body is another registered workflow
// (docs/workflows.md, "Child workflows"; docs/architecture.md says why it
// is built this way).
//
//   - Registering (or submitting inline) a workflow checks that every
//     child workflow it names is registered, and that the task's with
//     gives the child's inputs (checkChildren); submitting one resolves
//     the children named without a version to the latest version, kept
//     with the instance (childPins, instanceState.pins).
//   - The graph dispatches each attempt of such a task as it does any
//     (after its own checks of depth and count); the shard hands the
//     attempt to the children loop instead of the outbox (shard.spawn):
//     no Waggler sees it.
//   - The children loop starts the child as a submission is started:
//     through QueueInstances, stored claimed by this engine and taken
//     into a shard at once, its id derived from the parent's attempt in
//     the parent's partition (ChildID) and its idempotency key from the
//     attempt too, so that the same attempt dispatched again — a replay,
//     an engine taking the parent over — finds the child it started.
//   - A child that finishes tells its parent's shard, as a Waggler
//     reports a result (shard.completed → Engine.TaskResult), once its
//     completion is durable; the parent records the result as any.
//     A parent that did not hear it (its engine died first) dispatches
//     the attempt again on hydration, and the children loop, finding the
//     child finished, answers with the child's stored outcome.
//   - A child attempt cancelled (the parent cancelled or failed, a join's
//     cancel_rest, a timeout) cancels the child instance; a child taken
//     over by a new engine checks that its parent still runs.

// checkChildren checks, before a workflow is registered, that every child
// workflow it names is registered (or is the workflow itself) and that
// each such task's with — when it is a mapping — names only inputs the
// child declares and every input it requires. Problems come back as a
// spec.ErrorList placed in src (file) where it can be.
func (e *Engine) checkChildren(ctx context.Context, pe *planEntry, file string, src []byte) error {
	wf := pe.wf
	var list spec.ErrorList
	for _, t := range wf.GetTasks() {
		c := t.GetWorkflow()
		if c == nil {
			continue
		}
		child := pe // the workflow itself, run as its own child
		if c.GetName() != wf.GetName() || (c.GetVersion() != 0 && c.GetVersion() != wf.GetVersion()) {
			var err error
			if child, err = e.childPlan(ctx, c.GetName(), c.GetVersion()); errors.Is(err, port.ErrNotFound) {
				line, col := spec.Locate(src, "tasks", t.GetName(), "workflow")
				list = append(list, &spec.Error{File: file, Line: line, Column: col, Task: t.GetName(), Field: "workflow",
					Msg:  fmt.Sprintf("child workflow %s is not registered", childLabel(c.GetName(), c.GetVersion())),
					Hint: e.registeredHint(ctx, c.GetName())})
				continue
			} else if err != nil {
				return fmt.Errorf("register workflow %s: task %q: child workflow %s: %w", file, t.GetName(),
					childLabel(c.GetName(), c.GetVersion()), err)
			}
		}
		keys, ok := literalKeys(t.GetWith())
		if !ok {
			continue // inputs known only when it runs: bound then
		}
		line, col := spec.Locate(src, "tasks", t.GetName(), "with")
		if line == 0 {
			line, col = spec.Locate(src, "tasks", t.GetName(), "workflow")
		}
		problem := func(msg, hint string) {
			list = append(list, &spec.Error{File: file, Line: line, Column: col, Task: t.GetName(), Field: "with",
				Msg: msg, Hint: hint})
		}
		label := fmt.Sprintf("%s v%d", child.info.Name, child.info.Version)
		var declared, required []string
		for _, in := range child.wf.GetInputs() {
			declared = append(declared, in.GetName())
			if in.GetRequired() && !slices.Contains(keys, in.GetName()) {
				required = append(required, in.GetName())
			}
		}
		for _, k := range keys {
			if !slices.Contains(declared, k) {
				hint := "with gives the child workflow's inputs"
				if len(declared) > 0 {
					hint += "; " + label + " declares " + strings.Join(declared, ", ")
				} else {
					hint += "; " + label + " declares none"
				}
				problem(fmt.Sprintf("child workflow %s has no input %q", label, k), hint)
			}
		}
		if len(required) > 0 {
			problem(fmt.Sprintf("child workflow %s requires the input %s, which with does not give", label, strings.Join(required, ", ")),
				"add it to with: "+required[0]+": VALUE")
		}
	}
	if len(list) > 0 {
		return fmt.Errorf("register workflow %s: %w", file, list)
	}
	return nil
}

// registeredHint says how to fix a child workflow that is not registered,
// naming the versions of it that are.
func (e *Engine) registeredHint(ctx context.Context, name string) string {
	const fix = "register it first (roboctl workflows register FILE), then this workflow"
	versions, err := e.cfg.Store.ListWorkflows(ctx, port.WorkflowFilter{Name: name, Limit: 10})
	if err != nil || len(versions) == 0 {
		return fix + "; no version of " + name + " is registered"
	}
	vs := make([]string, len(versions))
	for i, v := range versions {
		vs[len(versions)-1-i] = strconv.FormatUint(uint64(v.Version), 10)
	}
	return fix + ", or name a registered version; registered versions of " + name + ": " + strings.Join(vs, ", ")
}

// literalKeys returns the keys of a with known before it runs: a mapping
// (whatever its values), or no with at all; ok is false for one computed
// by an expression.
func literalKeys(tmpl *robonetv1.Template) ([]string, bool) {
	if tmpl == nil {
		return nil, true
	}
	if m := tmpl.GetMap(); m != nil {
		keys := make([]string, 0, len(m.GetEntries()))
		for _, e := range m.GetEntries() {
			keys = append(keys, e.GetKey())
		}
		return keys, true
	}
	if lit := tmpl.GetLiteralJson(); lit != nil {
		v, err := value.Decode(lit)
		if m, ok := v.(map[string]any); err == nil && ok {
			return slices.Sorted(maps.Keys(m)), true
		}
	}
	return nil, false
}

// childLabel is a child workflow as a spec names it: name@version, or name.
func childLabel(name string, version uint32) string {
	if version == 0 {
		return name
	}
	return name + "@" + strconv.FormatUint(uint64(version), 10)
}

// childPlan returns the plan of a child workflow: version, or the latest
// when version is 0. ErrNotFound when it is not registered.
func (e *Engine) childPlan(ctx context.Context, name string, version uint32) (*planEntry, error) {
	if version == 0 {
		return e.latest(ctx, name)
	}
	wfv, err := e.cfg.Store.GetWorkflow(ctx, name, version)
	if err != nil {
		return nil, err
	}
	return e.q.plans.add(wfv)
}

// childPins resolves the child workflows pe's tasks name without a version
// to the latest registered versions, for an instance submitted now.
func (e *Engine) childPins(ctx context.Context, pe *planEntry) ([]childPin, error) {
	if len(pe.latestChildren) == 0 {
		return nil, nil
	}
	pins := make([]childPin, 0, len(pe.latestChildren))
	for _, name := range pe.latestChildren {
		child, err := e.latest(ctx, name)
		if errors.Is(err, port.ErrNotFound) {
			return nil, fmt.Errorf("child workflow %s is not registered: register it first: %w", name, port.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("child workflow %s: %w", name, err)
		}
		pins = append(pins, childPin{name: name, version: child.info.Version})
	}
	return pins, nil
}

// childOpKind says what a childOp asks for.
type childOpKind uint8

const (
	// spawnChild starts the child of an attempt.
	spawnChild childOpKind = iota + 1
	// cancelChild cancels the child of an attempt.
	cancelChild
	// checkParent cancels a child whose parent no longer runs.
	checkParent
)

// childOp is one request to the children loop.
type childOp struct {
	kind childOpKind
	// key is the parent's attempt (every kind).
	key port.AttemptKey
	// parent is the parent's holder: a spawn for a parent that left
	// memory is dropped (its next engine dispatches the attempt again).
	parent *holder
	// spawnChild: the child's workflow (version 0: the latest), inputs
	// (the attempt's with) and depth.
	name    string
	version uint32
	input   any
	depth   int
	// cancelChild: why.
	reason string
	// checkParent: the child.
	child uuid.UUID
}

// children is the loop that starts, cancels and checks child instances:
// the store I/O that a shard, which never waits, cannot do. One goroutine,
// ops in the order the shards pushed them (a cancel never overtakes the
// spawn of its child); consecutive spawns go to the store in one
// QueueInstances call.
type children struct {
	e   *Engine
	q   *mailbox[childOp]
	ops []childOp
	// plans caches the plans of child workflow versions by name@version
	// (versions are immutable).
	plans map[string]*planEntry
}

func newChildren(e *Engine) *children {
	return &children{e: e, q: newMailbox[childOp](), plans: make(map[string]*planEntry)}
}

func (c *children) push(op childOp) { c.q.push(op) }

func (c *children) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.q.signal:
		}
		c.ops = c.q.take(c.ops)
		start := 0
		for i, op := range c.ops {
			if op.kind == spawnChild {
				continue
			}
			c.spawn(ctx, c.ops[start:i])
			start = i + 1
			switch op.kind {
			case cancelChild:
				c.cancel(ctx, port.ChildID(op.key, c.e.cfg.PartitionCount), op.reason)
			case checkParent:
				c.checkParent(ctx, op)
			}
		}
		c.spawn(ctx, c.ops[start:])
	}
}

// spawn starts the children of ops (all spawnChild) in one store call.
func (c *children) spawn(ctx context.Context, ops []childOp) {
	e := c.e
	var (
		ins   []port.NewInstance
		pes   []*planEntry
		owner []childOp
	)
	for _, op := range ops {
		if op.parent.gone.Load() {
			continue
		}
		in, pe, err := c.prepare(ctx, op)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			c.answer(op, port.TaskResult{Error: err.Error()})
			continue
		}
		ins, pes, owner = append(ins, in), append(pes, pe), append(owner, op)
	}
	if len(ins) == 0 {
		return
	}
	// The children of a parent this engine holds run where it does: they
	// are stored claimed, whatever room is left (the parent waits for
	// them; each instance starts at most ChildrenPerInstance).
	reserved := 0
	if e.running.Load() {
		reserved = len(ins)
		e.heldCount.Add(int64(reserved))
		claim := e.submitClaim()
		for i := range ins {
			ins[i].Claim = claim
		}
	}
	var qs []port.Queued
	err := retryUnavailable(ctx, e.cfg.Clock, func() error {
		var err error
		qs, err = e.cfg.Store.QueueInstances(ctx, ins)
		if err == nil && len(qs) != len(ins) {
			err = fmt.Errorf("the store answered %d instances for %d", len(qs), len(ins))
		}
		if errors.Is(err, port.ErrStoreUnavailable) && ctx.Err() == nil {
			e.log.Warn("starting child instances failed; retrying", zap.Int("children", len(ins)), zap.Error(err))
		}
		return err
	})
	for i := range ins {
		var q []port.Queued
		if err == nil {
			q = qs[i : i+1]
		}
		if reserved > 0 {
			e.adopt(pes[i], ins[i:i+1], q, 1)
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			for _, op := range owner {
				c.answer(op, port.TaskResult{Error: fmt.Sprintf("child workflow %s could not be started: %v", childLabel(op.name, op.version), err)})
			}
		}
		return
	}
	for i, q := range qs {
		op, pe := owner[i], pes[i]
		switch {
		case q.Existing:
			c.existing(ctx, op, q.ID)
		case !q.Claimed:
			e.wakeClaimer()
		}
		e.TaskProgress(ctx, port.TaskProgress{AttemptKey: op.key, WorkerID: q.ID.String(), At: e.cfg.Clock.Now(),
			Message: fmt.Sprintf("child instance %s of %s v%d", q.ID, pe.info.Name, pe.info.Version)})
		e.log.Debug("child instance started", zap.Stringer("parent", op.key.InstanceID), zap.String("task", op.key.ExecutionID),
			zap.Uint32("attempt", op.key.Attempt), zap.Stringer("child", q.ID), zap.Bool("existing", q.Existing))
	}
}

// retryUnavailable calls op until it succeeds or fails for another reason
// than the store being unavailable (which passes), with backoff between
// calls, for as long as ctx lives.
func retryUnavailable(ctx context.Context, clk clock.Clock, op func() error) error {
	var final error
	err := retryBackoff(ctx, clk, func() error {
		err := op()
		if err != nil && !errors.Is(err, port.ErrStoreUnavailable) {
			final = err
			return nil
		}
		return err
	})
	if final != nil {
		return final
	}
	return err
}

// prepare builds the child instance of a spawn: the workflow version, the
// inputs bound, its own children's pinned versions and its depth.
func (c *children) prepare(ctx context.Context, op childOp) (port.NewInstance, *planEntry, error) {
	e := c.e
	label := childLabel(op.name, op.version)
	pe, err := c.plan(ctx, op.name, op.version)
	if errors.Is(err, port.ErrNotFound) {
		return port.NewInstance{}, nil, fmt.Errorf("child workflow %s is not registered", label)
	}
	if err != nil {
		return port.NewInstance{}, nil, fmt.Errorf("child workflow %s: %w", label, err)
	}
	label = fmt.Sprintf("%s v%d", pe.info.Name, pe.info.Version)
	inputs, ok := op.input.(map[string]any)
	if !ok && op.input != nil {
		return port.NewInstance{}, nil, fmt.Errorf("child workflow %s: with must give its inputs as a mapping, not %s", label, value.TypeName(op.input))
	}
	bound, err := pe.plan.BindInputs(inputs)
	if err != nil {
		return port.NewInstance{}, nil, fmt.Errorf("child workflow %s: %w", label, err)
	}
	enc, err := value.Encode(bound)
	if err != nil {
		return port.NewInstance{}, nil, fmt.Errorf("child workflow %s: encoding its inputs: %w", label, err)
	}
	pins, err := e.childPins(ctx, pe)
	if err != nil {
		return port.NewInstance{}, nil, fmt.Errorf("child workflow %s: %w", label, err)
	}
	id := port.ChildID(op.key, e.cfg.PartitionCount)
	parent := port.ParentRef(op.key)
	return port.NewInstance{
		ID:                id,
		Partition:         port.PartitionOf(id, e.cfg.PartitionCount),
		WorkflowVersionID: pe.id,
		Inputs:            enc,
		State:             instanceState{depth: op.depth, pins: pins}.encode(nil),
		IdempotencyKey:    "child:" + op.key.IdempotencyKey(),
		Parent:            &parent,
	}, pe, nil
}

// plan is childPlan, cached for named versions.
func (c *children) plan(ctx context.Context, name string, version uint32) (*planEntry, error) {
	if version == 0 { // the parent was submitted before its version was pinned
		return c.e.childPlan(ctx, name, 0)
	}
	key := childLabel(name, version)
	if pe := c.plans[key]; pe != nil {
		return pe, nil
	}
	pe, err := c.e.childPlan(ctx, name, version)
	if err == nil {
		if len(c.plans) > 10_000 {
			clear(c.plans)
		}
		c.plans[key] = pe
	}
	return pe, err
}

// existing handles a spawn whose child was started already (an earlier
// dispatch of the same attempt): a child held here tells its parent when
// it finishes; a finished one is answered from the store now; one that
// waits in the queue is claimed.
func (c *children) existing(ctx context.Context, op childOp, id uuid.UUID) {
	e := c.e
	if _, held := e.held.Load(id); held {
		return
	}
	var rec port.InstanceRecord
	err := retryUnavailable(ctx, e.cfg.Clock, func() error {
		var err error
		rec, err = e.cfg.Store.GetInstance(ctx, id)
		return err
	})
	switch {
	case err != nil:
		if ctx.Err() == nil {
			e.log.Warn("reading a child instance started before failed; its parent waits for it", zap.Stringer("child", id), zap.Error(err))
		}
	case rec.Status.Terminal():
		c.answer(op, childResult(id, rec.Status, rec.Output, nil, rec.Error, rec.StartedAt, rec.FinishedAt))
	default:
		e.wakeClaimer()
	}
}

// cancel cancels a child instance: durably first, then on its shard if it
// is held here. A child that does not exist (never started) or finished
// already needs nothing.
func (c *children) cancel(ctx context.Context, id uuid.UUID, reason string) {
	e := c.e
	err := retryUnavailable(ctx, e.cfg.Clock, func() error { return e.cfg.Store.RequestCancel(ctx, id) })
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, port.ErrNotFound) {
			e.log.Warn("cancelling a child instance failed", zap.Stringer("child", id), zap.Error(err))
		}
		return
	}
	e.cancelHeld(id, reason)
	e.wakeClaimer() // a queued child is cancelled when it is claimed
}

// checkParent cancels a child, taken over by this engine, whose parent no
// longer runs: the engine that cancelled or failed the parent died before
// it cancelled the child.
func (c *children) checkParent(ctx context.Context, op childOp) {
	e := c.e
	parent := op.key.InstanceID
	if _, held := e.held.Load(parent); held {
		return
	}
	rec, err := e.cfg.Store.GetInstance(ctx, parent)
	switch {
	case errors.Is(err, port.ErrNotFound):
		c.cancel(ctx, op.child, fmt.Sprintf("its parent %s is gone", parent))
	case err != nil:
		if ctx.Err() == nil {
			e.log.Warn("reading the parent of a child instance failed", zap.Stringer("child", op.child), zap.Error(err))
		}
	case rec.Status.Terminal():
		c.cancel(ctx, op.child, fmt.Sprintf("its parent %s is %s", parent, rec.Status))
	}
}

// answer reports r as the outcome of op's attempt to the parent's shard.
func (c *children) answer(op childOp, r port.TaskResult) {
	r.AttemptKey = op.key
	if r.FinishedAt.IsZero() {
		r.FinishedAt = c.e.cfg.Clock.Now()
	}
	c.e.TaskResult(context.Background(), r)
}

// childResult is the outcome of a finished child instance as its parent's
// attempt result: the child's outputs, or its error. output is its
// outputs' canonical JSON; outputs, when not nil, the same decoded.
func childResult(id uuid.UUID, status port.InstanceState, output []byte, outputs map[string]any, errText string,
	started, finished *time.Time) port.TaskResult {
	r := port.TaskResult{WorkerID: id.String()}
	if started != nil {
		r.StartedAt = *started
	}
	if finished != nil {
		r.FinishedAt = *finished
	}
	switch status {
	case port.StateComplete:
		r.OK, r.OutputJSON = true, output
		if outputs != nil {
			r.Output = outputs
		} else if v, err := value.Decode(output); err == nil {
			r.Output = v
		} else {
			r.OK, r.Error = false, fmt.Sprintf("child %s completed with outputs that cannot be read: %v", id, err)
		}
	case port.StateCancelled:
		r.Error = fmt.Sprintf("child %s was cancelled: %s", id, errText)
	default:
		r.Error = fmt.Sprintf("child %s failed: %s", id, errText)
	}
	return r
}
