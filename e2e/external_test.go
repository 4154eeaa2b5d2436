package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
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

// rawProgram is a worker program speaking WorkerService by hand, so that
// a test chooses every message; it beats every 50 ms until the test ends.
type rawProgram struct {
	mu     sync.Mutex // a gRPC stream has one sender at a time
	stream robonetv1.WorkerService_ServeClient
}

func startRawProgram(t *testing.T, n *testNode, name string) *rawProgram {
	t.Helper()
	return startRawProgramOn(t, n.conn, &robonetv1.WorkerHello{Name: name, Capability: "ext", Actions: []string{"shout"}, Slots: 1})
}

// startRawProgramOn starts a raw program on cc (whose credentials are the
// program's) with hello.
func startRawProgramOn(t *testing.T, cc grpc.ClientConnInterface, hello *robonetv1.WorkerHello) *rawProgram {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stream, err := robonetv1.NewWorkerServiceClient(cc).Serve(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p := &rawProgram{stream: stream}
	p.send(t, &robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Hello{Hello: hello}})
	if msg, err := stream.Recv(); err != nil || msg.GetWelcome() == nil {
		t.Fatalf("first answer %v, %v; want a welcome", msg, err)
	}
	beats := make(chan struct{})
	go func() {
		defer close(beats)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			p.mu.Lock()
			err := stream.Send(&robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Beat{Beat: &robonetv1.WorkerBeat{}}})
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-beats
	})
	return p
}

func (p *rawProgram) send(t *testing.T, req *robonetv1.ServeRequest) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.stream.Send(req); err != nil {
		t.Fatal(err)
	}
}

func (p *rawProgram) log(t *testing.T, id, stream string, lines ...string) {
	t.Helper()
	p.send(t, &robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Log{Log: &robonetv1.WorkerLog{
		Slot: 1, AttemptId: id, Stream: stream, Lines: lines,
	}}})
}

// A worker program's log lines are its attempt's task log: a follower of
// the task sees them as they are sent, and TaskLogs through another node
// returns them as it returns an exec task's lines — an oversized line
// clipped, saying so. Lines for an attempt the node does not know, or
// that finished, are dropped and counted.
func TestExternalWorkerLogs(t *testing.T) {
	m := startWagMesh(t)
	cfg := wagNodeConfig(t, "w1", false, []string{m.server.node.GossipAddr()}, map[string]int{}, nil)
	cfg.HTTPAddr = "127.0.0.1:0"
	w1 := startNodeWith(t, cfg)
	p := startRawProgram(t, w1, "p1")

	id := submitSpec(t, m.server.api, shoutSpec, `{"n": 1}`)
	msg, err := p.stream.Recv()
	if err != nil || msg.GetRun() == nil {
		t.Fatalf("got %v, %v; want a WorkerRun", msg, err)
	}
	run := msg.GetRun()
	if run.GetTask() != "s" || run.GetIndex() != 0 {
		t.Fatalf("ran %s[%d], want s[0]", run.GetTask(), run.GetIndex())
	}

	// Followed through the server, from before the first line.
	ctx := ctxFor(t, 60*time.Second)
	follow, err := m.server.api.TaskLogs(ctx, &robonetv1.TaskLogsRequest{InstanceId: id, Task: "s[0]", Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	followed := make(chan string, 64)
	followErr := make(chan error, 1)
	go func() {
		defer close(followed)
		for {
			resp, err := follow.Recv()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					followErr <- err
				}
				return
			}
			for _, l := range resp.GetLines() {
				followed <- string(l.GetText())
			}
		}
	}()
	p.log(t, run.GetAttemptId(), "stdout", "hello from p1")
	select {
	case got := <-followed:
		if got != "hello from p1" {
			t.Fatalf("followed %q first", got)
		}
	case err := <-followErr:
		t.Fatalf("following: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("the follower did not see the line while the attempt ran")
	}

	long := strings.Repeat("z", 9000)
	p.log(t, run.GetAttemptId(), "stderr", "warming up", long)
	p.log(t, "no-such-attempt", "stdout", "lost")
	p.send(t, &robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Done{Done: &robonetv1.WorkerDone{
		Slot: 1, AttemptId: run.GetAttemptId(), Ok: true, OutputJson: []byte(`{"word": "W0"}`),
	}}})
	in := waitDone(t, m.server.api, id, 30*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	p.log(t, run.GetAttemptId(), "stdout", "after the end")

	// The follower ends with the attempt, having seen every line.
	var rest []string
	for l := range followed {
		rest = append(rest, l)
	}
	select {
	case err := <-followErr:
		t.Fatalf("following: %v", err)
	default:
	}
	if len(rest) != 2 || rest[0] != "warming up" {
		t.Fatalf("followed %d more lines, want the two of stderr: %.80q", len(rest), rest)
	}

	got, err := readTaskLog(ctx, m.server.api, &robonetv1.TaskLogsRequest{InstanceId: id, Task: "s[0]"})
	if err != nil {
		t.Fatal(err)
	}
	if got.node != "w1" || got.attempt != 1 || len(got.lines) != 3 ||
		!slices.Equal(got.lines[:2], []string{"stdout: hello from p1", "stderr: warming up"}) {
		t.Fatalf("log of s[0]: attempt %d on %s, lines %.200q", got.attempt, got.node, got.lines)
	}
	clipped := strings.TrimPrefix(got.lines[2], "stderr: ")
	if len(clipped) > 4<<10 || !strings.HasPrefix(clipped, "zzz") || !strings.HasSuffix(clipped, " bytes clipped)") {
		t.Fatalf("a 9000-byte line kept as %d bytes ending %q; want at most 4 KiB, saying so", len(clipped), clipped[max(len(clipped)-40, 0):])
	}

	// "lost" and "after the end", counted on w1.
	eventually(t, 10*time.Second, "two dropped lines counted", func() bool {
		return strings.Contains(scrapeMetrics(t, w1), "\nrobonet_worker_log_lines_dropped_total 2\n")
	})
}

// scrapeMetrics returns a node's /metrics.
func scrapeMetrics(t *testing.T, n *testNode) string {
	t.Helper()
	resp, err := http.Get("http://" + n.node.HTTPAddr() + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", resp.StatusCode, err)
	}
	return string(body)
}

// The Go worker library sends what an action writes to Job.Stdout and
// Job.Stderr: whole lines, a last line without a newline, a long line
// clipped.
func TestExternalWorkerLibraryLogs(t *testing.T) {
	m := startWagMesh(t)
	p := &worker.Program{
		Name: "p1", Capability: "ext", Slots: 1, Logger: zaptest.NewLogger(t).Named("p1"),
		Handlers: map[string]worker.Handler{"shout": func(_ context.Context, job *worker.Job) (any, error) {
			logger := log.New(job.Stderr(), "", 0)
			logger.Printf("shouting %s", job.Task)
			fmt.Fprintf(job.Stdout(), "%s\n", strings.Repeat("y", 5000))
			fmt.Fprint(job.Stdout(), "done, no newline")
			return map[string]any{"word": "W0"}, nil
		}},
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- p.Run(ctx, m.server.conn) }()
	t.Cleanup(func() {
		cancel()
		<-ran
	})
	id := submitSpec(t, m.server.api, shoutSpec, `{"n": 1}`)
	in := waitDone(t, m.server.api, id, 30*time.Second)
	wantState(t, in, robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	got, err := readTaskLog(ctxFor(t, 30*time.Second), m.server.api, &robonetv1.TaskLogsRequest{InstanceId: id, Task: "s[0]"})
	if err != nil {
		t.Fatal(err)
	}
	lines := slices.Clone(got.lines)
	slices.Sort(lines) // stdout and stderr are sent apart
	if len(lines) != 3 || lines[0] != "stderr: shouting s" || lines[1] != "stdout: done, no newline" ||
		!strings.HasSuffix(lines[2], " bytes clipped)") || len(lines[2]) > len("stdout: ")+4<<10 {
		t.Fatalf("log %.300q", got.lines)
	}
}
