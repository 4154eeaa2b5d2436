package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// stateRank orders instance states as they can only move: queued, then
// running (RUNNING and GATHERING alternate while it runs), then finished.
func stateRank(s robonetv1.InstanceState) int {
	switch s {
	case robonetv1.InstanceState_INSTANCE_STATE_PENDING:
		return 0
	case robonetv1.InstanceState_INSTANCE_STATE_RUNNING, robonetv1.InstanceState_INSTANCE_STATE_GATHERING:
		return 1
	}
	return 2
}

// shownStates tracks, per instance, the highest rank any call has returned
// so far: a call that starts after another returned may not show less.
type shownStates struct {
	mu         sync.Mutex
	max        map[string]int
	violations []string
	reads      atomic.Int64
	finished   atomic.Int64 // instances seen running, then finished
	running    map[string]bool
}

// floor is what a call starting now must show at least.
func (s *shownStates) floor(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max[id]
}

// shown records what a call that started with floor returned.
func (s *shownStates) shown(id, how string, floor, rank int) {
	s.reads.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if rank < floor && len(s.violations) < 10 {
		s.violations = append(s.violations, fmt.Sprintf("%s of %s went back: rank %d after %d", how, id, rank, floor))
	}
	if rank == 1 {
		s.running[id] = true
	}
	if rank == 2 && s.max[id] < 2 && s.running[id] {
		s.finished.Add(1)
	}
	s.max[id] = max(s.max[id], rank)
}

// Reads on one node never go backwards and agree with each other while
// instances complete at full speed: gets, lists filtered by the running
// states (an instance missing from one counts as finished) and by the
// finished ones, and watches started at any moment — each call may not
// show an instance in an earlier state than any call that returned before
// it started.
func TestReadsAreMonotonic(t *testing.T) {
	forEachStore(t, func(t *testing.T, store storeKind) {
		cfg := testConfig(t, store)
		cfg.Engine.Shards = 1 // one busy shard: completions wait in its mailbox behind results
		tn := startNodeWith(t, cfg)
		spec := testdataSpec("quick_spread.yaml")
		// Until enough instances were seen running and then finished (a
		// slow machine takes longer), at most 30 s.
		const enough = 15
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var (
			idsMu sync.Mutex
			ids   []string
		)
		pick := func() string {
			idsMu.Lock()
			defer idsMu.Unlock()
			if len(ids) == 0 {
				return ""
			}
			// Mostly the newest: they are the ones about to move.
			return ids[max(0, len(ids)-1-rand.IntN(min(len(ids), 8)))]
		}
		st := &shownStates{max: map[string]int{}, running: map[string]bool{}}
		active := []robonetv1.InstanceState{robonetv1.InstanceState_INSTANCE_STATE_PENDING,
			robonetv1.InstanceState_INSTANCE_STATE_RUNNING, robonetv1.InstanceState_INSTANCE_STATE_GATHERING}
		done := []robonetv1.InstanceState{robonetv1.InstanceState_INSTANCE_STATE_COMPLETE,
			robonetv1.InstanceState_INSTANCE_STATE_FAILED, robonetv1.InstanceState_INSTANCE_STATE_CANCELLED}
		var wg sync.WaitGroup
		for range 3 { // submitters
			wg.Go(func() {
				for ctx.Err() == nil {
					resp, err := tn.api.SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{
						Workflow: &robonetv1.SubmitWorkflowRequest_Spec{Spec: &robonetv1.InlineSpec{Source: []byte(spec), Filename: "quick.yaml"}}})
					if err == nil {
						idsMu.Lock()
						ids = append(ids, resp.GetInstanceId())
						idsMu.Unlock()
					}
				}
			})
		}
		for reader := range 6 {
			wg.Go(func() {
				id := ""
				for ctx.Err() == nil {
					if st.finished.Load() >= enough {
						cancel()
						return
					}
					// Follow one instance until it is seen finished, then
					// take one of the newest.
					if id == "" || st.floor(id) == 2 {
						if id = pick(); id == "" {
							time.Sleep(time.Millisecond)
							continue
						}
					}
					floor := st.floor(id)
					switch (reader + rand.IntN(4)) % 4 {
					case 0:
						resp, err := tn.api.GetInstance(ctx, &robonetv1.GetInstanceRequest{InstanceId: id})
						if err == nil {
							st.shown(id, "get", floor, stateRank(resp.GetInstance().GetState()))
						}
					case 1:
						resp, err := tn.api.ListInstances(ctx, &robonetv1.ListInstancesRequest{IdPrefix: id, States: active})
						if err == nil {
							rank := 2 // not among the running: finished
							for _, in := range resp.GetInstances() {
								rank = stateRank(in.GetState())
							}
							st.shown(id, "list of the running", floor, rank)
						}
					case 2:
						resp, err := tn.api.ListInstances(ctx, &robonetv1.ListInstancesRequest{IdPrefix: id, States: done})
						if err == nil && len(resp.GetInstances()) == 1 {
							st.shown(id, "list of the finished", floor, stateRank(resp.GetInstances()[0].GetState()))
						}
					case 3:
						watchStates(ctx, tn.api, id, func(rank int) { st.shown(id, "watch", floor, rank); floor = max(floor, rank) })
					}
				}
			})
		}
		wg.Wait()
		st.mu.Lock()
		defer st.mu.Unlock()
		for _, v := range st.violations {
			t.Error(v)
		}
		t.Logf("%d reads of %d instances; %d seen running, then finished", st.reads.Load(), len(ids), st.finished.Load())
		if st.finished.Load() < enough {
			t.Fatalf("only %d instances were seen running and then finished: the test did not watch instances move", st.finished.Load())
		}
	})
}

// watchStates follows an instance's watch for a short while, reporting the
// rank of every state it shows (the first snapshot's, then each STATE
// event's), in order.
func watchStates(ctx context.Context, api robonetv1.WorkflowServiceClient, id string, seen func(rank int)) {
	ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	stream, err := api.WatchInstance(ctx, &robonetv1.WatchInstanceRequest{InstanceId: id})
	if err != nil {
		return
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			return // the end of the instance, or of the short look
		}
		ev := resp.GetEvent()
		switch {
		case ev.GetInstance() != nil:
			seen(stateRank(ev.GetInstance().GetState()))
		case ev.GetKind() == robonetv1.EventKind_EVENT_KIND_STATE:
			seen(stateRank(ev.GetState()))
		}
	}
}
