package e2e_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag/worker"
)

// shoutSpec spreads n "shout" tasks over the capability "ext", which no
// robonode serves itself: only external worker programs do.
var shoutSpec = testdataSpec("shout.yaml")

// shouter is an external worker program whose "shout" runs block until
// released; it records which program ran what.
type shouter struct {
	runLog[shoutRun]
	release chan struct{}
}

type shoutRun struct {
	program string
	task    string
	index   int32
	attempt uint32
	key     string
}

func newShouter() *shouter {
	return &shouter{runLog: newRunLog[shoutRun](), release: make(chan struct{})}
}

// program runs a program named name against n until the returned stop is
// called; stop waits for it to return.
func (s *shouter) program(t *testing.T, name string, n *testNode, slots int) (stop func()) {
	connected := make(chan string, 1)
	p := &worker.Program{
		Name: name, Capability: "ext", Slots: slots, Logger: zaptest.NewLogger(t).Named(name),
		OnConnect: func(node string) {
			select {
			case connected <- node:
			default:
			}
		},
		Handlers: map[string]worker.Handler{"shout": func(ctx context.Context, job *worker.Job) (any, error) {
			var in struct{ Word string }
			if err := job.Decode(&in); err != nil {
				return nil, err
			}
			job.Progress(1, 2, "shouting "+in.Word)
			s.add(shoutRun{program: name, task: job.Task, index: job.Index, attempt: job.Attempt, key: job.IdempotencyKey})
			select {
			case <-s.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return map[string]any{"word": strings.ToUpper(in.Word), "by": name}, nil
		}},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, n.conn) }()
	select {
	case <-connected:
	case err := <-done:
		cancel()
		t.Fatalf("program %s: %v", name, err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("program %s did not connect", name)
	}
	stopped := false
	stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("program %s: %v", name, err)
		}
	}
	t.Cleanup(stop)
	return stop
}

// A program outside robonode serves a capability no node serves: the node
// it connects to advertises the capability, a Waggler is placed for it,
// tasks run in the program and their progress shows. When the program
// disconnects mid-task, what it ran fails over at once to another program
// (on another node) as the same attempt — no retry spent — and every
// execution completes once.
func TestExternalWorkerProgram(t *testing.T) {
	m := startWagMesh(t)
	sh := newShouter()
	t.Cleanup(func() {
		select {
		case <-sh.release:
		default:
			close(sh.release)
		}
	})
	w1 := startNodeWith(t, wagNodeConfig(t, "w1", false, []string{m.server.node.GossipAddr()}, map[string]int{}, nil))
	stop1 := sh.program(t, "p1", w1, 2)

	id := submitSpec(t, m.server.api, shoutSpec, `{"n": 3}`)
	before := sh.waitRuns(t, "two runs on p1", func(r []shoutRun) bool { return len(r) == 2 })
	eventually(t, 30*time.Second, "the program's progress on the task", func() bool {
		resp, err := m.server.api.GetInstance(ctxFor(t, 10*time.Second), &robonetv1.GetInstanceRequest{InstanceId: id})
		if err != nil {
			t.Fatal(err)
		}
		for _, tk := range resp.GetInstance().GetTasks() {
			if strings.HasPrefix(tk.GetProgress().GetMessage(), "shouting w") {
				return true
			}
		}
		return false
	})

	// A second program on the server node, then the first one goes away.
	sh.program(t, "p2", m.server.testNode, 3)
	stop1()
	runs := sh.waitRuns(t, "p1's attempts and the queued one on p2", func(r []shoutRun) bool { return len(r) == 5 })
	for _, r := range runs[2:] {
		if r.program != "p2" {
			t.Fatalf("after p1 left, a run on %s: %+v", r.program, runs)
		}
		if r.attempt != 1 {
			t.Errorf("%s[%d] ran as attempt %d after the failover; a program that leaves costs no retry", r.task, r.index, r.attempt)
		}
	}
	reran := map[string]bool{}
	for _, r := range runs[2:] {
		reran[r.key] = true
	}
	for _, r := range before {
		if !reran[r.key] {
			t.Errorf("p1's attempt %s did not run again on p2", r.key)
		}
	}
	close(sh.release)
	in := waitDone(t, m.server.api, id, 30*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	checkOncePerExecution(t, id, m.history(id), 3)
	if got := in.GetOutputsJson(); !strings.Contains(got, `"W0"`) {
		t.Errorf("outputs %s, want the shouted words", got)
	}
}

// The node refuses a bad hello with what is wrong, and ends the session of
// a program that stops beating.
func TestExternalWorkerRejectedAndSilent(t *testing.T) {
	m := startWagMesh(t)
	p := &worker.Program{Name: "bad name!", Capability: "Ext", Slots: 0, Handlers: map[string]worker.Handler{"x": nil}}
	err := p.Run(ctxFor(t, 30*time.Second), m.server.conn)
	if !errors.Is(err, worker.ErrRejected) {
		t.Fatalf("Run = %v, want ErrRejected", err)
	}
	for _, want := range []string{"name", "slots 0 must be 1..1024"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}

	// Hello, then silence: the node ends the stream after its missed
	// heartbeats (3 × 100ms here).
	client := robonetv1.NewWorkerServiceClient(m.server.conn)
	stream, err := client.Serve(ctxFor(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	hello := &robonetv1.WorkerHello{Name: "mute", Capability: "ext", Actions: []string{"shout"}, Slots: 1}
	if err := stream.Send(&robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Hello{Hello: hello}}); err != nil {
		t.Fatal(err)
	}
	if msg, err := stream.Recv(); err != nil || msg.GetWelcome() == nil {
		t.Fatalf("first answer %v, %v; want a welcome", msg, err)
	}
	_, err = stream.Recv()
	if status.Code(err) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "no WorkerBeat") {
		t.Fatalf("silent program: %v, want DEADLINE_EXCEEDED naming the missing WorkerBeat", err)
	}
}
