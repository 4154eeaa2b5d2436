package engine

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/graph"
	"github.com/robonet/robonet/engine/port"
)

// judgeResult records a success only for a value the accept check takes
// (a value not canonical yet is normalised first); anything else is
// recorded, and told to the graph, as a failure that says why.
func TestJudgeResult(t *testing.T) {
	plan := testPlan(t, oneTaskSpec)
	g := plan.NewGraph("i1")
	if _, err := g.Start(nil, time.Unix(1000, 0)); err != nil {
		t.Fatal(err)
	}
	id, ref := uuid.New(), graph.Ref(0)
	result := func(ok bool, out any, why string) *port.TaskResult {
		return &port.TaskResult{AttemptKey: port.AttemptKey{InstanceID: id, ExecutionID: "a", Attempt: 1}, OK: ok, Output: out,
			Error: why, WorkerID: "n1/w1"}
	}
	for _, c := range []struct {
		name   string
		r      *port.TaskResult
		output string // the recorded JSON of a success
		err    string // the start of the recorded error of a failure
	}{
		{"accepted", result(true, map[string]any{"score": int64(2)}, ""), `{"score":2}`, ""},
		{"accepted once normalised", result(true, map[string]any{"score": 3}, ""), `{"score":3}`, ""},
		{"rejected by accept", result(true, map[string]any{"score": int64(0)}, ""), "", "not accepted: "},
		{"not a value", result(true, map[string]any{"score": math.NaN()}, ""), "", "invalid output: "},
		{"failed", result(false, nil, "exit 1"), "", "exit 1"},
		{"failed saying nothing", result(false, nil, ""), "", "failed"},
	} {
		ar, res := judgeResult(g, id, ref, c.r)
		if ar.InstanceID != id || ar.ExecutionID != "a" || ar.Attempt != 1 || ar.WorkerID != "n1/w1" {
			t.Errorf("%s: recorded as %+v", c.name, ar)
		}
		if c.err == "" {
			if !ar.OK || string(ar.Output) != c.output || res.Err != nil || res.Output == nil {
				t.Errorf("%s: got %+v and %+v, want a success recording %s", c.name, ar, res, c.output)
			}
			continue
		}
		if ar.OK || !strings.HasPrefix(ar.Error, c.err) || res.Err == nil || res.Err.Error() != ar.Error || res.Output != nil {
			t.Errorf("%s: got %+v and %+v, want a failure %q…", c.name, ar, res, c.err)
		}
	}
}
