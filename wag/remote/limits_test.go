package remote

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/robonet/robonet/engine/port"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/sentinel"
	"github.com/robonet/robonet/wag"
)

var testKey = port.AttemptKey{InstanceID: uuid.MustParse("7d0b7a8e-7c3e-4c57-9a55-5a1b6f0d2c11"), ExecutionID: "t[1]", Attempt: 1}

func honestDispatch(t testing.TB) *robonetv1.Dispatch {
	t.Helper()
	d, err := dispatchToProto(port.TaskDispatch{AttemptKey: testKey, Term: 3, Workflow: "wf", Task: "t", Capability: "code.exec",
		Action: "echo", Input: map[string]any{"x": int64(1)}, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// Honest messages, as the converters build them, pass; each kind of
// malformed or oversized one is refused with the status that names it.
func TestStreamLimits(t *testing.T) {
	big := strings.Repeat("x", maxNameBytes+1)
	hb := func(mod func(*robonetv1.Heartbeat)) *robonetv1.WorkRequest {
		h := heartbeatToProto(wag.Heartbeat{Key: testKey, Generation: 1, WorkerID: "w1/code.exec/1", Seq: 4})
		if mod != nil {
			mod(h)
		}
		return &robonetv1.WorkRequest{Msg: &robonetv1.WorkRequest_Heartbeats{Heartbeats: &robonetv1.WorkHeartbeats{Items: []*robonetv1.Heartbeat{h}}}}
	}
	rep, err := reportToProto(7, wag.Report{Key: testKey, Generation: 1, WorkerID: "w1/code.exec/1", OK: true, Output: "done"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := resultToProto(wag.SeqResult{Seq: 2, TaskResult: port.TaskResult{AttemptKey: testKey, OK: true, Output: int64(3)}})
	if err != nil {
		t.Fatal(err)
	}
	manyHandoffs := make([]*robonetv1.Handoff, MaxBatchItems+1)
	for i := range manyHandoffs {
		manyHandoffs[i] = &robonetv1.Handoff{Dispatch: honestDispatch(t)}
	}
	for _, c := range []struct {
		name  string
		check func() error
		code  codes.Code
		says  string
	}{
		{"honest heartbeat", func() error { return checkWorkRequest(hb(nil)) }, codes.OK, ""},
		{"honest report", func() error {
			return checkWorkRequest(&robonetv1.WorkRequest{Msg: &robonetv1.WorkRequest_Reports{Reports: &robonetv1.WorkReports{Items: []*robonetv1.Report{rep}}}})
		}, codes.OK, ""},
		{"honest result", func() error {
			return checkLeadResponse(&robonetv1.LeadResponse{Msg: &robonetv1.LeadResponse_Results{Results: &robonetv1.LeadResults{Results: []*robonetv1.WagResult{res}}}})
		}, codes.OK, ""},
		{"honest dispatch", func() error {
			return checkLeadRequest(&robonetv1.LeadRequest{Msg: &robonetv1.LeadRequest_Dispatch{Dispatch: &robonetv1.LeadDispatch{
				Handoffs: []*robonetv1.Handoff{{Dispatch: honestDispatch(t), WorkerId: "w1/code.exec/2"}}}}})
		}, codes.OK, ""},
		{"no attempt key", func() error { return checkWorkRequest(hb(func(h *robonetv1.Heartbeat) { h.Key = nil })) }, codes.InvalidArgument, "no attempt key"},
		{"not a UUID", func() error {
			return checkWorkRequest(hb(func(h *robonetv1.Heartbeat) { h.Key.InstanceId = "nope" }))
		}, codes.InvalidArgument, "not a UUID"},
		{"long worker id", func() error {
			return checkWorkRequest(hb(func(h *robonetv1.Heartbeat) { h.WorkerId = big }))
		}, codes.ResourceExhausted, "the limit is 256"},
		{"invalid UTF-8", func() error {
			return checkWorkRequest(hb(func(h *robonetv1.Heartbeat) { h.Message = "\xff\xfe" }))
		}, codes.InvalidArgument, "not valid UTF-8"},
		{"NaN CPU", func() error {
			return checkWorkRequest(hb(func(h *robonetv1.Heartbeat) { h.CpuPercent = math.NaN() }))
		}, codes.InvalidArgument, "cpu percent"},
		{"negative ETA", func() error {
			return checkWorkRequest(hb(func(h *robonetv1.Heartbeat) { h.EtaNs = -1 }))
		}, codes.InvalidArgument, "eta is negative"},
		{"a stamp's token of the wrong size", func() error {
			m := hb(func(*robonetv1.Heartbeat) {})
			m.Stamp = &robonetv1.Stamp{ChainId: 1, Index: 1, Token: make([]byte, 4096)}
			return checkWorkRequest(m)
		}, codes.InvalidArgument, "token is 4096 bytes, not 32"},
		{"a stamp's next anchor of the wrong size", func() error {
			return checkLeadResponse(&robonetv1.LeadResponse{Msg: &robonetv1.LeadResponse_Started{Started: &robonetv1.LeadStarted{}},
				Stamp: &robonetv1.Stamp{ChainId: 1, Index: 1, Token: make([]byte, 32), NextAnchor: []byte("x")}})
		}, codes.InvalidArgument, "next anchor is 1 bytes"},
		{"an observation of an unknown kind", func() error {
			return checkLeadResponse(&robonetv1.LeadResponse{Msg: &robonetv1.LeadResponse_Observations{Observations: &robonetv1.LeadObservations{
				Items: []*robonetv1.Observation{{Node: "w1", Kind: 99}}}}})
		}, codes.InvalidArgument, "unknown kind 99"},
		{"too many handoffs", func() error {
			return checkLeadRequest(&robonetv1.LeadRequest{Msg: &robonetv1.LeadRequest_Dispatch{Dispatch: &robonetv1.LeadDispatch{Handoffs: manyHandoffs}}})
		}, codes.ResourceExhausted, "20001 items in one message, the limit is 20000"},
		{"empty message", func() error { return checkWorkResponse(&robonetv1.WorkResponse{}) }, codes.InvalidArgument, "empty or unknown"},
		{"huge error text", func() error {
			r := proto.Clone(res).(*robonetv1.WagResult)
			r.Error = strings.Repeat("e", maxErrorBytes+1)
			return checkLeadResponse(&robonetv1.LeadResponse{Msg: &robonetv1.LeadResponse_Results{Results: &robonetv1.LeadResults{Results: []*robonetv1.WagResult{r}}}})
		}, codes.ResourceExhausted, "LeadResults: error"},
	} {
		err := c.check()
		if got := status.Code(err); got != c.code {
			t.Errorf("%s: %s (%v), want %s", c.name, got, err, c.code)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %q does not say %q", c.name, err, c.says)
		}
		if err != nil && strings.Contains(err.Error(), big) {
			t.Errorf("%s: the error quotes the oversized value", c.name)
		}
	}
}

// More than maxBeatsPerAttempt heartbeats of one attempt within an
// interval is a flood; a new interval starts the count again.
func TestHeartbeatFlood(t *testing.T) {
	w := newBeatWindow(time.Second)
	hb := heartbeatToProto(wag.Heartbeat{Key: testKey, WorkerID: "w"})
	now := time.Unix(100, 0)
	for i := range maxBeatsPerAttempt {
		if err := w.add([]*robonetv1.Heartbeat{hb}, now.Add(time.Duration(i)*time.Millisecond)); err != nil {
			t.Fatalf("beat %d: %v", i+1, err)
		}
	}
	if err := w.add([]*robonetv1.Heartbeat{hb}, now.Add(50*time.Millisecond)); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("beat %d within the interval: %v, want ResourceExhausted", maxBeatsPerAttempt+1, err)
	}
	if err := w.add([]*robonetv1.Heartbeat{hb}, now.Add(time.Second)); err != nil {
		t.Fatalf("the next interval: %v", err)
	}
}

var fixedNow = time.Unix(1_700_000_000, 0)

// Honest messages of each stream direction, for the fuzz seeds.
func workRequests(tb testing.TB) []*robonetv1.WorkRequest {
	d := honestDispatch(tb)
	rep, _ := reportToProto(1, wag.Report{Key: testKey, WorkerID: "w1/c/1", OK: true, Output: map[string]any{"a": "b"}})
	return []*robonetv1.WorkRequest{
		{Msg: &robonetv1.WorkRequest_Register{Register: &robonetv1.WorkRegister{Node: "w1", Capability: "c", Epoch: 2, Workers: []string{"w1/c/1"}, MaxMessageBytes: 16 << 20,
			Running: []*robonetv1.RunningAttempt{{Assignment: &robonetv1.Assignment{Dispatch: d, Generation: 3}, WorkerId: "w1/c/1"}}}}},
		{Msg: &robonetv1.WorkRequest_Heartbeats{Heartbeats: &robonetv1.WorkHeartbeats{Items: []*robonetv1.Heartbeat{
			heartbeatToProto(wag.Heartbeat{Key: testKey, WorkerID: "w1/c/1", Seq: 2})}}},
			Stamp: &robonetv1.Stamp{ChainId: 7, Index: 3, Token: make([]byte, 32), NextAnchor: make([]byte, 44)}},
		{Msg: &robonetv1.WorkRequest_Reports{Reports: &robonetv1.WorkReports{Items: []*robonetv1.Report{rep}}}},
		{Msg: &robonetv1.WorkRequest_Leave{Leave: &robonetv1.WorkLeave{Workers: []string{"w1/c/1"}}}},
		{Msg: &robonetv1.WorkRequest_Misbehaved{Misbehaved: &robonetv1.WorkMisbehaved{Items: []*robonetv1.Misbehaviour{
			{WorkerId: "w1/c/gpu-1", Kind: robonetv1.MisbehaviourKind_MISBEHAVIOUR_KIND_TOO_FAST}}}}},
	}
}

func workResponses(tb testing.TB) []*robonetv1.WorkResponse {
	a, _ := assignmentToProto(wag.Assignment{TaskDispatch: port.TaskDispatch{AttemptKey: testKey, Capability: "c", Action: "echo"}, Generation: 2})
	return []*robonetv1.WorkResponse{
		{Msg: &robonetv1.WorkResponse_Assign{Assign: &robonetv1.WorkAssign{Items: []*robonetv1.SlotAssignment{{WorkerId: "w1/c/1", Assignment: a}}}}},
		{Msg: &robonetv1.WorkResponse_Cancel{Cancel: &robonetv1.WorkCancel{Items: []*robonetv1.SlotCancel{{WorkerId: "w1/c/1", Key: keyToProto(testKey), Generation: 2}}}}},
		{Msg: &robonetv1.WorkResponse_Ack{Ack: &robonetv1.WorkAck{Seq: 9}}},
		{Msg: &robonetv1.WorkResponse_Ready{Ready: &robonetv1.WorkReady{MaxMessageBytes: 16 << 20}}},
	}
}

func leadRequests(tb testing.TB) []*robonetv1.LeadRequest {
	d, _ := dispatchToProto(port.TaskDispatch{AttemptKey: testKey, Capability: "c", Action: "echo", Input: []any{"x"}})
	return []*robonetv1.LeadRequest{
		{Msg: &robonetv1.LeadRequest_Open{Open: &robonetv1.LeadOpen{Term: 4, Leader: "s1", MaxMessageBytes: 16 << 20}}},
		{Msg: &robonetv1.LeadRequest_Roles{Roles: &robonetv1.LeadRoles{Id: 1, Roles: map[string]uint64{"c": 2}}}},
		{Msg: &robonetv1.LeadRequest_Dispatch{Dispatch: &robonetv1.LeadDispatch{Id: 2, Handoffs: []*robonetv1.Handoff{{Dispatch: d, Epoch: 2, WorkerId: "w1/c/1"}}}}},
		{Msg: &robonetv1.LeadRequest_Cancel{Cancel: &robonetv1.LeadCancel{Id: 3, Keys: []*robonetv1.AttemptKey{keyToProto(testKey)}}}},
		{Msg: &robonetv1.LeadRequest_Ack{Ack: &robonetv1.LeadAck{Seq: 5}}},
	}
}

func leadResponses(tb testing.TB) []*robonetv1.LeadResponse {
	r, _ := resultToProto(wag.SeqResult{Seq: 1, TaskResult: port.TaskResult{AttemptKey: testKey, OK: true, Output: "x"}})
	return []*robonetv1.LeadResponse{
		{Msg: &robonetv1.LeadResponse_Ready{Ready: &robonetv1.LeadReady{MaxMessageBytes: 16 << 20}}},
		{Msg: &robonetv1.LeadResponse_Answer{Answer: &robonetv1.LeadAnswer{Id: 2, AttemptErrors: map[int32]*robonetv1.WagError{0: {Message: "busy"}}}}},
		{Msg: &robonetv1.LeadResponse_Results{Results: &robonetv1.LeadResults{Results: []*robonetv1.WagResult{r}}}},
		{Msg: &robonetv1.LeadResponse_Progress{Progress: &robonetv1.LeadProgress{Items: []*robonetv1.WagProgress{progressToProto(port.TaskProgress{AttemptKey: testKey, Seq: 3})}}}},
		{Msg: &robonetv1.LeadResponse_Started{Started: &robonetv1.LeadStarted{Items: []*robonetv1.AttemptStarted{startedToProto(wag.Started{Key: testKey, Capability: "c"})}}}},
		{Msg: &robonetv1.LeadResponse_Observations{Observations: &robonetv1.LeadObservations{Items: []*robonetv1.Observation{
			observationToProto(sentinel.Observation{Node: "w1", Kind: sentinel.CPU, Value: 42})}}},
			Stamp: &robonetv1.Stamp{ChainId: 7, Index: 3, Token: make([]byte, 32)}},
	}
}

// BenchmarkCheckLeadRequest checks a dispatch request of 35 handoffs, the
// size the Router sends under load; every request a host receives pays it.
func BenchmarkCheckLeadRequest(b *testing.B) {
	handoffs := make([]*robonetv1.Handoff, 35)
	for i := range handoffs {
		handoffs[i] = &robonetv1.Handoff{Dispatch: honestDispatch(b)}
	}
	m := &robonetv1.LeadRequest{Msg: &robonetv1.LeadRequest_Dispatch{Dispatch: &robonetv1.LeadDispatch{Handoffs: handoffs}}}
	b.ReportAllocs()
	for b.Loop() {
		if err := checkLeadRequest(m); err != nil {
			b.Fatal(err)
		}
	}
}
