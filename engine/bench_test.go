package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
)

// echoDispatcher answers every attempt at once with its input, through the
// engine's ResultSink: the benchmarks measure the engine and the store, not
// workers.
type echoDispatcher struct {
	sink atomic.Pointer[engine.Engine]
}

func (d *echoDispatcher) Dispatch(ctx context.Context, tasks []port.TaskDispatch) []error {
	e := d.sink.Load()
	for _, t := range tasks {
		e.TaskResult(ctx, port.TaskResult{AttemptKey: t.AttemptKey, OK: true, Output: t.Input})
	}
	return nil
}

func (d *echoDispatcher) Cancel(context.Context, uint64, []port.AttemptKey) error { return nil }

func (d *echoDispatcher) Nodes(string) []string { return []string{"bench"} }

func chainOf(n int) string {
	s := "name: chain10\nversion: 1\ntasks:\n  t0: {capability: test.cap, action: echo, with: {v: 0}}\n"
	for i := 1; i < n; i++ {
		s += fmt.Sprintf("  t%d: {needs: [t%d], capability: test.cap, action: echo, with: {v: \"${{ tasks.t%d.output.v + 1 }}\"}}\n", i, i-1, i-1)
	}
	return s + fmt.Sprintf("outputs:\n  v: ${{ tasks.t%d.output.v }}\n", n-1)
}

// runBench submits instances and waits for all of them; it reports tasks/s.
func runBench(b *testing.B, open func(testing.TB) port.Store, spec string, instances, tasksPer int, inputs map[string]any) {
	for b.Loop() {
		b.StopTimer()
		store := open(b)
		d := &echoDispatcher{}
		e, err := engine.New(engine.Config{Store: store, Dispatcher: d, Logger: zap.NewNop(), Term: 1})
		if err != nil {
			b.Fatal(err)
		}
		d.sink.Store(e)
		ctx := context.Background()
		info, err := e.RegisterWorkflow(ctx, "bench.yaml", []byte(spec))
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]uuid.UUID, instances)
		for i := range ids {
			res, err := e.Submit(ctx, engine.SubmitRequest{Name: info.Name, Version: info.Version, Inputs: inputs})
			if err != nil {
				b.Fatal(err)
			}
			ids[i] = res.InstanceID
		}
		b.StartTimer()
		start := time.Now()
		if err := e.Start(ctx); err != nil {
			b.Fatal(err)
		}
		for _, id := range ids {
			err := e.WatchInstance(ctx, id, 0, func(engine.Event) error { return nil })
			if err != nil {
				b.Fatal(err)
			}
		}
		elapsed := time.Since(start)
		b.StopTimer()
		b.ReportMetric(float64(instances*tasksPer)/elapsed.Seconds(), "tasks/s")
		if err := e.Stop(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkEngine runs echo tasks end to end: one instance with a
// 10,000-wide spread, and 1,000 instances of a 10-task chain.
//
//	scripts/with-postgres go test -run '^$' -bench BenchmarkEngine -benchtime 3x ./engine/
func BenchmarkEngine(b *testing.B) {
	items := make([]any, 10_000)
	for i := range items {
		items[i] = i
	}
	for _, st := range stores {
		b.Run(st.name+"/spread10000", func(b *testing.B) {
			runBench(b, st.open, `
name: wide
version: 1
inputs:
  items: {type: list}
tasks:
  work:
    spread: ${{ inputs.items }}
    capability: test.cap
    action: echo
    with: {x: "${{ item }}"}
`, 1, len(items), map[string]any{"items": items})
		})
		b.Run(st.name+"/chains1000x10", func(b *testing.B) {
			runBench(b, st.open, chainOf(10), 1000, 10, nil)
		})
	}
}
