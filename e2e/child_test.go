package e2e_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/robonet/robonet/engine/store/postgres/pgtest"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// napHost is the child workflow: a nap long enough to kill its node
// during, then the host it was given.
const napHost = `
name: nap-host
version: 1
inputs:
  host: {type: string}
tasks:
  nap:
    capability: core
    action: sleep
    with: {duration: 3s}
  done:
    needs: nap
    capability: core
    action: echo
    with: {host: "${{ inputs.host }}"}
outputs:
  host: ${{ tasks.done.output.host }}
`

// napAll runs nap-host once per host.
const napAll = `
name: nap-all
version: 1
tasks:
  each:
    workflow: nap-host@1
    spread: ${{ ['a', 'b', 'c'] }}
    with: {host: "${{ item }}"}
outputs:
  hosts: ${{ tasks.each.output.map(h, h.host) }}
`

// TestKill9MidChild: a node killed with SIGKILL while the children of a
// workflow run, and started again on the same data directory (SQLite) or
// database (Postgres), finishes the parent with its children's outputs,
// started no second child for any attempt, and every child completed.
func TestKill9MidChild(t *testing.T) {
	bin := buildRobonode(t)
	forEachStore(t, func(t *testing.T, store storeKind) {
		args := []string{"--data-dir", t.TempDir(), "--grpc", "127.0.0.1:0", "--http", "off", "--gossip", "0", "--raft", "0",
			"--log-format", "json", "--capability", "core=4", "--shutdown-timeout", "20s"}
		if store == postgresStore {
			dsn, schema := pgtest.Schema(t)
			args = append(args, "--postgres", withSearchPath(t, dsn, schema))
		}
		first := startChild(t, bin, args...)
		api := robonetv1.NewWorkflowServiceClient(dial(t, first.addr))
		if _, err := api.RegisterWorkflow(ctxFor(t, 10*time.Second), &robonetv1.RegisterWorkflowRequest{
			Spec: &robonetv1.InlineSpec{Source: []byte(napHost), Filename: "nap-host.yaml"}}); err != nil {
			t.Fatalf("registering the child: %v", err)
		}
		id := submitSpec(t, api, napAll, "")

		// Kill it once the three children run.
		eventually(t, 30*time.Second, "three running children", func() bool {
			resp, err := api.GetInstance(ctxFor(t, 10*time.Second), &robonetv1.GetInstanceRequest{InstanceId: id})
			if err != nil {
				t.Fatalf("GetInstance: %v", err)
			}
			running := 0
			for _, a := range task(t, resp.GetInstance(), "each").GetAttempts() {
				if a.GetRunning() && a.GetChildInstanceId() != "" {
					running++
				}
			}
			return running == 3
		})
		first.kill9(t)

		second := startChild(t, bin, args...)
		api = robonetv1.NewWorkflowServiceClient(dial(t, second.addr))
		in := waitDone(t, api, id, 60*time.Second)
		wantOutputs(t, in, `{"hosts": ["a", "b", "c"]}`)
		each := task(t, in, "each")
		if len(each.GetAttempts()) != 3 {
			t.Fatalf("each has %d attempts, want one per host", len(each.GetAttempts()))
		}
		for i, a := range each.GetAttempts() {
			child, err := api.GetInstance(ctxFor(t, 10*time.Second), &robonetv1.GetInstanceRequest{InstanceId: a.GetChildInstanceId()})
			if err != nil {
				t.Fatalf("the child of each[%d]: %v", i, err)
			}
			c := child.GetInstance()
			if c.GetState() != robonetv1.InstanceState_INSTANCE_STATE_COMPLETE || c.GetParent().GetInstanceId() != id ||
				c.GetParent().GetExecution() != fmt.Sprintf("each[%d]", i) {
				t.Fatalf("the child of each[%d]: %s, parent %v", i, c.GetState(), c.GetParent())
			}
		}
		list, err := api.ListInstances(ctxFor(t, 10*time.Second), &robonetv1.ListInstancesRequest{PageSize: 100})
		if err != nil || len(list.GetInstances()) != 4 {
			t.Fatalf("%d instances (%v), want the parent and its three children", len(list.GetInstances()), err)
		}
		if code := second.stop(t); code != 0 {
			t.Errorf("robonode exited %d after SIGTERM, want 0", code)
		}
	})
}
