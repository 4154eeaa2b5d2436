package wag

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/value"
)

// Tally runs verified attempts (TaskDispatch.Verify of 2 or 3, a task's
// `verify`) as that many runs on distinct worker nodes, tallies their
// outcomes and reports the majority's as the attempt's result; every other
// attempt passes through untouched. Distinct means distinct nodes: two
// programs connected to one node are one machine, and one vote. It sits
// between the engine and the Router: the engine's Dispatcher, and the
// Router's ResultSink. (Not to be confused with trust.Verifier, which
// checks a peer's hash-chain stamps.)
//
// A run is the attempt under its own execution id ("task[i]#r1"), in a
// group the Waggler places on distinct nodes (TaskDispatch.Group). Outcomes
// compare by digest: the canonical JSON of a successful output, or simply
// "failed" (error texts differ between hosts, a failure does not). With
// verify 2, two runs that disagree get a third, kept off both nodes, to
// break the tie; with verify 3, two that agree decide at once. No majority
// among three fails the attempt. Each run's subject (its node, or the
// worker program that ran it) is reported as agreeing or outvoted
// (TallyConfig.Outcome), evidence for its trust. A run that is lost,
// or that no worker ran, ends the attempt without a verdict: lost, or
// failed with that error, and the engine's policies decide.
//
// Verified tasks should be deterministic and free of side effects: every
// run really runs.
type Tally struct {
	cfg  TallyConfig
	next port.Dispatcher

	mu       sync.Mutex
	groups   map[port.AttemptKey]*vgroup // by verified attempt
	replicas map[port.AttemptKey]*vgroup // by run
}

// TallyConfig configures a Tally.
type TallyConfig struct {
	// Sink receives the results and progress of every attempt: the engine.
	Sink port.ResultSink
	// Outcome, when set, is told, for each run's worker subject (its node,
	// or the worker program that ran it: WorkerSubject), whether it agreed
	// with the majority.
	Outcome func(subject string, agreed bool)
	// Logger; nil: none.
	Logger *zap.Logger
}

type vgroup struct {
	d    port.TaskDispatch // the verified attempt
	runs []*vrun
}

type vrun struct {
	key  port.AttemptKey
	done bool
	// void: the run finished on a node that had given another run of the
	// attempt its outcome already. Not an independent vote, it does not
	// count; a replacement run, kept off the voters' nodes, is sent.
	void bool
	res  port.TaskResult
	sum  [sha256.Size]byte
}

// maxVoidRuns bounds the replacements of runs that landed on a node that
// had voted already; beyond it the attempt fails (it cannot be verified on
// distinct nodes, and something places runs wrongly).
const maxVoidRuns = 3

var (
	_ port.Dispatcher = (*Tally)(nil)
	_ port.ResultSink = (*Tally)(nil)
)

// NewTally builds a Tally; SetNext gives it the Router before the
// first Dispatch.
func NewTally(cfg TallyConfig) *Tally {
	if cfg.Logger == nil {
		cfg.Logger = zap.NewNop()
	}
	cfg.Logger = cfg.Logger.Named("verify")
	return &Tally{cfg: cfg, groups: map[port.AttemptKey]*vgroup{}, replicas: map[port.AttemptKey]*vgroup{}}
}

// SetNext sets the Dispatcher runs go to (the Router, built with this
// Tally as its sink).
func (t *Tally) SetNext(next port.Dispatcher) { t.next = next }

// runKey is the key of run i (1-based) of a verified attempt.
func runKey(k port.AttemptKey, i int) port.AttemptKey {
	k.ExecutionID = fmt.Sprintf("%s#r%d", k.ExecutionID, i)
	return k
}

// runOf is run i of g's attempt, kept off the nodes in avoid.
func runOf(d port.TaskDispatch, i int, avoid []string) port.TaskDispatch {
	r := d
	r.AttemptKey = runKey(d.AttemptKey, i)
	r.Verify, r.Group, r.Avoid = 0, d.IdempotencyKey(), avoid
	return r
}

// Nodes implements port.Dispatcher: the next dispatcher's answer.
func (t *Tally) Nodes(capability string) []string { return t.next.Nodes(capability) }

// Dispatch implements port.Dispatcher: verified attempts go out as their
// runs, the rest as they are. An attempt's error is its own, or that of a
// run refused (its other runs are then cancelled, so that the engine
// offers the attempt again from scratch).
func (t *Tally) Dispatch(ctx context.Context, tasks []port.TaskDispatch) []error {
	if !slices.ContainsFunc(tasks, func(d port.TaskDispatch) bool { return d.Verify >= 2 }) {
		return t.next.Dispatch(ctx, tasks) // the common case: nothing to verify, nothing to copy
	}
	out := make([]port.TaskDispatch, 0, len(tasks))
	owner := make([]int, 0, len(tasks)) // task index of each dispatch in out
	t.mu.Lock()
	for i, d := range tasks {
		if d.Verify < 2 {
			out, owner = append(out, d), append(owner, i)
			continue
		}
		if _, dup := t.groups[d.AttemptKey]; dup {
			continue
		}
		g := &vgroup{d: d}
		t.groups[d.AttemptKey] = g
		for r := 1; r <= d.Verify; r++ {
			run := runOf(d, r, nil)
			g.runs = append(g.runs, &vrun{key: run.AttemptKey})
			t.replicas[run.AttemptKey] = g
			out, owner = append(out, run), append(owner, i)
		}
	}
	t.mu.Unlock()
	if len(out) == 0 {
		return nil
	}
	errs := t.next.Dispatch(ctx, out)
	if errs == nil {
		return nil
	}
	res := make([]error, len(tasks))
	for j, err := range errs {
		if err != nil && res[owner[j]] == nil {
			res[owner[j]] = err
		}
	}
	// A verified attempt with a run refused is refused: its accepted runs
	// are cancelled, and it starts afresh when the engine offers it again.
	accepted := map[port.AttemptKey][]port.AttemptKey{}
	for j, d := range out {
		if errs[j] == nil && d.Group != "" {
			orig := tasks[owner[j]].AttemptKey
			accepted[orig] = append(accepted[orig], d.AttemptKey)
		}
	}
	for i, d := range tasks {
		if res[i] == nil || d.Verify < 2 {
			continue
		}
		t.mu.Lock()
		g := t.groups[d.AttemptKey]
		if g != nil {
			t.forgetLocked(g)
		}
		t.mu.Unlock()
		if g != nil && len(accepted[d.AttemptKey]) > 0 {
			t.cancelRuns(ctx, g, accepted[d.AttemptKey])
		}
	}
	return res
}

// Cancel implements port.Dispatcher: cancelling a verified attempt
// cancels its runs.
func (t *Tally) Cancel(ctx context.Context, term uint64, keys []port.AttemptKey) error {
	all := slices.Clone(keys)
	t.mu.Lock()
	for _, k := range keys {
		if g := t.groups[k]; g != nil {
			t.forgetLocked(g)
			for _, r := range g.runs {
				all = append(all, r.key)
			}
		}
	}
	t.mu.Unlock()
	return t.next.Cancel(ctx, term, all)
}

// TaskResult implements port.ResultSink for the Router: a run's result
// counts toward its attempt's verdict; any other passes through.
func (t *Tally) TaskResult(ctx context.Context, r port.TaskResult) {
	t.mu.Lock()
	g := t.replicas[r.AttemptKey]
	if g == nil {
		t.mu.Unlock()
		t.cfg.Sink.TaskResult(ctx, r)
		return
	}
	run := g.run(r.AttemptKey)
	if run.done {
		t.mu.Unlock()
		return // a duplicate
	}
	run.done, run.res, run.sum = true, r, digest(r)
	var (
		final  *port.TaskResult
		extra  *port.TaskDispatch
		undone []port.AttemptKey
		votes  map[string]bool
	)
	if node := workerNode(r.WorkerID); r.WorkerID != "" && !r.Lost && slices.Contains(g.nodes(run), node) {
		final, extra = t.voidLocked(g, run, node)
	} else {
		final, extra, undone, votes = t.decideLocked(g, r)
	}
	t.mu.Unlock()

	if extra != nil {
		if errs := t.next.Dispatch(ctx, []port.TaskDispatch{*extra}); errs != nil && errs[0] != nil {
			t.mu.Lock()
			t.forgetLocked(g)
			t.mu.Unlock()
			t.cancelRuns(ctx, g, nil)
			t.cfg.Sink.TaskResult(ctx, port.TaskResult{AttemptKey: g.d.AttemptKey, Lost: true,
				Error: "verify: the tie-breaking run could not be dispatched: " + errs[0].Error()})
		}
		return
	}
	if final == nil {
		return
	}
	if len(undone) > 0 {
		t.cancelRuns(ctx, g, undone)
	}
	if t.cfg.Outcome != nil {
		for subject, agreed := range votes {
			t.cfg.Outcome(subject, agreed)
		}
	}
	t.cfg.Sink.TaskResult(ctx, *final)
}

// voidLocked sets aside run, which finished on node where another run of
// g finished already — the Waggler that placed it did not know (a
// successor inherits the runs still out, not those done) — and returns a
// replacement run kept off every voter's node, or, past maxVoidRuns, the
// attempt's failure. t.mu held.
func (t *Tally) voidLocked(g *vgroup, run *vrun, node string) (final *port.TaskResult, extra *port.TaskDispatch) {
	run.void = true
	voids := 0
	for _, r := range g.runs {
		if r.void {
			voids++
		}
	}
	orig := g.d.AttemptKey
	if voids > maxVoidRuns {
		t.forgetLocked(g)
		res := port.TaskResult{AttemptKey: orig, WorkerID: run.res.WorkerID, StartedAt: run.res.StartedAt, FinishedAt: run.res.FinishedAt,
			Error: fmt.Sprintf("verify: %d runs of the attempt finished on a node that had run it already (last %s): it cannot be verified on distinct nodes", voids, node)}
		return &res, nil
	}
	rep := runOf(g.d, len(g.runs)+1, g.nodes(nil))
	g.runs = append(g.runs, &vrun{key: rep.AttemptKey})
	t.replicas[rep.AttemptKey] = g
	t.cfg.Logger.Warn("verify: a run finished on a node that had run the attempt already: it does not count; a replacement goes elsewhere",
		zap.String("attempt", orig.IdempotencyKey()), zap.String("node", node), zap.String("run", run.key.ExecutionID))
	return nil, &rep
}

// decideLocked looks at g after a run finished with r: it returns the
// attempt's result once decided (the runs still out, to cancel, and each
// run's subject with whether it agreed), or a tie-breaking run to dispatch,
// or nothing yet. t.mu held.
func (t *Tally) decideLocked(g *vgroup, r port.TaskResult) (final *port.TaskResult, extra *port.TaskDispatch, undone []port.AttemptKey, votes map[string]bool) {
	orig := g.d.AttemptKey
	if r.Lost || (!r.OK && r.WorkerID == "") {
		// No verdict: the run never ran to an outcome.
		t.forgetLocked(g)
		res := port.TaskResult{AttemptKey: orig, Lost: r.Lost, Error: "verify: a run of the attempt ended without an outcome: " + r.Error,
			WorkerID: r.WorkerID, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt}
		return &res, nil, g.undone(), nil
	}
	counts := map[[sha256.Size]byte][]*vrun{}
	done, counted := 0, 0
	for _, run := range g.runs {
		if run.done {
			done++
		}
		if run.done && !run.void {
			counts[run.sum] = append(counts[run.sum], run)
			counted++
		}
	}
	var major []*vrun
	for _, runs := range counts {
		if len(runs) >= 2 {
			major = runs
		}
	}
	switch {
	case major != nil:
		t.forgetLocked(g)
		votes = map[string]bool{} // by subject: an outvoted program is the liar, not its node
		for _, run := range g.runs {
			if run.done && !run.void && run.res.WorkerID != "" {
				votes[WorkerSubject(run.res.WorkerID)] = run.sum == major[0].sum
			}
		}
		res := major[0].res
		res.AttemptKey = orig
		for _, run := range g.runs {
			if run.done && !run.void {
				res.StartedAt = earliest(res.StartedAt, run.res.StartedAt)
				res.FinishedAt = latest(res.FinishedAt, run.res.FinishedAt)
			}
		}
		if len(counts) > 1 {
			t.cfg.Logger.Warn("verify: the runs disagreed; the majority decided", zap.String("attempt", orig.IdempotencyKey()),
				zap.Strings("nodes", g.nodes(nil)))
		}
		return &res, nil, g.undone(), votes
	case done < len(g.runs):
		return nil, nil, nil, nil // more to come
	case counted == 2:
		// Two that disagree: a third, on neither node, breaks the tie.
		run := runOf(g.d, len(g.runs)+1, g.nodes(nil))
		g.runs = append(g.runs, &vrun{key: run.AttemptKey})
		t.replicas[run.AttemptKey] = g
		t.cfg.Logger.Info("verify: two runs disagree: a third breaks the tie", zap.String("attempt", orig.IdempotencyKey()),
			zap.Strings("nodes", g.nodes(nil)))
		return nil, &run, nil, nil
	default:
		t.forgetLocked(g)
		res := port.TaskResult{AttemptKey: orig, WorkerID: r.WorkerID, StartedAt: r.StartedAt, FinishedAt: r.FinishedAt,
			Error: fmt.Sprintf("verify: the runs on %s gave %d different outcomes: no majority", strings.Join(g.nodes(nil), ", "), len(counts))}
		return &res, nil, nil, nil
	}
}

// cancelRuns cancels keys (nil: every run of g not done) at the Router.
func (t *Tally) cancelRuns(ctx context.Context, g *vgroup, keys []port.AttemptKey) {
	if keys == nil {
		keys = g.undone()
	}
	if len(keys) == 0 {
		return
	}
	if err := t.next.Cancel(ctx, g.d.Term, keys); err != nil && !errors.Is(err, port.ErrStaleTerm) {
		t.cfg.Logger.Warn("verify: cancelling runs failed", zap.Error(err))
	}
}

// TaskProgress implements port.ResultSink: a run's progress is the
// attempt's when it is the first run's, or a notice of the Waggler layer
// (no worker: "waiting: ...") about any run; any other attempt's passes
// through.
func (t *Tally) TaskProgress(ctx context.Context, p port.TaskProgress) {
	t.mu.Lock()
	g := t.replicas[p.AttemptKey]
	pass := g == nil || g.runs[0].key == p.AttemptKey || p.WorkerID == ""
	if g != nil {
		p.AttemptKey = g.d.AttemptKey
	}
	t.mu.Unlock()
	if pass {
		t.cfg.Sink.TaskProgress(ctx, p)
	}
}

// forgetLocked drops g; t.mu held.
func (t *Tally) forgetLocked(g *vgroup) {
	delete(t.groups, g.d.AttemptKey)
	for _, r := range g.runs {
		delete(t.replicas, r.key)
	}
}

func (g *vgroup) run(k port.AttemptKey) *vrun {
	for _, r := range g.runs {
		if r.key == k {
			return r
		}
	}
	return nil
}

func (g *vgroup) undone() []port.AttemptKey {
	var out []port.AttemptKey
	for _, r := range g.runs {
		if !r.done {
			out = append(out, r.key)
		}
	}
	return out
}

// nodes lists the worker nodes of the runs that finished and count, other
// than except.
func (g *vgroup) nodes(except *vrun) []string {
	var out []string
	for _, r := range g.runs {
		if r.done && !r.void && r != except && r.res.WorkerID != "" {
			out = append(out, workerNode(r.res.WorkerID))
		}
	}
	return out
}

// digest is what runs compare: a successful output's canonical JSON, or
// the fact of failing.
func digest(r port.TaskResult) [sha256.Size]byte {
	if !r.OK {
		return sha256.Sum256([]byte("failed"))
	}
	b, err := r.OutputJSON, error(nil)
	if b == nil {
		b, err = value.Encode(r.Output)
	}
	if err != nil {
		return sha256.Sum256([]byte("unencodable:" + err.Error()))
	}
	return sha256.Sum256(append([]byte("ok:"), b...))
}

// earliest and latest compare times, a zero time counting as unknown.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
