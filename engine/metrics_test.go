package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/internal/metrics"
)

// The engine counts what it dispatches, retries and records, by
// capability, and the instances submitted and finished.
func TestMetrics(t *testing.T) {
	h := newHarness(t)
	reg := prometheus.NewPedanticRegistry()
	m := metrics.NewEngine(reg)
	e := h.start(1, func(c *engine.Config) { c.Metrics = m })
	id := h.submit(e, retryWorkflow("retry", 2), nil)
	failWith(e, h.disp.one(t, "flaky", 1), "boom")
	h.clock.AdvanceToTimer(t, 5*time.Second)
	answer(e, h.disp.one(t, "flaky", 2), "ok")
	echo(e, h.disp.one(t, "after", 1))
	if v := h.wait(e, id); v.State != port.StateComplete {
		t.Fatalf("instance ended %s: %s", v.State, v.Error)
	}

	c := m.Capability("test.cap")
	for _, tc := range []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"dispatched", c.Dispatched, 3},
		{"retried", c.Retried, 1},
		{"completed", c.Completed, 2},
		{"failed", c.Failed, 1},
		{"submitted", m.InstancesSubmitted, 1},
	} {
		if got := testutil.ToFloat64(tc.c); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	// The harness's results took a second each on their worker; the
	// failed one reports no times and is not observed.
	if n := testutil.CollectAndCount(reg, "robonet_task_duration_seconds"); n != 1 {
		t.Errorf("%d task duration series, want 1 (test.cap)", n)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP robonet_instances_finished_total Workflow instances that ended, by status (complete, failed, cancelled).
# TYPE robonet_instances_finished_total counter
robonet_instances_finished_total{status="complete"} 1
`), "robonet_instances_finished_total"); err != nil {
		t.Error(err)
	}
	for _, name := range []string{"robonet_store_commit_rows", "robonet_store_commit_seconds", "robonet_readiness_propagation_seconds"} {
		if n := testutil.CollectAndCount(reg, name); n != 1 {
			t.Errorf("%s: %d series, want 1", name, n)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Errorf("series fail the Prometheus lint: %v %+v", err, problems)
	}
}
