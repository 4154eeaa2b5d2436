package remote

import (
	"context"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/robonet/robonet/engine/port"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag"
)

func TestRuns(t *testing.T) {
	big := maxCoalesced
	for _, tc := range []struct {
		sizes []int
		want  [][2]int
	}{
		{nil, nil},
		{[]int{10, 10, 10}, [][2]int{{0, 3}}},
		{[]int{10, big, 10}, [][2]int{{0, 1}, {1, 2}, {2, 3}}},                                           // a large one alone
		{[]int{big / 2, big / 2, 1}, [][2]int{{0, 2}, {2, 3}}},                                           // bytes
		{make([]int, maxPerRequest+1), [][2]int{{0, maxPerRequest}, {maxPerRequest, maxPerRequest + 1}}}, // items
	} {
		var got [][2]int
		for start, end := range runs(tc.sizes) {
			got = append(got, [2]int{start, end})
		}
		if len(got) != len(tc.want) {
			t.Fatalf("runs(%d sizes) = %v, want %v", len(tc.sizes), got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("runs(%d sizes) = %v, want %v", len(tc.sizes), got, tc.want)
			}
		}
	}
}

// resultLog is an Uplink that hands the results it receives to got.
type resultLog struct{ got chan wag.SeqResult }

func (u *resultLog) Results(rs []wag.SeqResult) error {
	for _, r := range rs {
		u.got <- r
	}
	return nil
}
func (*resultLog) Progress([]port.TaskProgress) {}
func (*resultLog) Started([]wag.Started)        {}

// dispatchOne hands the host one attempt of capability "c" with input and
// returns its result.
func dispatchOne(t *testing.T, l *LeadLink, up *resultLog, input any) wag.SeqResult {
	t.Helper()
	d := port.TaskDispatch{AttemptKey: testKey, Term: 1, Capability: "c", Action: "echo", Input: input}
	if errs := l.Dispatch([]wag.Handoff{{TaskDispatch: d, Epoch: 1}}); errs != nil && errs[0] != nil {
		t.Fatal(errs[0])
	}
	select {
	case r := <-up.got:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no result reached the leader within 10s")
		return wag.SeqResult{}
	}
}

// slot is a pool's worker whose Run calls run.
type slot struct {
	id  string
	run func(a wag.Assignment)
}

func (s *slot) ID() string                     { return s.id }
func (s *slot) Run(a wag.Assignment)           { s.run(a) }
func (s *slot) Cancel(port.AttemptKey, uint64) {}

// workStreamMesh is a leader's session with a Waggler host whose node
// takes messages of hostLimit bytes, and a pool on a node that takes
// poolLimit working for its Waggler of "c" through a Work stream.
func workStreamMesh(t *testing.T, hostLimit, poolLimit int, run func(target *WorkTarget, a wag.Assignment)) (*LeadLink, *resultLog) {
	t.Helper()
	log := zaptest.NewLogger(t)
	host, err := wag.NewWagglerHost(wag.Config{NodeName: "h", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Stop(context.Background()) })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.MaxRecvMsgSize(hostLimit), grpc.MaxSendMsgSize(hostLimit))
	robonetv1.RegisterWagServiceServer(gs, NewServer(host, log, ServerOptions{MaxMessageBytes: hostLimit}))
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	dialWith := func(limit int) robonetv1.WagServiceClient {
		cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(limit), grpc.MaxCallSendMsgSize(limit)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cc.Close() })
		return robonetv1.NewWagServiceClient(cc)
	}
	up := &resultLog{got: make(chan wag.SeqResult, 16)}
	l, err := OpenLead(t.Context(), dialWith(16<<20), wag.Owner{Term: 1}, "leader", "h", up, log, LeadOptions{MaxMessageBytes: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if err := l.SetRoles(map[string]uint64{"c": 1}, nil); err != nil {
		t.Fatal(err)
	}
	target := NewWorkTarget(dialWith(poolLimit), "p", "c", 1, func() []wag.Running { return nil }, log, "h", WorkOptions{MaxMessageBytes: poolLimit})
	target.Register([]wag.Worker{&slot{id: "p/c/0", run: func(a wag.Assignment) { run(target, a) }}}, nil)
	t.Cleanup(func() { target.Release() })
	return l, up
}

// The Waggler's node takes large messages, the pool's node small ones:
// an assignment the pool's node would refuse is never sent, and its
// attempt fails with an error that names the setting.
func TestAssignmentTooLargeForThePoolsNode(t *testing.T) {
	l, up := workStreamMesh(t, 16<<20, 64<<10, func(*WorkTarget, wag.Assignment) {
		t.Error("an assignment too large for the pool's node reached the pool")
	})
	r := dispatchOne(t, l, up, strings.Repeat("x", 100<<10))
	if r.OK || !strings.Contains(r.Error, "input makes a message of") || !strings.Contains(r.Error, "messages to node p are at most 65536 bytes") {
		t.Fatalf("result ok=%v error %q, want a failure naming the pool's node and its limit", r.OK, r.Error)
	}
}

// The pool's node takes large messages, the Waggler's node small ones: a
// report the Waggler's node would refuse goes as a failure instead.
func TestReportTooLargeForTheWagglersNode(t *testing.T) {
	l, up := workStreamMesh(t, 64<<10, 16<<20, func(target *WorkTarget, a wag.Assignment) {
		now := time.Now()
		go target.Report(wag.Report{Key: a.AttemptKey, Generation: a.Generation, WorkerID: "p/c/0", OK: true,
			Output: strings.Repeat("x", 100<<10), StartedAt: now, FinishedAt: now})
	})
	r := dispatchOne(t, l, up, "small")
	if r.OK || !strings.Contains(r.Error, "output makes a message of") || !strings.Contains(r.Error, "messages to the waggler's node h are at most 65536 bytes") {
		t.Fatalf("result ok=%v error %q, want a failure naming the Waggler's node and its limit", r.OK, r.Error)
	}
}

// A pool whose slots run attempts with large inputs lists what fits in one
// registration; a slot whose attempt does not fit is left out with it, so
// the Waggler neither adopts half of it nor gives the busy slot more work.
func TestRegistrationWithinOneMessage(t *testing.T) {
	var running []wag.Running
	for i := range 4 {
		k := testKey
		k.ExecutionID = fmt.Sprintf("s[%d]", i)
		running = append(running, wag.Running{Assignment: wag.Assignment{TaskDispatch: port.TaskDispatch{AttemptKey: k, Term: 1, Capability: "c",
			Action: "echo", Input: strings.Repeat("x", maxCoalesced/3)}, Generation: 1<<32 + uint64(i)}, WorkerID: fmt.Sprintf("p/c/%d", i)})
	}
	target := NewWorkTarget(nil, "p", "c", 1, func() []wag.Running { return running }, zaptest.NewLogger(t), "h", WorkOptions{})
	t.Cleanup(func() { target.Release() })
	for i := range 5 {
		target.workers[fmt.Sprintf("p/c/%d", i)] = &slot{id: fmt.Sprintf("p/c/%d", i)}
	}
	reg, left := target.registration()
	if size := proto.Size(reg); size > maxCoalesced+1024 {
		t.Fatalf("registration of %d bytes", size)
	}
	listed := map[string]bool{}
	for _, r := range reg.GetRunning() {
		listed[r.GetWorkerId()] = true
	}
	slices.Sort(reg.Workers)
	if len(listed) != 2 || !slices.Equal(reg.GetWorkers(), []string{"p/c/0", "p/c/1", "p/c/4"}) || len(left) != 2 || !left["p/c/2"] || !left["p/c/3"] {
		t.Fatalf("running listed %v, workers %v, left out %v; want the first two attempts, and the slots of the others left out", listed, reg.GetWorkers(), left)
	}

	// When the last slot left out reports, the stream ends, for the next
	// to register every slot.
	ended := 0
	target.mu.Lock()
	target.leftOut, target.endStream = left, func() { ended++ }
	target.mu.Unlock()
	target.Report(wag.Report{Key: running[2].AttemptKey, Generation: running[2].Generation, WorkerID: "p/c/2", OK: true, Output: "done"})
	if ended != 0 {
		t.Fatal("the stream ended while a slot left out still runs")
	}
	target.Report(wag.Report{Key: running[3].AttemptKey, Generation: running[3].Generation, WorkerID: "p/c/3", OK: true, Output: "done"})
	if ended != 1 {
		t.Fatalf("the stream ended %d times once every slot left out reported, want once", ended)
	}
}

// The size bounds are never below the encoded size, also with every
// number at its largest, and within a few hundred bytes of it.
func TestSizeBounds(t *testing.T) {
	key := &robonetv1.AttemptKey{InstanceId: "0190b5c6-6e0a-7c4e-9d6a-3f1e2d4c5b6a", ExecutionId: strings.Repeat("e", 300), Attempt: math.MaxUint32}
	d := &robonetv1.Dispatch{Key: key, Term: math.MaxUint64, Workflow: "wf", Task: "t", Index: math.MinInt32, Capability: "c", Action: "a",
		InputJson: []byte(strings.Repeat("x", 5000)), TimeoutNs: math.MinInt64, Verify: math.MaxUint32, Group: "g", Avoid: []string{"n1", "n2", "n3"}, Node: "node-a"}
	h := &robonetv1.Handoff{Dispatch: d, Epoch: math.MaxUint64, WorkerId: "w/c/1", Generation: math.MaxUint64}
	sa := &robonetv1.SlotAssignment{WorkerId: "w/c/1", Assignment: &robonetv1.Assignment{Dispatch: d, Generation: math.MaxUint64}}
	r := &robonetv1.WagResult{Seq: math.MaxUint64, Key: key, Ok: true, OutputJson: []byte("[1,2]"), Error: "e", WorkerId: "w/c/1",
		StartedUnixNs: math.MinInt64, FinishedUnixNs: math.MinInt64}
	rep := &robonetv1.Report{Seq: math.MaxUint64, Key: key, Generation: math.MaxUint64, WorkerId: "w/c/1", Ok: true, OutputJson: []byte("{}"),
		Error: "e", StartedUnixNs: math.MinInt64, FinishedUnixNs: math.MinInt64, Cancelled: true}
	for _, c := range []struct {
		what  string
		bound int
		m     proto.Message
	}{
		{"dispatch", dispatchBound(d), d},
		{"handoff", handoffBound(h), h},
		{"slot assignment", slotAssignmentBound(sa), sa},
		{"result", resultBound(r), r},
		{"report", reportBound(rep), rep},
	} {
		size := proto.Size(c.m)
		if c.bound < size || c.bound > size+300 {
			t.Errorf("%s: bound %d, size %d", c.what, c.bound, size)
		}
	}
}
