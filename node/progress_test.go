package node

import (
	"testing"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/graph"
)

// Progress counts a spread not expanded yet as one unit, and says that
// the total will grow; once expanded, one unit per instance.
func TestProgressOfSpreads(t *testing.T) {
	tasks := []engine.TaskView{
		{Name: "discover", Status: graph.TaskRunning, Width: -1},
		{Name: "probe", Status: graph.TaskWaiting, Width: -1, IsSpread: true},
	}
	if p := progressOf(tasks); p.GetTotal() != 2 || p.GetUnexpanded() != 1 || p.GetRunning() != 1 {
		t.Fatalf("before the spread expands: %v", p)
	}
	tasks[0].Status = graph.TaskCompleted
	tasks[1].Status, tasks[1].Width, tasks[1].Done = graph.TaskRunning, 5, 2
	if p := progressOf(tasks); p.GetTotal() != 6 || p.GetUnexpanded() != 0 || p.GetDone() != 3 || p.GetRunning() != 3 {
		t.Fatalf("after: %v", p)
	}
}
