package client

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// trimLines drops trailing spaces (tabwriter pads cells).
func trimLines(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	return strings.Join(lines, "\n")
}

func TestPrintWagglers(t *testing.T) {
	resp := &robonetv1.ListWagglersResponse{AnsweredBy: "s1", Source: "control-state", Wagglers: []*robonetv1.WagglerRole{
		{Capability: "code.exec", Node: "n2", Epoch: 5, State: "MONITORING", Workers: 4, InFlight: 3, Queued: 1, Standbys: []string{"n3", "s1"}, Live: true},
		{Capability: "core", Node: "n4", Epoch: 2, State: "unknown", Note: "n4 did not answer within 2s"},
		{Capability: "gpu", Epoch: 7, State: "unassigned"},
	}}
	var buf bytes.Buffer
	PrintWagglers(&buf, resp)
	want := `CAPABILITY  NODE  EPOCH  STATE       WORKERS  IN FLIGHT  QUEUED  STANDBYS
code.exec   n2    5      MONITORING  4        3          1       n3, s1
core        n4    2      unknown *   -        -          -       -
gpu         -     7      unassigned  -        -          -       -

* core: n4 did not answer within 2s
`
	if got := trimLines(buf.String()); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}

	data, err := json.Marshal(Waggler(resp.GetWagglers()[2]))
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := `{"capability":"gpu","node":"","epoch":7,"state":"unassigned","workers":0,"in_flight":0,"queued":0,"standbys":[],"failovers":0,"live":false}`
	if string(data) != wantJSON {
		t.Errorf("json:\n%s\nwant:\n%s", data, wantJSON)
	}
}

// A worker program's trust is a row of its own, saying which node it
// connects through.
func TestPrintTrustPrograms(t *testing.T) {
	resp := &robonetv1.ListTrustResponse{AnsweredBy: "s1", DispatchTier: "established", Nodes: []*robonetv1.NodeTrust{
		{Node: "s1", Tier: "trusted", Score: 0.5, Self: true},
		{Node: "w1", Tier: "provisional", Score: 0.9, Good: 9, Evidence: map[string]uint64{"task_completed": 9}},
		{Node: "w1/gpu-box", Tier: "unverified", Score: 0.25, Good: 2, Bad: 10, Evidence: map[string]uint64{"misbehaviour": 1, "task_completed": 2}},
		{Node: "w2/ops", Tier: "trusted", Score: 0.5, Pretrusted: true},
	}}
	var buf bytes.Buffer
	PrintTrust(&buf, resp)
	want := `as the leader s1 sees it; dispatch tier established (below it a node or program is on probation)
NODE        TIER         SCORE  GOOD  BAD   EVIDENCE                         NOTE
s1          trusted      0.500  0.0   0.0   -                                the leader itself
w1          provisional  0.900  9.0   0.0   task_completed=9                 -
w1/gpu-box  unverified   0.250  2.0   10.0  misbehaviour=1 task_completed=2  worker program via w1
w2/ops      trusted      0.500  0.0   0.0   -                                worker program via w2; trusted by an operator
`
	if got := trimLines(buf.String()); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
	if v := Trust(resp.GetNodes()[2]); v.Via != "w1" {
		t.Errorf("via %q, want w1", v.Via)
	}
	if v := Trust(resp.GetNodes()[1]); v.Via != "" {
		t.Errorf("a node's via %q, want none", v.Via)
	}
}

func TestPrintMembersRoles(t *testing.T) {
	members := []*robonetv1.Member{
		{Name: "n1", Status: "alive", Roles: []string{"server", "worker"}, Leader: true, Voter: true, GrpcAddr: "10.0.0.1:7233",
			Capabilities: map[string]int32{"core": 4}, Wagglers: map[string]uint64{"core": 3, "code.exec": 1}},
		{Name: "n2", Status: "alive", Roles: []string{"server", "worker"}, GrpcAddr: "10.0.0.2:7233"},
		{Name: "n3", Status: "failed", Roles: []string{"worker"}, Capabilities: map[string]int32{"gpu": 1}},
	}
	var buf bytes.Buffer
	PrintMembers(&buf, members, false)
	want := `NAME  STATUS  ROLE                GRPC           CAPABILITIES  WAGGLERS
n1 *  alive   leader              10.0.0.1:7233  core=4        waggler of code.exec, core
n2    alive   server (non-voter)  10.0.0.2:7233  -             -
n3    failed  worker              -              gpu=1         -
`
	if got := trimLines(buf.String()); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}
	v := Member(members[2])
	if v.Role != "worker" || v.Wagglers == nil {
		t.Errorf("view of a worker: %+v", v)
	}
}

func TestPrintInstanceAttempts(t *testing.T) {
	at := func(sec int) *timestamppb.Timestamp { return timestamppb.New(time.Unix(int64(1_700_000_000+sec), 0)) }
	in := &robonetv1.Instance{Id: "i", Workflow: "w", Version: 1, State: robonetv1.InstanceState_INSTANCE_STATE_RUNNING, Tasks: []*robonetv1.TaskState{
		{Name: "once", Capability: "core", Action: "echo", Status: robonetv1.TaskStatus_TASK_STATUS_COMPLETED, Attempt: 1, MaxAttempts: 1,
			OutputJson: `"hi"`, StartedAt: at(0), FinishedAt: at(1),
			Attempts: []*robonetv1.TaskAttempt{{Index: -1, Attempt: 1, Node: "n1", Worker: "n1/core/0", Ok: true, StartedAt: at(0), FinishedAt: at(1)}}},
		{Name: "flaky", Capability: "core", Action: "exec", Status: robonetv1.TaskStatus_TASK_STATUS_RUNNING, Attempt: 3, MaxAttempts: 3,
			Attempts: []*robonetv1.TaskAttempt{
				{Index: -1, Attempt: 1, Node: "n1", Worker: "n1/core/1", Error: "exit 1", StartedAt: at(1), FinishedAt: at(3)},
				{Index: -1, Attempt: 2, Node: "n2", Worker: "n2/core/0", Error: "exit 2", StartedAt: at(4), FinishedAt: at(5)},
				{Index: -1, Attempt: 3, Running: true},
			}},
		{Name: "wide", Capability: "core", Action: "echo", Status: robonetv1.TaskStatus_TASK_STATUS_COMPLETED, Attempt: 2, MaxAttempts: 2,
			Spread: true, Width: 3, Done: 3, OutputJson: `[1,2,3]`,
			Attempts: []*robonetv1.TaskAttempt{
				{Index: 0, Attempt: 1, Node: "n1", Ok: true},
				{Index: 1, Attempt: 1, Node: "n2", Worker: "n2/core/1", Error: "flaked"},
				{Index: 1, Attempt: 2, Node: "n1", Ok: true},
				{Index: 2, Attempt: 1, Node: "n2", Ok: true},
			}},
	}}
	var buf bytes.Buffer
	PrintInstance(&buf, in)
	out := trimLines(buf.String())
	want := `TASK      STATUS         ATTEMPT  NODE   CAPABILITY/ACTION  TIME  OUTPUT / ERROR
once      completed      1/1      n1     core/echo          1s    "hi"
flaky     running        3/3      -      core/exec          -
  #1      failed                  n1     n1/core/1          2s    error: exit 1
  #2      failed                  n2     n2/core/0          1s    error: exit 2
  #3      running                 -      -                  -
wide      completed 3/3  2/2      n1,n2  core/echo          -     [1,2,3]
  [1] #1  failed                  n2     n2/core/1          -     error: flaked
`
	if !strings.Contains(out, want) {
		t.Errorf("table:\n%s\nwant it to contain:\n%s", out, want)
	}

	// -o json: every attempt with every key; index only under spreads.
	v := Instance(in)
	data, err := json.Marshal(v.Tasks[1].Attempts[2])
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"attempt":3,"node":"","worker":"","started_at":null,"finished_at":null,"running":true,"ok":false,"error":""}`; string(data) != want {
		t.Errorf("attempt json:\n%s\nwant:\n%s", data, want)
	}
	if idx := v.Tasks[2].Attempts[1].Index; idx == nil || *idx != 1 {
		t.Errorf("spread attempt index %v, want 1", idx)
	}
}

// A loop shows the iteration it is in, a line per failed or running
// iteration attempt ("#2 attempt 1"), and in -o json the iteration of each
// attempt; a watched event names an iteration as poll#2.
func TestPrintInstanceLoop(t *testing.T) {
	in := &robonetv1.Instance{Id: "i", Workflow: "w", Version: 1, State: robonetv1.InstanceState_INSTANCE_STATE_RUNNING, Tasks: []*robonetv1.TaskState{
		{Name: "poll", Capability: "core", Action: "http", Status: robonetv1.TaskStatus_TASK_STATUS_RUNNING, Attempt: 1, MaxAttempts: 2,
			Loop: true, Iterations: 3,
			Attempts: []*robonetv1.TaskAttempt{
				{Index: 0, Attempt: 1, Node: "n1", Ok: true},
				{Index: 1, Attempt: 1, Node: "n2", Error: "503"},
				{Index: 1, Attempt: 2, Node: "n1", Ok: true},
				{Index: 2, Attempt: 1, Running: true},
			}},
		{Name: "done", Capability: "core", Action: "echo", Status: robonetv1.TaskStatus_TASK_STATUS_COMPLETED, Attempt: 1, MaxAttempts: 1,
			Loop: true, Iterations: 2, OutputJson: `[1,2]`,
			Attempts: []*robonetv1.TaskAttempt{{Index: 0, Attempt: 1, Node: "n1", Ok: true}, {Index: 1, Attempt: 1, Node: "n1", Ok: true}}},
	}}
	var buf bytes.Buffer
	PrintInstance(&buf, in)
	out := trimLines(buf.String())
	want := `TASK            STATUS                    ATTEMPT  NODE   CAPABILITY/ACTION  TIME  OUTPUT / ERROR
poll            running #2                1/2      n1,n2  core/http          -
  #1 attempt 1  failed                             n2     -                  -     error: 503
  #2 attempt 1  running                            -      -                  -
done            completed (2 iterations)  1/1      n1     core/echo          -     [1,2]
`
	if !strings.Contains(out, want) {
		t.Errorf("table:\n%s\nwant it to contain:\n%s", out, want)
	}
	v := Instance(in)
	if it := v.Tasks[0].Attempts[1].Iteration; it == nil || *it != 1 || v.Tasks[0].Attempts[1].Index != nil || v.Tasks[0].Loop.Iterations != 3 {
		t.Errorf("loop attempt view %+v, task %+v", v.Tasks[0].Attempts[1], v.Tasks[0].Loop)
	}
	ev := EventLine(&robonetv1.Event{Seq: 7, Kind: robonetv1.EventKind_EVENT_KIND_TASK_STARTED, Task: "poll", Index: 2, Iteration: true, Attempt: 1})
	if !strings.Contains(ev, " poll#2 attempt 1") {
		t.Errorf("event line %q, want poll#2", ev)
	}
}

// A task whose body is a child workflow shows the workflow and version
// instead of a capability, and a line per child it started (failed ones
// first); a child instance shows its parent; -o json names the children,
// the workflow and the parent.
func TestPrintInstanceChildren(t *testing.T) {
	in := &robonetv1.Instance{Id: "p", Workflow: "scan-all", Version: 1, State: robonetv1.InstanceState_INSTANCE_STATE_RUNNING,
		Tasks: []*robonetv1.TaskState{
			{Name: "scan", Workflow: "scan-host", WorkflowVersion: 2, Status: robonetv1.TaskStatus_TASK_STATUS_RUNNING, Attempt: 1, MaxAttempts: 1,
				Spread: true, Width: 2, Done: 1,
				Attempts: []*robonetv1.TaskAttempt{
					{Index: 0, Attempt: 1, Ok: true, ChildInstanceId: "c0"},
					{Index: 1, Attempt: 1, Running: true, ChildInstanceId: "c1"},
				}},
		}}
	var buf bytes.Buffer
	PrintInstance(&buf, in)
	out := trimLines(buf.String())
	want := `TASK      STATUS       ATTEMPT  NODE  CAPABILITY/ACTION      TIME  OUTPUT / ERROR
scan      running 1/2  1/1      -     workflow scan-host v2  -
  [1] #1  running               -     child c1               -
  [0] #1  completed             -     child c0               -
`
	if !strings.Contains(out, want) {
		t.Errorf("table:\n%s\nwant it to contain:\n%s", out, want)
	}
	v := Instance(in)
	if v.Tasks[0].Workflow != "scan-host" || v.Tasks[0].WorkflowVersion != 2 || v.Tasks[0].Attempts[1].Child != "c1" {
		t.Errorf("task view %+v", v.Tasks[0])
	}

	child := &robonetv1.Instance{Id: "c1", Workflow: "scan-host", Version: 2, State: robonetv1.InstanceState_INSTANCE_STATE_RUNNING,
		Parent: &robonetv1.InstanceParent{InstanceId: "p", Execution: "scan[1]", Attempt: 1}}
	buf.Reset()
	PrintInstance(&buf, child)
	if !strings.Contains(buf.String(), "parent    p (task scan[1], attempt 1)") {
		t.Errorf("child:\n%s\nwant its parent", buf.String())
	}
	if p := Instance(child).Parent; p == nil || *p != (ParentView{ID: "p", Execution: "scan[1]", Attempt: 1}) {
		t.Errorf("child view parent %+v", p)
	}
	if s := Summary(&robonetv1.InstanceSummary{Id: "c1", ParentInstanceId: "p"}); s.Parent != "p" {
		t.Errorf("summary %+v", s)
	}
}
