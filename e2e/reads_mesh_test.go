package e2e_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// meshRank orders instance states strictly as they move: queued,
// running, gathering (no task waits for its predecessors any more), then
// finished.
func meshRank(s robonetv1.InstanceState) int {
	switch s {
	case robonetv1.InstanceState_INSTANCE_STATE_PENDING:
		return 0
	case robonetv1.InstanceState_INSTANCE_STATE_RUNNING:
		return 1
	case robonetv1.InstanceState_INSTANCE_STATE_GATHERING:
		return 2
	}
	return 3
}

// gatherSpec runs for about a second after its first task: RUNNING, then
// GATHERING while its second task sleeps, then COMPLETE.
const gatherSpec = `
name: gather-reads
version: 1
tasks:
  a: {capability: core, action: echo, with: {v: 1}}
  b:
    needs: [a]
    capability: code.exec
    action: exec
    with: {argv: [sh, -c, 'sleep 1; echo 2']}
outputs:
  b: ${{ tasks.b.output }}
`

// Reads through every server of a mesh agree and never go back while
// partition owners are killed and started again — the leader first, then
// a server that owns partitions without leading: gets and lists through
// any server, the killed one once it is back included, never show an
// instance in an earlier state (GATHERING before RUNNING counting) than
// any read through any server that returned before it started.
func TestProcessMeshReadsNeverGoBack(t *testing.T) {
	m := startProcessMesh(t, 3)
	leader, _ := m.leader("", 60*time.Second)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range m.procs {
			if !yield(n) {
				return
			}
		}
	})
	apis := map[string]robonetv1.WorkflowServiceClient{}
	for _, n := range names {
		apis[n] = m.api(n) // the address stays the node's across its restart
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var (
		mu         sync.Mutex
		ids        []string
		floor      = map[string]int{}
		seen       = map[string]map[int]bool{}
		violations []string
		reads      int
	)
	shown := func(id, how string, before, rank int) {
		mu.Lock()
		defer mu.Unlock()
		reads++
		if rank < before && len(violations) < 20 {
			violations = append(violations, fmt.Sprintf("%s of %s went back: rank %d after %d", how, id, rank, before))
		}
		floor[id] = max(floor[id], rank)
		if seen[id] == nil {
			seen[id] = map[int]bool{}
		}
		seen[id][rank] = true
	}
	var wg sync.WaitGroup
	wg.Go(func() { // submissions through the servers in turn
		for i := 0; ctx.Err() == nil; i++ {
			api := apis[names[i%len(names)]]
			sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := api.SubmitWorkflow(sctx, &robonetv1.SubmitWorkflowRequest{
				Workflow: &robonetv1.SubmitWorkflowRequest_Spec{Spec: &robonetv1.InlineSpec{Source: []byte(gatherSpec), Filename: "gather.yaml"}}})
			scancel()
			if err == nil {
				mu.Lock()
				ids = append(ids, resp.GetInstanceId())
				mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond) // about what the mesh's 12 exec slots finish

		}
	})
	for _, n := range names {
		for r := range 2 {
			wg.Go(func() {
				api := apis[n]
				for ctx.Err() == nil {
					mu.Lock()
					if len(ids) == 0 {
						mu.Unlock()
						time.Sleep(5 * time.Millisecond)
						continue
					}
					id := ids[max(0, len(ids)-1-rand.IntN(min(len(ids), 40)))]
					before := floor[id]
					mu.Unlock()
					rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
					if r == 0 {
						resp, err := api.GetInstance(rctx, &robonetv1.GetInstanceRequest{InstanceId: id})
						if err == nil {
							shown(id, "get through "+n, before, meshRank(resp.GetInstance().GetState()))
						}
					} else {
						resp, err := api.ListInstances(rctx, &robonetv1.ListInstancesRequest{IdPrefix: id})
						if err == nil && len(resp.GetInstances()) == 1 {
							shown(id, "list through "+n, before, meshRank(resp.GetInstances()[0].GetState()))
						}
					}
					rcancel()
				}
			})
		}
	}

	time.Sleep(4 * time.Second)
	m.procs[leader].kill9(t)
	next, _ := m.leader(leader, 30*time.Second)
	t.Logf("killed %s; %s leads", leader, next)
	time.Sleep(3 * time.Second)
	m.procs[leader] = startChild(t, m.bin, m.args[leader]...)
	now, _ := m.leader("", 60*time.Second)
	m.balanced(60 * time.Second)
	owner := m.partitionOwner(now)
	m.procs[owner].kill9(t)
	m.ownedAgain(now, owner)
	t.Logf("killed partition owner %s; its partitions moved", owner)
	time.Sleep(3 * time.Second)
	m.procs[owner] = startChild(t, m.bin, m.args[owner]...)
	m.leader("", 60*time.Second)
	// Reads go on until enough instances were seen moving to the end
	// (a loaded machine is slower), for 5 to 30 s.
	movedEnough := func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, s := range seen {
			if s[2] && s[3] {
				n++
			}
		}
		return n >= 10
	}
	for deadline, least := time.Now().Add(30*time.Second), time.Now().Add(5*time.Second); time.Now().Before(least) || !movedEnough() && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	for _, v := range violations {
		t.Error(v)
	}
	gathered, finished := 0, 0
	for _, s := range seen {
		if s[2] {
			gathered++
		}
		if s[2] && s[3] {
			finished++
		}
	}
	t.Logf("%d reads of %d instances through %d servers; %d seen GATHERING, %d of them then finished", reads, len(ids), len(names), gathered, finished)
	if finished < 5 {
		t.Fatalf("only %d instances were seen gathering and then finished: the test did not watch instances move", finished)
	}
}
