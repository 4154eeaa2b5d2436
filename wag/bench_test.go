package wag

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/internal/clock/clocktest"
)

// countingSink counts results and closes done at the n-th.
type countingSink struct {
	n, got atomic.Int64
	done   chan struct{}
}

func (s *countingSink) TaskResult(context.Context, port.TaskResult) {
	if s.got.Add(1) == s.n.Load() {
		close(s.done)
	}
}
func (s *countingSink) TaskProgress(context.Context, port.TaskProgress) {}
func (s *countingSink) TaskStarted([]Started)                           {}

// BenchmarkLocalEcho measures the Waggler layer alone: echo attempts
// dispatched in batches of 1,000 through a pool, to their results.
func BenchmarkLocalEcho(b *testing.B) {
	for _, size := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("pool=%d", size), func(b *testing.B) {
			sink := &countingSink{done: make(chan struct{})}
			sink.n.Store(int64(b.N))
			l, err := newTestNode(nodeConfig{Config: Config{Logger: zap.NewNop(), Capabilities: map[string]int{"code.exec": size}, QueueSize: 1 << 20}, sink: sink})
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			tasks := make([]port.TaskDispatch, b.N)
			for i := range tasks {
				tasks[i] = task("echo", int64(i))
			}
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < len(tasks); i += 1000 {
				if err := l.Dispatch(context.Background(), tasks[i:min(i+1000, len(tasks))]); err != nil {
					b.Fatal(err)
				}
			}
			<-sink.done
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "tasks/s")
			b.StopTimer()
			if err := l.Stop(context.Background()); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// benchWorker records its one assignment.
type benchWorker struct {
	id string
	a  Assignment
}

func (w *benchWorker) ID() string                     { return w.id }
func (w *benchWorker) Run(a Assignment)               { w.a = a }
func (w *benchWorker) Cancel(port.AttemptKey, uint64) {}

// BenchmarkWagglerMonitor10k: one Waggler watching 10,000 running attempts
// on 10,000 workers (5,000 pools of two slots). One op is one heartbeat
// interval: every attempt's heartbeat, delivered in per-pool batches as the
// Work streams deliver them, and the ladder's two ticks. Reports the
// Waggler's CPU per interval (ns/op) and as a share of one core at the
// default 5 s interval, and the heap it holds for the 10,000 attempts.
func BenchmarkWagglerMonitor10k(b *testing.B) {
	const n = 10_000
	clk := clocktest.New()
	cfg := Config{NodeName: "bench", Clock: clk, Logger: zap.NewNop(), QueueSize: 2 * n}.WithDefaults()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	w := newWaggler(cfg, "code.exec", 1, &countingSink{done: make(chan struct{})}, cfg.Logger)
	workers := make([]*benchWorker, n)
	for i := range workers {
		workers[i] = &benchWorker{id: fmt.Sprintf("node-%d/code.exec/%d", i/2, i%2+1)}
		if err := w.AddWorker(workers[i]); err != nil {
			b.Fatal(err)
		}
	}
	w.start()
	defer w.close()
	tasks := make([]port.TaskDispatch, n)
	for i := range tasks {
		tasks[i] = task("echo", int64(i))
		tasks[i].ExecutionID = fmt.Sprintf("t[%d]", i)
	}
	w.enqueue(tasks)
	runtime.GC()
	runtime.ReadMemStats(&after)
	if st := w.Status(); st.Running != n {
		b.Fatalf("status %+v: want %d running", st, n)
	}
	batch := make([]Heartbeat, 2)
	var seq uint64
	b.ResetTimer()
	for b.Loop() {
		seq++
		for i := 0; i < n; i += 2 {
			for j := range 2 {
				wk := workers[i+j]
				batch[j] = Heartbeat{Key: wk.a.AttemptKey, Generation: wk.a.Generation, WorkerID: wk.id, Seq: seq}
			}
			w.Heartbeats(batch)
		}
		clk.Advance(cfg.HeartbeatInterval) // two ladder ticks
	}
	b.StopTimer()
	if st := w.Status(); st.Running != n || st.Failovers != 0 {
		b.Fatalf("status %+v: every attempt must still run, none failed over", st)
	}
	perInterval := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	b.ReportMetric(100*perInterval/float64(cfg.HeartbeatInterval.Nanoseconds()), "%core@5s")
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "heap-MiB")
}
