package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
)

// slowQueue makes every QueueInstances call take a while, so that
// concurrent submissions pile up behind it, and counts the calls.
type slowQueue struct {
	port.Store
	calls atomic.Int64
}

func (s *slowQueue) QueueInstances(ctx context.Context, in []port.NewInstance) ([]port.Queued, error) {
	s.calls.Add(1)
	time.Sleep(20 * time.Millisecond)
	return s.Store.QueueInstances(ctx, in)
}

// Concurrent submissions are group-committed: far fewer store calls than
// submissions, each submission its own instance — except those sharing an
// idempotency key, which get one instance between them — and a key reused
// for another version fails only its own submission.
func TestSubmissionsGroupCommitted(t *testing.T) {
	slow := &slowQueue{Store: openSQLite(t)}
	h := newHarnessOn(t, slow)
	e := h.newEngine(1) // not started: submissions queue all the same
	ctx := ctxOf(t)
	for _, spec := range []string{chainSpec, strings.Replace(chainSpec, "version: 1", "version: 2", 1)} {
		if _, err := e.RegisterWorkflow(ctx, "chain.yaml", []byte(spec)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Submit(ctx, engine.SubmitRequest{Name: "chain", Version: 1, Inputs: map[string]any{"x": 0}, IdempotencyKey: "taken"}); err != nil {
		t.Fatal(err)
	}
	slow.calls.Store(0)

	const n = 64
	var wg sync.WaitGroup
	ids := make([]uuid.UUID, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			req := engine.SubmitRequest{Name: "chain", Version: 1, Inputs: map[string]any{"x": i}}
			switch {
			case i%16 == 0:
				req.IdempotencyKey = "shared" // four submissions, one instance
			case i == 7:
				// "taken" belongs to version 1; this is version 2.
				req.Version, req.IdempotencyKey = 2, "taken"
			}
			res, err := e.Submit(ctx, req)
			ids[i], errs[i] = res.InstanceID, err
		})
	}
	wg.Wait()

	if calls := slow.calls.Load(); calls >= n/2 {
		t.Errorf("%d store calls for %d concurrent submissions: they were not batched", calls, n)
	}
	seen := map[uuid.UUID]int{}
	for i := range n {
		switch {
		case i == 7:
			if !errors.Is(errs[i], port.ErrIdempotencyConflict) {
				t.Errorf("submission 7 reused a key of another version: %v, want ErrIdempotencyConflict", errs[i])
			}
			continue
		case errs[i] != nil:
			t.Errorf("submission %d: %v", i, errs[i])
			continue
		}
		seen[ids[i]]++
	}
	shared := ids[0]
	for i := 16; i < n; i += 16 {
		if ids[i] != shared {
			t.Errorf("submissions with the key \"shared\" got instances %s and %s, want one", shared, ids[i])
		}
	}
	if len(seen) != n-1-3 { // 7 failed; the four "shared" are one
		t.Errorf("%d distinct instances, want %d", len(seen), n-1-3)
	}
}
