package storetest

import (
	"testing"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
)

// BenchRecordSignals measures a storm of signals: each op records 100
// signals over 10 live instances, one RecordSignal (one transaction) each
// ("one-by-one") or in one RecordSignals ("batch"). An adapter's
// benchmark calls it with a constructor of fresh stores:
//
//	func BenchmarkRecordSignals(b *testing.B) { storetest.BenchRecordSignals(b, openBench) }
func BenchRecordSignals(b *testing.B, newStore func(b *testing.B) port.Store) {
	const (
		instances = 10
		perOp     = 100
	)
	setup := func(b *testing.B) (port.Store, []port.NewSignal) {
		s := newStore(b)
		wf, err := s.RegisterWorkflow(b.Context(), port.WorkflowVersion{Name: "bench", Version: 1, IRHash: "sha256:b", IR: []byte("b")})
		if err != nil {
			b.Fatalf("RegisterWorkflow: %v", err)
		}
		in := make([]port.NewInstance, instances)
		for i := range in {
			in[i] = port.NewInstance{ID: uuid.New(), WorkflowVersionID: wf.ID, Inputs: []byte(`{}`), State: []byte("small state")}
		}
		if _, err := s.QueueInstances(b.Context(), in); err != nil {
			b.Fatalf("QueueInstances: %v", err)
		}
		sigs := make([]port.NewSignal, perOp)
		for i := range sigs {
			sigs[i] = port.NewSignal{InstanceID: in[i%instances].ID, Name: "approve", Payload: []byte(`{"by":"bench"}`)}
		}
		return s, sigs
	}
	report := func(b *testing.B) {
		b.ReportMetric(float64(b.N*perOp)/b.Elapsed().Seconds(), "signals/s")
	}
	b.Run("one-by-one", func(b *testing.B) {
		s, sigs := setup(b)
		for b.Loop() {
			for _, sig := range sigs {
				if _, _, _, err := s.RecordSignal(b.Context(), sig); err != nil {
					b.Fatalf("RecordSignal: %v", err)
				}
			}
		}
		report(b)
	})
	b.Run("batch", func(b *testing.B) {
		s, sigs := setup(b)
		for b.Loop() {
			out, err := s.RecordSignals(b.Context(), sigs)
			if err != nil {
				b.Fatalf("RecordSignals: %v", err)
			}
			for i, o := range out {
				if o.Err != nil {
					b.Fatalf("RecordSignals outcome %d: %v", i, o.Err)
				}
			}
		}
		report(b)
	})
}
