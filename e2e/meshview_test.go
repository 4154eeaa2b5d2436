package e2e_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// What the mesh API and the instance view tell about a mesh at work: the
// Waggler of each capability (ListWagglers, from a server and from a
// worker-only node), the roles members advertise, and where each attempt
// ran.

// listWagglers returns the row of capability from node's answer.
func listWagglers(t *testing.T, n *meshNode, capability string) (*robonetv1.WagglerRole, *robonetv1.ListWagglersResponse) {
	t.Helper()
	resp, err := n.mesh.ListWagglers(ctxFor(t, 10*time.Second), &robonetv1.ListWagglersRequest{})
	if err != nil {
		t.Fatalf("ListWagglers on %s: %v", n.name, err)
	}
	for _, r := range resp.GetWagglers() {
		if r.GetCapability() == capability {
			return r, resp
		}
	}
	return nil, resp
}

func TestMeshShowsWagglersAndAttempts(t *testing.T) {
	m := startWagMesh(t, "w1", "w2")
	holder := m.waggler("")
	other := "w1"
	if holder == "w1" {
		other = "w2"
	}

	// From the server: the role of the control state, the other worker
	// as standby (the server serves nothing).
	var row *robonetv1.WagglerRole
	eventually(t, 30*time.Second, "the server to list the waggler of work", func() bool {
		var resp *robonetv1.ListWagglersResponse
		row, resp = listWagglers(t, m.server, "work")
		return row != nil && row.GetNode() == holder && resp.GetSource() == "control-state"
	})
	if row.GetEpoch() == 0 || !slices.Equal(row.GetStandbys(), []string{other}) {
		t.Fatalf("work from the server: %v, want held by %s with standby %s", row, holder, other)
	}
	// The live numbers come from the holder: both pools' slots register
	// with its Waggler. A holder that does not report them is "unknown",
	// with the reason.
	if row.GetLive() {
		eventually(t, 30*time.Second, "four workers registered with the waggler", func() bool {
			row, _ = listWagglers(t, m.server, "work")
			return row.GetWorkers() == 4
		})
		if row.GetState() != "IDLE" || row.GetInFlight() != 0 || row.GetQueued() != 0 {
			t.Fatalf("an idle waggler: %v", row)
		}
	} else if row.GetState() != "unknown" || row.GetNote() == "" {
		t.Fatalf("work without live numbers: %v, want state unknown and a note", row)
	}

	// From a worker-only node: the roles the members advertise.
	eventually(t, 30*time.Second, "a worker to list the waggler of work", func() bool {
		r, resp := listWagglers(t, m.workers[other], "work")
		return r != nil && r.GetNode() == holder && resp.GetSource() == "gossip" && r.GetEpoch() == row.GetEpoch()
	})

	// The holder advertises the role; members list it.
	members, err := m.server.mesh.ListMembers(ctxFor(t, 10*time.Second), &robonetv1.ListMembersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, mem := range members.GetMembers() {
		if got := mem.GetWagglers()["work"]; (mem.GetName() == holder) != (got > 0) {
			t.Errorf("%s advertises work at epoch %d; the holder is %s", mem.GetName(), got, holder)
		}
	}

	// Two marks run wherever the Waggler puts them; while they run, the
	// view names each attempt's worker (from its heartbeats).
	id := submitSpec(t, m.server.api, markSpec, `{"n": 2}`)
	runs := m.marks.waitRuns(t, "two runs", func(r []markRun) bool { return len(r) == 2 })
	ranOn := map[string]string{}
	for _, r := range runs {
		ranOn[r.exec] = r.node
	}
	attemptsOf := func() []*robonetv1.TaskAttempt {
		resp, err := m.server.api.GetInstance(ctxFor(t, 10*time.Second), &robonetv1.GetInstanceRequest{InstanceId: id})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetInstance().GetTasks()[0].GetAttempts()
	}
	eventually(t, 30*time.Second, "both attempts in flight with their workers", func() bool {
		as := attemptsOf()
		return len(as) == 2 && as[0].GetRunning() && as[1].GetRunning() && as[0].GetNode() != "" && as[1].GetNode() != ""
	})
	for _, a := range attemptsOf() {
		exec := fmt.Sprintf("m[%d]", a.GetIndex())
		if a.GetNode() != ranOn[exec] || !strings.HasPrefix(a.GetWorker(), a.GetNode()+"/work/") || a.GetStartedAt() == nil {
			t.Errorf("attempt in flight %v; %s runs on %s", a, exec, ranOn[exec])
		}
	}

	close(m.marks.release)
	in := waitDone(t, m.server.api, id, 30*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	as := in.GetTasks()[0].GetAttempts()
	if len(as) != 2 {
		t.Fatalf("attempts %v, want one per spread instance", as)
	}
	for i, a := range as {
		exec := fmt.Sprintf("m[%d]", i)
		if a.GetIndex() != int32(i) || a.GetAttempt() != 1 || !a.GetOk() || a.GetRunning() || a.GetNode() != ranOn[exec] ||
			a.GetFinishedAt() == nil {
			t.Errorf("attempt %d: %v; %s ran on %s", i, a, exec, ranOn[exec])
		}
	}
}
