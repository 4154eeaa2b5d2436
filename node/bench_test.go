package node

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/postgres"
	"github.com/robonet/robonet/engine/store/postgres/pgtest"
	"github.com/robonet/robonet/engine/store/sqlite"
	"github.com/robonet/robonet/wag"
)

// End-to-end benchmarks of one node: the engine, the real worker pools of
// package wag running the built-in echo action, and a real store. They are
// the figures in docs/benchmarks.md:
//
//	scripts/with-postgres go test -run '^$' -bench . -benchtime 3x ./node/

type benchStore struct {
	name string
	open func(b *testing.B) port.Store
}

var benchStores = []benchStore{
	{"sqlite", func(b *testing.B) port.Store {
		s, err := sqlite.Open(context.Background(), sqlite.Config{Path: b.TempDir() + "/robonet.db"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}},
	{"postgres", func(b *testing.B) port.Store {
		dsn, schema := pgtest.Schema(b)
		s, err := postgres.Open(context.Background(), postgres.Config{DSN: dsn, Schema: schema})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	}},
}

// firstDispatch wraps the Router and records when each instance's first
// task was handed to it.
type firstDispatch struct {
	*wag.Router
	mu    sync.Mutex
	first map[uuid.UUID]time.Time
}

func (d *firstDispatch) Dispatch(ctx context.Context, tasks []port.TaskDispatch) []error {
	now := time.Now()
	d.mu.Lock()
	for _, t := range tasks {
		if _, ok := d.first[t.InstanceID]; !ok {
			d.first[t.InstanceID] = now
		}
	}
	d.mu.Unlock()
	return d.Router.Dispatch(ctx, tasks)
}

// benchNode is the node's wiring (see Node.Start) without the network
// servers: store → engine → Router → this node's Waggler host → its pools,
// results back the same way.
type benchNode struct {
	eng      *engine.Engine
	dispatch *firstDispatch
}

func startBenchNode(b *testing.B, store port.Store) *benchNode {
	b.Helper()
	n := newBenchNode(b, store)
	if err := n.eng.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	return n
}

// newBenchNode wires the node with its worker pools running and the engine
// built but not started: an engine that is not running still accepts
// submissions, which queue in the store.
func newBenchNode(b *testing.B, store port.Store) *benchNode {
	b.Helper()
	cfg := wag.Config{NodeName: "bench", Capabilities: map[string]int{"core": 64}, Logger: zap.NewNop()}
	workers, err := wag.NewWorkerHost(cfg)
	if err != nil {
		b.Fatal(err)
	}
	host, err := wag.NewWagglerHost(cfg)
	if err != nil {
		b.Fatal(err)
	}
	dir := wag.NewStaticDirectory("bench", host)
	dir.Assign("core", 1)
	t := &termEngine{}
	router, err := wag.NewRouter(wag.RouterConfig{Term: 1, Sink: &lateSink{t: t}, Directory: dir, Logger: zap.NewNop(),
		Holds: func(id uuid.UUID) bool { return t.Holds(id) }})
	if err != nil {
		b.Fatal(err)
	}
	d := &firstDispatch{Router: router, first: map[uuid.UUID]time.Time{}}
	t.router = router
	if t.Engine, err = engine.New(engine.Config{Store: store, Dispatcher: d, Logger: zap.NewNop(), NodeName: "bench", Term: 1}); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	for _, start := range []func(context.Context) error{workers.Start, host.Start, router.Start} {
		if err := start(ctx); err != nil {
			b.Fatal(err)
		}
	}
	wag.FollowLocal(workers, host)
	b.Cleanup(func() {
		if err := t.Stop(ctx); err != nil {
			b.Error(err)
		}
		_ = host.Stop(ctx)
		if err := workers.Stop(ctx); err != nil {
			b.Error(err)
		}
	})
	return &benchNode{eng: t.Engine, dispatch: d}
}

func echoChain(n int) string {
	s := "name: chain\nversion: 1\ntasks:\n  t0: {capability: core, action: echo, with: {v: 0}}\n"
	for i := 1; i < n; i++ {
		s += fmt.Sprintf("  t%d: {needs: [t%d], capability: core, action: echo, with: {v: \"${{ tasks.t%d.output.v + 1 }}\"}}\n", i, i-1, i-1)
	}
	return s + fmt.Sprintf("outputs:\n  v: ${{ tasks.t%d.output.v }}\n", n-1)
}

const echoSpread = `
name: wide
version: 1
inputs:
  items: {type: list}
tasks:
  work:
    spread: ${{ inputs.items }}
    capability: core
    action: echo
    with: {x: "${{ item }}"}
outputs:
  n: ${{ size(tasks.work.output) }}
`

// BenchmarkEchoThroughput measures tasks per second, end to end on one node:
// one instance with a 10,000-wide spread, and 1,000 instances of a 10-task
// chain. Like a job queue's burn-down benchmark, the instances are queued
// first; timing runs from the engine's start to the last instance COMPLETE
// (claim, hydrate, dispatch to the pools, run echo, persist every result,
// complete). Submission latency is BenchmarkSubmitToFirstDispatch's.
func BenchmarkEchoThroughput(b *testing.B) {
	items := make([]any, 10_000)
	for i := range items {
		items[i] = i
	}
	for _, st := range benchStores {
		b.Run(st.name+"/spread10000", func(b *testing.B) {
			runThroughput(b, st, echoSpread, 1, len(items), map[string]any{"items": items})
		})
		b.Run(st.name+"/chains1000x10", func(b *testing.B) {
			runThroughput(b, st, echoChain(10), 1000, 10, nil)
		})
	}
}

// completionCounter observes the store: done is closed once want instances
// have been durably completed (CompleteInstances committed without error).
type completionCounter struct {
	port.Store
	mu         sync.Mutex
	want, have int
	done       chan struct{}
}

func (c *completionCounter) CompleteInstances(ctx context.Context, batch []port.Completion) ([]error, error) {
	outcomes, err := c.Store.CompleteInstances(ctx, batch)
	if err == nil {
		c.mu.Lock()
		for i, comp := range batch {
			if outcomes[i] == nil && comp.Status == port.StateComplete {
				c.have++
			}
		}
		if c.have == c.want {
			close(c.done)
		}
		c.mu.Unlock()
	}
	return outcomes, err
}

func runThroughput(b *testing.B, st benchStore, spec string, instances, tasksPer int, inputs map[string]any) {
	var total time.Duration
	for b.Loop() {
		b.StopTimer()
		counter := &completionCounter{Store: st.open(b), want: instances, done: make(chan struct{})}
		n := newBenchNode(b, counter)
		ctx := context.Background()
		info, err := n.eng.RegisterWorkflow(ctx, "bench.yaml", []byte(spec))
		if err != nil {
			b.Fatal(err)
		}
		ids := make([]uuid.UUID, instances)
		for i := range ids {
			res, err := n.eng.Submit(ctx, engine.SubmitRequest{Name: info.Name, Version: info.Version, Inputs: inputs})
			if err != nil {
				b.Fatal(err)
			}
			ids[i] = res.InstanceID
		}
		b.StartTimer()
		start := time.Now()
		if err := n.eng.Start(ctx); err != nil {
			b.Fatal(err)
		}
		select {
		case <-counter.done:
		case <-time.After(2 * time.Minute):
			b.Fatalf("%d of %d instances completed in 2 minutes", counter.have, instances)
		}
		total += time.Since(start)
		b.StopTimer()
		for _, id := range ids { // every instance really is COMPLETE
			waitComplete(b, n.eng, id)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N*instances*tasksPer)/total.Seconds(), "tasks/s")
}

func waitComplete(b *testing.B, eng *engine.Engine, id uuid.UUID) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var last port.InstanceState
	err := eng.WatchInstance(ctx, id, 0, func(ev engine.Event) error {
		last = ev.State
		return nil
	})
	if err != nil || last != port.StateComplete {
		b.Fatalf("instance %s ended %s (%v)", id, last, err)
	}
}

// BenchmarkSubmitToFirstDispatch submits single-task workflows at a steady
// 100 per second and reports the latency from the Submit call to the first
// dispatch of the instance to the worker pools, p50 and p99.
func BenchmarkSubmitToFirstDispatch(b *testing.B) {
	const rate, count = 100, 500 // 5 s of steady load
	for _, st := range benchStores {
		b.Run(st.name, func(b *testing.B) {
			var lat []time.Duration
			for b.Loop() {
				n := startBenchNode(b, st.open(b))
				ctx := context.Background()
				info, err := n.eng.RegisterWorkflow(ctx, "one.yaml", []byte("name: one\nversion: 1\ntasks:\n  t: {capability: core, action: echo, with: {v: 1}}\n"))
				if err != nil {
					b.Fatal(err)
				}
				submitted := make(map[uuid.UUID]time.Time, count)
				tick := time.NewTicker(time.Second / rate)
				for range count {
					<-tick.C
					at := time.Now()
					res, err := n.eng.Submit(ctx, engine.SubmitRequest{Name: info.Name, Version: info.Version})
					if err != nil {
						b.Fatal(err)
					}
					submitted[res.InstanceID] = at
				}
				tick.Stop()
				for id := range submitted {
					waitComplete(b, n.eng, id)
				}
				n.dispatch.mu.Lock()
				for id, at := range submitted {
					lat = append(lat, n.dispatch.first[id].Sub(at))
				}
				n.dispatch.mu.Unlock()
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
