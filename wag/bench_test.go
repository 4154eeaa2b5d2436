package wag

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine"
)

// countingSink counts results and closes done at the n-th.
type countingSink struct {
	n, got atomic.Int64
	done   chan struct{}
}

func (s *countingSink) TaskResult(context.Context, engine.TaskResult) {
	if s.got.Add(1) == s.n.Load() {
		close(s.done)
	}
}
func (s *countingSink) TaskProgress(context.Context, engine.TaskProgress) {}

// BenchmarkLocalEcho measures the Waggler layer alone: echo attempts
// dispatched in batches of 1,000 through a pool, to their results.
func BenchmarkLocalEcho(b *testing.B) {
	for _, size := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("pool=%d", size), func(b *testing.B) {
			sink := &countingSink{done: make(chan struct{})}
			sink.n.Store(int64(b.N))
			l, err := New(Config{Sink: sink, Logger: zap.NewNop(), Capabilities: map[string]int{"code.exec": size}, QueueSize: 1 << 20})
			if err != nil {
				b.Fatal(err)
			}
			if err := l.Start(context.Background()); err != nil {
				b.Fatal(err)
			}
			tasks := make([]engine.TaskDispatch, b.N)
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
