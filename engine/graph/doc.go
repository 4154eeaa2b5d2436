// Package graph is the pure execution graph of the engine: it decides, for
// one workflow instance, what runs next. It implements the readiness model
// ("The readiness model" in docs/architecture.md) as a deterministic state
// machine with no clock, no
// goroutine, no randomness and no I/O.
//
// # Plan and Graph
//
// A Plan is compiled once per workflow version from the IR
// (robonetv1.Workflow): tasks are numbered in IR order (sorted by name),
// expressions are compiled, and every task gets the list of its direct
// successors. A Plan is read-only and shared by all instances.
//
// A Graph is the state of one instance. The runloop feeds it events and
// applies the Effects it returns:
//
//	Start(inputs, now)                   PENDING → RUNNING, roots become ready
//	Complete(ref, attempt, result, now)  an attempt finished
//	Fire(timer, now)                     a timer asked for by SetTimer is due
//	Cancel(now)                          the user cancelled the instance
//
//	Dispatch   run an attempt of a task (or spread instance) with an input
//	Cancel     stop an in-flight attempt
//	SetTimer   call Fire at a time (retry backoff, attempt timeout, the
//	           pause of a loop, the end of a wait)
//	Finished   the instance reached COMPLETE, FAILED or CANCELLED
//
// Time is an argument of every event; the same sequence of calls always
// yields the same effects, state and snapshot bytes.
//
// # Readiness
//
// Every node counts its unresolved required predecessors. A task requires
// the tasks in its `needs`; the output node, which evaluates the workflow
// outputs, requires every sink (every task no other task needs). A task is
// resolved when it completed, failed under on_failure skip, or was skipped.
// Resolving a task decrements the counters of its direct successors only —
// O(d) per resolution, never a scan of the graph — and a successor whose
// counter reaches zero is ready. Ready nodes go through a worklist in the
// same call, so a skip cascading down a chain of a million tasks needs no
// recursion. A task with a single predecessor is handled inline in that
// loop: there is no separate join node.
//
// # Joins
//
// A task with join.min counts its needs that completed instead: it is
// decided on the min-th completion, or as soon as more than
// len(needs)-min of them failed, were skipped or were cancelled (then
// min can no longer be reached: the task is skipped when every need
// resolved so far was skipped, and fails before its first attempt under
// its policy otherwise). Needs that resolve after the decision (the rest)
// change nothing for it: O(1) each. Decided joins are handled once the
// worklist is empty, lowest node first, so what a join sees does not
// depend on the order of the worklist. Under cancel_rest the rest are
// cancelled on the decision (Cancel effects for attempts in flight; a
// waiting task never runs) and resolve as skipped for their other
// successors. A join's expressions read the tasks resolved when it fired
// (every task's resolution is numbered), so a retry, Resume or Restore
// evaluates them the same way, however many of the rest completed since.
// Since a join may run before every task upstream of it resolved, in a
// plan with joins the output node requires every task, not only the sinks.
//
// # Loops
//
// A task with a loop runs its iterations one after the other: iteration i
// is TaskRef{Node, Index: i}, dispatched once iteration i-1 completed and,
// with loop.every, once a Next timer set then has fired (no attempt is in
// flight meanwhile). Each iteration has its own attempts, retries and
// timeout; its with reads iteration, previous (the output of iteration
// i-1, null at 0) and, in a loop over a list, item. A loop over a list
// evaluates the list once, when the task is ready; an empty list completes
// the task with [], and a list longer than loop.max (or Options.MaxLoop)
// fails it without retry. A loop with until evaluates it after every
// successful iteration (with output, iteration and previous): true
// completes the task; an error or a non-bool fails it, as reaching
// loop.max does. The task's output is the list of iteration outputs in
// order. An iteration's completion touches the loop head alone, O(1); the
// task resolves, and its successors hear of it, only when the loop ends.
// An iteration that exhausts its attempts fails the loop under the task's
// policy (skip: the task is failed and its dependents run).
//
// # One run on every node
//
// A task with on: every_node does not know where it runs until it is
// ready: the nodes serving its capability are the mesh's, not the
// graph's. Ready, it emits a Scatter effect and waits (TaskSpreading,
// width 0); the runloop answers at once with Graph.Scatter and the nodes
// it sees. The task then is a spread over the node names, sorted: run i
// is TaskRef{Node, Index: i}, pinned to node i (Graph.NodeOf), its with
// reading item (the node's name) and index. Its output is the list of
// {node, output} in node order. No node fails the task before its first
// attempt ("no node serves CAP"). The runloop answers after the other
// effects of the event that made the task ready, so a task a join's
// cancel_rest cancelled in that same event has its Scatter ignored. The list is part of the snapshot, so a
// restored graph never asks again; one restored while it waits asks
// again on Resume.
//
// # Child workflows
//
// A task whose body is another workflow (Task.workflow) is scheduled as any
// task is: each attempt is a Dispatch whose input (its with) is the child
// instance's inputs, and Complete brings the child's outputs or its
// failure, so spreads, loops, retries, timeouts and cancels apply as they
// are; Plan.Child names the workflow, and starting the child is the
// runloop's. The graph bounds children deterministically, so that a replay
// refuses exactly what the first run did: an instance at
// Options.MaxChildDepth (its depth set by SetDepth) starts none, and one
// starts at most Options.MaxChildren in its life (the count is in the
// snapshot). A refused attempt fails without retry, like a with that
// cannot be evaluated.
//
// # Waits
//
// A wait task (Task.wait) runs nothing. Each attempt is a Dispatch with a
// nil Input, numbered as any attempt, which the runloop does not send to a
// worker; Plan.Wait says what the task waits for:
//
//   - WaitSignal: a signal of that name sent to the instance. The runloop
//     completes the attempt with Complete, the signal's payload as the
//     output. wait.timeout is the task's timeout: when its Timeout timer
//     fires first, the attempt fails ("timed out waiting for signal
//     approve after 48h0m0s") and the task's retry and on_failure apply;
//     without one, the attempt waits forever.
//   - WaitFor: a duration. The Dispatch comes with SetTimer{Kind:
//     WaitOver, At: now + duration}; Fire of that timer, while the attempt
//     is in flight, completes it, its output being At in RFC 3339 (UTC,
//     time.RFC3339Nano).
//   - WaitUntil: a time. The until expression is evaluated when the task
//     is ready (after when, in the scope of a with): anything but an RFC
//     3339 time fails the task before its first attempt, without retry.
//     The WaitOver timer is set at the later of that time and now, and
//     completes the attempt as for WaitFor.
//
// The due time of a WaitOver timer is kept as a timeout deadline is: in
// the snapshot, as TaskInfo.Due, and in the SetTimer that Resume emits
// again with the original At. A wait task has no spread, loop or on, so it
// is always TaskRef{Node, Index: -1}. Plan.HasWaits reports whether a plan
// has any, Plan.Trigger the events that start instances of the workflow
// (the graph does nothing with them).
//
// # Running tasks again
//
// A failed or cancelled instance can be run again from some tasks: those
// and the tasks that need them, directly or not (Plan.Downstream). So that
// the new attempts do not reuse execution IDs of the first run, the
// runloop calls SetAttemptBase(node, base) on a new Graph, before Start,
// for each of them: every execution of the task (each spread instance and
// loop iteration too) then numbers its attempts from base+1, its retry
// budget counting from base (attempts base+1 .. base+max_attempts) and its
// backoff starting again from the first delay. The bases are part of the
// snapshot.
//
// A ready task is handled in this order:
//
//  1. If every predecessor was skipped (by its guard or by this rule), the
//     task is skipped without evaluating anything: a guard that is false
//     skips the subtree that depends only on it. A task with at least one
//     predecessor that was not skipped runs, and reads null as the output
//     of skipped and failed predecessors.
//  2. `when` is evaluated: false skips the task. A result that is not a
//     bool, or an evaluation error, fails the task without retry (the
//     result would be the same every time).
//  3. `spread` is evaluated. A result that is not a list, or has more than
//     Options.MaxSpreadWidth elements, fails the task without retry. An
//     empty list completes the task with output [] and dispatches nothing.
//     Otherwise the task becomes N instances, TaskRef{Node, Index: 0..N-1},
//     each dispatched with `with` evaluated for item = list[i], index = i.
//     The instances share a barrier that fires when all N are resolved;
//     the task's output is then the list of instance outputs in index
//     order (null for instances that failed under skip).
//  4. A loop task starts its loop (see Loops); a task with on: every_node
//     asks for its nodes (see One run on every node).
//  5. A wait task starts waiting (see Waits).
//  6. Otherwise `with` is evaluated and attempt 1 (base+1 with an attempt
//     base) is dispatched.
//
// A `with` that cannot be evaluated fails the attempt without retry.
//
// # Failures, retries and timeouts
//
// Every task and every spread instance fails on its own. A failed attempt
// is handled by the task's on_failure policy (unspecified means retry):
//
//   - abort: the workflow FAILS at once.
//   - retry and skip: while attempt < retry.max_attempts, a Retry timer is
//     set at now + RetryDelay(attempt); when it fires, the next attempt is
//     dispatched with `with` evaluated again (upstream outputs never
//     change, so the input is the same). When attempts are exhausted, skip
//     marks the task failed with a null output and its dependents run;
//     retry FAILS the workflow.
//
// The retry delay after attempt n is min(initial * factor^(n-1), max),
// multiplied by 1 + jitter*u where u in [-1, 1) is derived from an FNV-1a
// hash of (instance ID, task name, spread index, n) — see JitterUnit. No
// random state exists, so a restored instance retries at the same times.
//
// A task with an `accept` check has every successful output judged by
// Accept before it is completed: false, a value that is not a bool, or an
// evaluation error make it a failed attempt ("not accepted: ${{ … }}"),
// handled by the policy like any other. Complete does not judge: the
// runloop calls Accept once on the live result and records the verdict, so
// a replay completes the attempt from the record, never re-evaluating.
//
// A task with a timeout gets a Timeout timer with every Dispatch. If it
// fires while that attempt is still in flight, the graph emits Cancel for
// the attempt and handles it as a failed attempt ("timed out after 30s").
//
// When the workflow FAILS, Err names the task, instance and attempt and the
// reason, every attempt still in flight gets a Cancel effect and Finished
// follows. Completions and timers that arrive later are stale: they are
// ignored and counted in Stats.
//
// # States
//
//	PENDING → RUNNING → GATHERING → COMPLETE | FAILED | CANCELLED
//
// RUNNING becomes GATHERING once no task is waiting for its predecessors
// (each one is dispatched, resolved, or waiting for a retry). When the
// output node becomes ready the outputs are evaluated and the instance is
// COMPLETE, or FAILED if an output cannot be evaluated.
//
// # Memory and cost
//
// Per-task state lives in parallel slices indexed by node. Spread instances
// are parallel slices too (status byte, attempt, output, and a due time only
// for tasks with a timeout or retries), so a pending instance costs a few
// dozen bytes, not a struct with maps. Complete, Fire and Start cost O(d)
// in the nodes they touch; Cancel, failure, Snapshot, Restore and Resume
// may be O(n).
//
// # Persistence
//
// Snapshot writes a compact, deterministic binary encoding (varints and
// canonical JSON values) of the state: inputs, status, attempt, output and
// error of every task and instance, retry times, timeout deadlines and the
// due times of waits, and the attempt bases. A section a snapshot does not
// need (the attempt bases, when every base is 0) is left out, so the bytes
// of such a snapshot are those of the versions before it existed, which
// Restore reads as they were.
// Restore rebuilds a Graph from it; Resume then returns the Dispatch effects
// of the attempts that were in flight (same attempt: dispatch is
// at-least-once, ExecutionID is the idempotency key) and the timers with
// their original due times.
package graph
