package graph

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"

	"github.com/robonet/robonet/engine/value"
)

// Waits. A wait task (Task.wait) runs nothing: each attempt is a Dispatch
// with a nil Input, and the runloop does not send it to a worker.
//
//   - A signal wait is completed by the runloop, with Complete and the
//     signal's payload as the output, when a signal of its name reaches
//     the instance. wait.timeout is the task's timeout: the Timeout timer
//     fails the attempt ("timed out waiting for signal approve after
//     48h0m0s") and on_failure applies.
//   - A wait for a duration, or until a time, asks for a WaitOver timer
//     with the attempt; its Fire completes the attempt, the output being
//     the due time in RFC 3339 (UTC). until is evaluated when the task is
//     ready; a value that is not an RFC 3339 time fails the task before
//     its first attempt, without retry. A time already past is due at
//     once (the timer's At is the later of it and now).
//
// The due time of a WaitOver timer is kept like a timeout deadline: it is
// in the snapshot, Task reports it as Due, and Resume asks for the timer
// again with it.

// WaitKind is what a wait task waits for.
type WaitKind uint8

const (
	// WaitSignal: a signal sent to the instance (Plan.Wait names it).
	WaitSignal WaitKind = iota + 1
	// WaitFor: a duration from the attempt's dispatch.
	WaitFor
	// WaitUntil: a time, evaluated when the task is ready.
	WaitUntil
)

func (k WaitKind) String() string {
	switch k {
	case WaitSignal:
		return "signal"
	case WaitFor:
		return "for"
	case WaitUntil:
		return "until"
	}
	return fmt.Sprintf("WaitKind(%d)", uint8(k))
}

// eventNameRE is the syntax of signal and event names (as the spec
// compiler checks it).
var eventNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,127}$`)

// maxTriggerEvents bounds the events of a trigger (as the spec compiler
// does).
const maxTriggerEvents = 16

// compileWait checks a wait task (after compileFailure, whose timeout it
// replaces) and compiles its until. A wait task runs nothing, so it has no
// action, child, input, verification, fan-out, loop, placement, acceptance
// check or timeout of its own.
func (p *Plan) compileWait(nd *node, t *robonetv1.Task) error {
	w := t.GetWait()
	if w == nil {
		return nil
	}
	switch {
	case t.GetCapability() != "" || t.GetAction() != "" || t.GetWorkflow() != nil || t.GetWith() != nil:
		return planErr("task %q: a wait task has no capability, action, workflow or with", nd.name)
	case t.GetVerify() > 1 || t.GetSpread() != nil || t.GetLoop() != nil || t.GetOn() != robonetv1.TaskOn_TASK_ON_UNSPECIFIED:
		return planErr("task %q: a wait task cannot have verify, spread, loop or on", nd.name)
	case t.GetAccept() != nil || t.GetTimeout().AsDuration() != 0:
		return planErr("task %q: a wait task cannot have accept or a timeout of its own", nd.name)
	}
	kinds := 0
	if w.GetSignal() != "" {
		kinds++
		nd.wait = WaitSignal
	}
	if w.GetDuration() != nil {
		kinds++
		nd.wait = WaitFor
	}
	if w.GetUntil() != nil || w.GetUntilText() != "" {
		kinds++
		nd.wait = WaitUntil
	}
	if kinds != 1 {
		return planErr("task %q: a wait needs exactly one of signal, duration and until", nd.name)
	}
	if w.GetTimeout() != nil && nd.wait != WaitSignal {
		return planErr("task %q: wait.timeout goes with signal only", nd.name)
	}
	p.waits = true
	switch nd.wait {
	case WaitSignal:
		if !eventNameRE.MatchString(w.GetSignal()) {
			return planErr("task %q: invalid signal name %q", nd.name, w.GetSignal())
		}
		nd.signal = w.GetSignal()
		if nd.timeout = w.GetTimeout().AsDuration(); nd.timeout < 0 {
			return planErr("task %q: wait.timeout must not be negative", nd.name)
		}
	case WaitFor:
		if nd.waitFor = w.GetDuration().AsDuration(); nd.waitFor <= 0 {
			return planErr("task %q: wait.duration must be positive", nd.name)
		}
	case WaitUntil:
		nd.untilText = w.GetUntilText()
		if w.GetUntil() == nil {
			if _, err := time.Parse(time.RFC3339, nd.untilText); err != nil {
				return planErr("task %q: wait.until %q is not an RFC 3339 time", nd.name, nd.untilText)
			}
			break
		}
		var err error
		if nd.until, err = p.env.Compile(w.GetUntil().GetSource()); err != nil {
			return planErr("task %q: wait.until: %v", nd.name, err)
		}
		if nd.untilText == "" {
			nd.untilText = "${{ " + nd.until.Source() + " }}"
		}
	}
	return nil
}

// compileTrigger checks the workflow's trigger: 1 to 16 event names,
// sorted and unique, and an input named event to carry the payload.
func (p *Plan) compileTrigger() error {
	tr := p.wf.GetTrigger()
	if tr == nil {
		return nil
	}
	ev := tr.GetEvents()
	switch {
	case len(ev) == 0 || len(ev) > maxTriggerEvents:
		return planErr("trigger has %d events, not 1 to %d", len(ev), maxTriggerEvents)
	case !slices.IsSorted(ev) || len(slices.Compact(slices.Clone(ev))) != len(ev):
		return planErr("trigger events are not sorted and unique")
	case !slices.ContainsFunc(p.inputs, func(s inputSpec) bool { return s.name == "event" }):
		return planErr("a workflow with a trigger must declare the input event")
	}
	for _, e := range ev {
		if !eventNameRE.MatchString(e) {
			return planErr("trigger: invalid event name %q", e)
		}
	}
	return nil
}

// Wait returns what task node waits for, when it is a wait task: the
// signal's name for WaitSignal ("" otherwise), and the kind.
func (p *Plan) Wait(node int32) (signal string, kind WaitKind, ok bool) {
	if node < 0 || int(node) >= len(p.nodes) || p.nodes[node].wait == 0 {
		return "", 0, false
	}
	nd := &p.nodes[node]
	return nd.signal, nd.wait, true
}

// HasWaits reports whether some task of the plan is a wait task.
func (p *Plan) HasWaits() bool { return p.waits }

// Trigger returns the events that start instances of the workflow, sorted;
// nil when it has no trigger. Read-only.
func (p *Plan) Trigger() []string { return p.wf.GetTrigger().GetEvents() }

// waitsOver reports whether attempts of the task end with a WaitOver timer.
func (n *node) waitsOver() bool { return n.wait == WaitFor || n.wait == WaitUntil }

// runningDue reports whether a running attempt of the task has a due time:
// a timeout deadline, or the end of a wait for a duration or until a time.
func (n *node) runningDue() bool { return n.timeout > 0 || n.waitsOver() }

// untilTime evaluates the until of a wait task (in the scope of its with)
// and returns the time, or why it is not one.
func (g *Graph) untilTime(node int32) (int64, string) {
	nd := &g.plan.nodes[node]
	text := nd.untilText
	if nd.until != nil {
		g.sc.reset(g.cutoffOf(node))
		v, err := nd.until.Eval(&g.sc)
		if err != nil {
			return 0, "wait.until: " + err.Error()
		}
		s, ok := v.(string)
		if !ok {
			return 0, fmt.Sprintf("wait.until: %s must yield an RFC 3339 time, got %s", nd.untilText, value.TypeName(v))
		}
		text = s
	}
	t, err := time.Parse(time.RFC3339, text)
	if err != nil {
		return 0, fmt.Sprintf("wait.until: %s is not an RFC 3339 time (e.g. 2026-03-01T09:00:00Z)", value.QuoteClipped(text, 64))
	}
	// Before 1678 or after 2262 a time does not fit in Unix nanoseconds.
	if t.Year() < 1678 || t.Year() > 2261 {
		return 0, fmt.Sprintf("wait.until: %s is out of range", value.QuoteClipped(text, 64))
	}
	return t.UnixNano(), ""
}

// dispatchWait starts attempt of ref, a wait task: a Dispatch with no
// input and, for a signal, its timeout; for a duration or until a time, a
// WaitOver timer at the later of until and now.
func (g *Graph) dispatchWait(ref TaskRef, attempt uint32, until int64, now time.Time) {
	nd := &g.plan.nodes[ref.Node]
	g.stats.Dispatched++
	g.emit(Effect{Kind: Dispatch, Task: ref, Attempt: attempt})
	kind, at := Timeout, int64(0)
	switch nd.wait {
	case WaitFor:
		kind, at = WaitOver, addNanos(now.UnixNano(), nd.waitFor)
	case WaitUntil:
		kind, at = WaitOver, max(until, now.UnixNano())
	default:
		if nd.timeout <= 0 {
			g.set(ref, TaskRunning, attempt, 0, false)
			return
		}
		at = addNanos(now.UnixNano(), nd.timeout)
	}
	g.set(ref, TaskRunning, attempt, at, true)
	g.emit(Effect{Kind: SetTimer, Timer: Timer{Kind: kind, Task: ref, Attempt: attempt, At: unixTime(at)}})
}

// waitOver completes attempt of ref, a wait for a duration or until a
// time, whose WaitOver timer fired: the output is the due time.
func (g *Graph) waitOver(ref TaskRef, now time.Time) {
	g.stats.Completed++
	g.succeeded(ref, unixTime(g.due[ref.Node]).Format(time.RFC3339Nano), now)
}

// timeoutReason is the error of an attempt whose Timeout timer fired.
func (nd *node) timeoutReason() string {
	if nd.wait == WaitSignal {
		return fmt.Sprintf("timed out waiting for signal %s after %s", nd.signal, nd.timeout)
	}
	return "timed out after " + nd.timeout.String()
}

// Downstream returns nodes and every task reachable from them by needs
// (the tasks that need them, directly or not), sorted, without duplicates.
// Nodes out of range are ignored. It is what a retry from those tasks runs
// again.
func (p *Plan) Downstream(nodes []int32) []int32 {
	n := int32(len(p.nodes))
	seen := make([]bool, n)
	var stack []int32
	for _, x := range nodes {
		if x >= 0 && x < n && !seen[x] {
			seen[x] = true
			stack = append(stack, x)
		}
	}
	out := slices.Clone(stack)
	for len(stack) > 0 {
		cur := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, s := range p.successors(cur) {
			if s < n && !seen[s] {
				seen[s] = true
				stack = append(stack, s)
				out = append(out, s)
			}
		}
	}
	slices.Sort(out)
	return out
}

// SetAttemptBase makes every execution of task node (each spread instance
// and loop iteration too) number its attempts from base+1 instead of 1,
// with its retry budget (retry.max_attempts) counted from base: attempts
// base+1 .. base+max_attempts. A retried instance sets it for the tasks it
// runs again, so their execution IDs differ from the first run's. The
// backoff starts again from the first delay. Call it after NewGraph,
// before Start; it is ignored otherwise, and for a node out of range. It
// is part of the snapshot. base is at most math.MaxUint32 - 1 (larger is
// clamped).
func (g *Graph) SetAttemptBase(node int32, base uint32) {
	if g.state != Pending || node < 0 || int(node) >= len(g.plan.nodes) {
		return
	}
	base = min(base, math.MaxUint32-1)
	if g.base == nil {
		if base == 0 {
			return
		}
		g.base = make([]uint32, len(g.plan.nodes))
	}
	g.base[node] = base
}

// AttemptBase is the base SetAttemptBase set for node (0 when none).
func (g *Graph) AttemptBase(node int32) uint32 {
	if g.base == nil || node < 0 || int(node) >= len(g.base) {
		return 0
	}
	return g.base[node]
}

// first is the number of the first attempt of an execution of node.
func (g *Graph) first(node int32) uint32 { return g.AttemptBase(node) + 1 }
