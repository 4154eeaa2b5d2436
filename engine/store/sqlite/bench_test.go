package sqlite

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/store/storetest"
)

// BenchmarkSmallProgress is the writer's work under many short
// instances: each op is one PersistProgress of 8 instances with one result
// and a new snapshot each — the size of a group commit when chains of
// echo tasks run at 20,000 tasks a second.
//
//	go test -run '^$' -bench SmallProgress -benchmem ./engine/store/sqlite/
func BenchmarkSmallProgress(b *testing.B) {
	const instances = 8
	s := openTest(b)
	wf, err := s.RegisterWorkflow(b.Context(), port.WorkflowVersion{Name: "bench", Version: 1, IRHash: "sha256:b", IR: []byte("b")})
	if err != nil {
		b.Fatalf("RegisterWorkflow: %v", err)
	}
	batch := make([]port.NewInstance, instances)
	for i := range batch {
		batch[i] = port.NewInstance{ID: uuid.New(), WorkflowVersionID: wf.ID, Inputs: []byte(`{}`), State: []byte("small state")}
	}
	if _, err := s.QueueInstances(b.Context(), batch); err != nil {
		b.Fatalf("QueueInstances: %v", err)
	}
	owner := uuid.New()
	claimed, err := s.ClaimInstances(b.Context(), port.ClaimRequest{Owner: owner, Term: 1, Lease: time.Hour, Limit: instances})
	if err != nil || len(claimed) != instances {
		b.Fatalf("claim: %d instances, %v", len(claimed), err)
	}
	now := time.Now()
	for i := 0; b.Loop(); i++ {
		progress := make([]port.Progress, instances)
		for k, c := range claimed {
			progress[k] = port.Progress{InstanceID: c.ID, Owner: owner, State: []byte(`{"step":1}`),
				Results: []port.ActionResult{{ExecutionID: fmt.Sprintf("echo[%d]", i), Attempt: 1, OK: true,
					Output: []byte(`{"n":1}`), WorkerID: "w1", StartedAt: now, FinishedAt: now}}}
		}
		outcomes, err := s.PersistProgress(b.Context(), progress)
		if err != nil {
			b.Fatalf("PersistProgress: %v", err)
		}
		for _, err := range outcomes {
			if err != nil {
				b.Fatalf("outcome: %v", err)
			}
		}
	}
}

// BenchmarkRecordSignals is a storm of signals, one transaction per signal
// against one per batch of 100 (storetest.BenchRecordSignals).
//
//	go test -run '^$' -bench RecordSignals -benchmem ./engine/store/sqlite/
func BenchmarkRecordSignals(b *testing.B) {
	storetest.BenchRecordSignals(b, func(b *testing.B) port.Store { return openTest(b) })
}
