package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/value"
)

// Hydration. A claimed instance comes with its last snapshot and the latest
// recorded result of every execution. Results are written before the
// snapshot that includes them, and snapshots are amortised, so the snapshot
// may be older than the results: Restore + Resume re-emit the dispatches
// that were in flight when it was taken, and drive answers each one whose
// result is recorded instead of running it again, feeding the result to the
// graph exactly as the first owner did. That is a deterministic replay: the
// same results in the same order of readiness give the same graph.
//
// Two refinements keep it exact across retries:
//
//   - the Store returns only the latest attempt of an execution; a dispatch
//     of an earlier attempt therefore failed (a later one exists), and is
//     answered with a failure;
//   - a retry timer for an execution whose later attempt is recorded fires
//     at once instead of waiting for its backoff;
//   - the pause before a loop's next iteration (loop.every) ends at once
//     when that iteration has a recorded result: the loop resumes at the
//     iteration it was in, and no recorded iteration runs again.
//
// Timeouts are recorded as failed results by the runloop, so a timed-out
// attempt replays as the same failure.

// recorded maps an execution id ("task", "task[3]") to its latest recorded
// result.
type recorded map[string]port.ActionResult

func newRecorded(results []port.ActionResult) recorded {
	if len(results) == 0 {
		return nil
	}
	r := make(recorded, len(results))
	for _, res := range results {
		if cur, ok := r[res.ExecutionID]; !ok || res.Attempt >= cur.Attempt {
			r[res.ExecutionID] = res
		}
	}
	return r
}

// graphResult turns a recorded result into a graph completion.
func graphResult(r port.ActionResult) graph.Result {
	if !r.OK {
		msg := r.Error
		if msg == "" {
			msg = "failed"
		}
		return graph.Result{Err: errors.New(msg)}
	}
	v, err := value.Decode(r.Output)
	if err != nil {
		return graph.Result{Err: fmt.Errorf("invalid recorded output: %w", err)}
	}
	return graph.Result{Output: v}
}

// resultBytes is what a recorded result costs in the amortisation of
// snapshots: its payload plus a fixed overhead per row.
func resultBytes(r port.ActionResult) int {
	return len(r.Output) + len(r.Error) + len(r.ExecutionID) + 32
}

// drive applies the effects of one graph call to the world through out,
// after answering from rec (which it consumes) what was already recorded.
// work is a reusable buffer; drive returns it, and the payload bytes of the
// results it replayed. Effects are applied in order; out must not call the
// graph's event methods (Complete, Fire, Cancel, Start, Resume).
func drive(g *graph.Graph, pe *planEntry, rec recorded, fx []graph.Effect, now time.Time,
	work []graph.Effect, nodes func(capability string) []string, out func(graph.Effect)) ([]graph.Effect, int) {
	work = append(work[:0], fx...) // fx aliases the graph's buffer
	replayed := 0
	for i := 0; i < len(work); i++ {
		e := work[i]
		if e.Kind == graph.Scatter && nodes != nil {
			// A task with on: every_node is ready: it runs on the nodes
			// serving its capability now, and its runs' dispatches go
			// through this loop (a recorded one is answered from rec).
			work = append(work, g.Scatter(e.Task, nodes(pe.task(e.Task.Node).GetCapability()), now)...)
			continue
		}
		if len(rec) > 0 {
			switch {
			case e.Kind == graph.Dispatch:
				exec := pe.executionID(e.Task)
				if r, ok := rec[exec]; ok && r.Attempt >= e.Attempt {
					var res graph.Result
					if r.Attempt == e.Attempt {
						delete(rec, exec)
						res = graphResult(r)
						replayed += resultBytes(r)
					} else {
						res = graph.Result{Err: fmt.Errorf("attempt %d failed (attempt %d is recorded)", e.Attempt, r.Attempt)}
					}
					work = append(work, g.Complete(e.Task, e.Attempt, res, now)...)
					continue
				}
			case e.Kind == graph.SetTimer && e.Timer.Kind == graph.Retry:
				if r, ok := rec[pe.executionID(e.Timer.Task)]; ok && r.Attempt > e.Timer.Attempt {
					work = append(work, g.Fire(e.Timer, now)...)
					continue
				}
			case e.Kind == graph.SetTimer && e.Timer.Kind == graph.Next:
				if _, ok := rec[pe.executionID(e.Timer.Task)]; ok {
					work = append(work, g.Fire(e.Timer, now)...)
					continue
				}
			}
		}
		out(e)
	}
	clear(work)
	return work[:0], replayed
}
