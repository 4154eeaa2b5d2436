package remote

import (
	"testing"
	"time"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/wag"
)

// A report crosses the wire whole: in particular whether it answers a
// cancel, which decides if the Waggler takes it as the attempt's result.
func TestReportRoundTrip(t *testing.T) {
	at := time.Unix(1_700_000_000, 42).UTC()
	for _, want := range []wag.Report{
		{Key: testKey, Generation: 1<<32 + 3, WorkerID: "w1/code.exec/1", OK: true, Output: "done", StartedAt: at, FinishedAt: at.Add(time.Second)},
		{Key: testKey, Generation: 5, WorkerID: "w1/code.exec/1", Error: "sleep: attempt cancelled", Cancelled: true, StartedAt: at, FinishedAt: at},
		{Key: testKey, Generation: 6, WorkerID: "w1/code.exec/1", Error: "attempt timed out after 1s"},
	} {
		p, err := reportToProto(9, want)
		if err != nil {
			t.Fatal(err)
		}
		got, err := reportFromProto(p)
		if err != nil {
			t.Fatal(err)
		}
		if got.Key != want.Key || got.Generation != want.Generation || got.WorkerID != want.WorkerID || got.OK != want.OK ||
			got.Output != want.Output || got.Error != want.Error || got.Cancelled != want.Cancelled ||
			!got.StartedAt.Equal(want.StartedAt) || !got.FinishedAt.Equal(want.FinishedAt) {
			t.Errorf("round trip of %+v gave %+v", want, got)
		}
	}
}

// A dispatch keeps its placement across the wire: the node a run of a
// task with on: every_node is pinned to, and a verified run's group.
func TestDispatchPlacementRoundTrip(t *testing.T) {
	want := port.TaskDispatch{AttemptKey: testKey, Term: 2, Capability: "net.scan", Action: "exec", Node: "node-b",
		Group: "g", Avoid: []string{"node-a"}}
	p, err := dispatchToProto(want)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkDispatch("dispatch", p); err != nil {
		t.Fatal(err)
	}
	got, err := dispatchFromProto(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Node != "node-b" || got.Group != "g" || len(got.Avoid) != 1 {
		t.Fatalf("round trip gave %+v", got)
	}
}
