package remote

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/internal/access"
	"github.com/robonet/robonet/internal/clock/clocktest"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag"
	"github.com/robonet/robonet/wag/tasklog"
)

// poolCatcher is a PoolHost that keeps the registry of the pool a program
// adds, so a test can run the pool's handlers itself, and the
// misbehaviours it is told of.
type poolCatcher struct {
	regs chan *wag.Registry

	mu    sync.Mutex
	bad   []string // "capability/pool kind"
	names []string // of the pools added
}

func (p *poolCatcher) AddPool(_, name string, _ int, reg *wag.Registry) (func(context.Context) error, error) {
	p.mu.Lock()
	p.names = append(p.names, name)
	p.mu.Unlock()
	p.regs <- reg
	return func(context.Context) error { return nil }, nil
}

func (p *poolCatcher) Misbehaved(capability, name string, m wag.Misbehaviour) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bad = append(p.bad, capability+"/"+name+" "+m.String())
}

func (p *poolCatcher) misbehaviours() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.bad)
}

// externalSession is a program's Serve stream to an ExternalServer whose
// pool's handlers the test runs; the node keeps task logs in logs.
type externalSession struct {
	srv    *ExternalServer
	host   *poolCatcher
	logs   *tasklog.Store
	stream robonetv1.WorkerService_ServeClient
	reg    *wag.Registry
}

func startExternalSession(t *testing.T) *externalSession {
	t.Helper()
	return startExternalSessionWith(t, ExternalOptions{})
}

// startExternalSessionWith starts a session of program p1 serving shout
// on ext, the node configured with opts.
func startExternalSessionWith(t *testing.T, opts ExternalOptions) *externalSession {
	t.Helper()
	s, cc := newExternalServer(t, opts, nil)
	stream, err := robonetv1.NewWorkerServiceClient(cc).Serve(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	s.stream = stream
	s.send(t, &robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Hello{Hello: &robonetv1.WorkerHello{
		Name: "p1", Capability: "ext", Actions: []string{"shout"}, Slots: 1,
	}}})
	if msg, err := stream.Recv(); err != nil || msg.GetWelcome() == nil {
		t.Fatalf("first answer %v, %v; want a welcome", msg, err)
	}
	s.reg = <-s.host.regs
	return s
}

// newExternalServer serves an ExternalServer configured with opts on
// loopback; every stream carries principal (nil: none, as in-process).
func newExternalServer(t *testing.T, opts ExternalOptions, principal *access.Principal) (*externalSession, *grpc.ClientConn) {
	t.Helper()
	log := zaptest.NewLogger(t)
	logs, err := tasklog.Open(t.TempDir(), tasklog.Limits{}, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	opts.TaskLogs = logs
	host := &poolCatcher{regs: make(chan *wag.Registry, 1)}
	srv := NewExternalServer(host, "n1", time.Second, 30, log, opts)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		if principal != nil {
			ss = &principalStream{ServerStream: ss, ctx: access.NewContext(ss.Context(), principal)}
		}
		return handler(srv, ss)
	}))
	robonetv1.RegisterWorkerServiceServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return &externalSession{srv: srv, host: host, logs: logs}, cc
}

// principalStream is a stream whose context carries a principal, as the
// node's interceptor attaches it.
type principalStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *principalStream) Context() context.Context { return s.ctx }

func (s *externalSession) send(t *testing.T, req *robonetv1.ServeRequest) {
	t.Helper()
	if err := s.stream.Send(req); err != nil {
		t.Fatal(err)
	}
}

func (s *externalSession) sendLog(t *testing.T, id, stream string, lines ...string) {
	t.Helper()
	s.send(t, &robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Log{Log: &robonetv1.WorkerLog{
		Slot: 1, AttemptId: id, Stream: stream, Lines: lines,
	}}})
}

// run starts the pool's handler on an attempt of testKey; it returns the
// attempt's id on the stream and the handler's outcome.
func (s *externalSession) run(t *testing.T) (string, <-chan error) {
	t.Helper()
	h, ok := s.reg.Lookup("shout")
	if !ok {
		t.Fatal("the program's pool has no handler of shout")
	}
	done := make(chan error, 1)
	go func() {
		_, err := h(t.Context(), &wag.Call{Key: testKey, Slot: 1, Action: "shout", Input: map[string]any{}, MaxOutputBytes: 1 << 20})
		done <- err
	}()
	msg, err := s.stream.Recv()
	if err != nil || msg.GetRun() == nil {
		t.Fatalf("got %v, %v; want a WorkerRun", msg, err)
	}
	return msg.GetRun().GetAttemptId(), done
}

// end closes the program's side and waits for the node's to end, so
// everything sent has been handled.
func (s *externalSession) end(t *testing.T) error {
	t.Helper()
	if err := s.stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := s.stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func (s *externalSession) logOf(t *testing.T, k tasklog.Key) []string {
	t.Helper()
	var out []string
	err := s.logs.Read(t.Context(), k, tasklog.ReadOptions{}, func(ls []tasklog.Line) error {
		for _, l := range ls {
			out = append(out, l.Stream.String()+": "+string(l.Text))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading the log of %s: %v", k, err)
	}
	return out
}

// The lines a program sends for a running attempt are in the attempt's
// task log, by stream, clipped to MaxWorkerLogLine; lines of an attempt
// the node does not know, or that finished, are dropped and counted.
func TestExternalWorkerLogLines(t *testing.T) {
	s := startExternalSession(t)
	id, done := s.run(t)
	long := strings.Repeat("x", 10<<10)
	s.sendLog(t, id, "stdout", "one", "two\nthree")
	s.sendLog(t, id, "stderr", "oops")
	s.sendLog(t, id, "stdout", long)
	s.sendLog(t, "999", "stdout", "for nobody", "and again")
	s.send(t, &robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Done{Done: &robonetv1.WorkerDone{
		Slot: 1, AttemptId: id, Ok: true, OutputJson: []byte(`"ok"`),
	}}})
	if err := <-done; err != nil {
		t.Fatalf("the attempt failed: %v", err)
	}
	s.sendLog(t, id, "stderr", "too late")
	if err := s.end(t); err != nil {
		t.Fatalf("the session ended with %v", err)
	}

	got := s.logOf(t, tasklog.Key{Instance: testKey.InstanceID, Execution: testKey.ExecutionID, Attempt: testKey.Attempt})
	want := []string{"stdout: one", "stdout: two", "stdout: three", "stderr: oops"}
	if len(got) != 5 || !slices.Equal(got[:4], want) {
		t.Fatalf("log %q, want %q then the clipped line", got, want)
	}
	clipped := strings.TrimPrefix(got[4], "stdout: ")
	if len(clipped) > MaxWorkerLogLine || !strings.HasPrefix(clipped, "xxxx") || !strings.HasSuffix(clipped, " bytes clipped)") {
		t.Errorf("a %d-byte line kept as %d bytes ending %q; want at most %d, saying it was clipped",
			len(long), len(clipped), clipped[max(len(clipped)-40, 0):], MaxWorkerLogLine)
	}
	if n := s.srv.DroppedLogLines(); n != 3 {
		t.Errorf("%d lines dropped, want 3 (two for an unknown attempt, one after the attempt ended)", n)
	}
}

// An attempt whose program sends no line leaves no log; a line for a
// stream that is neither stdout nor stderr ends the session.
func TestExternalWorkerLogQuietAndBadStream(t *testing.T) {
	s := startExternalSession(t)
	id, done := s.run(t)
	s.send(t, &robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Done{Done: &robonetv1.WorkerDone{Slot: 1, AttemptId: id, Ok: true}}})
	if err := <-done; err != nil {
		t.Fatalf("the attempt failed: %v", err)
	}
	if s.logs.Has(tasklog.Key{Instance: testKey.InstanceID, Execution: testKey.ExecutionID, Attempt: testKey.Attempt}) {
		t.Error("a quiet attempt left a log")
	}

	s.sendLog(t, id, "stdlog", "hm")
	err := s.end(t)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), `"stdout" or "stderr"`) {
		t.Fatalf("a line for stream stdlog: %v, want INVALID_ARGUMENT naming the streams", err)
	}
}

// A program that sends its result and disconnects at once: the result
// stands. (When the handler finds the stream's end and the result ready
// together, it takes the result: that ordering is not forced here, the
// test runs the sequence a few times.)
func TestExternalResultThenDisconnect(t *testing.T) {
	for i := range 20 {
		s := startExternalSession(t)
		id, done := s.run(t)
		s.send(t, &robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Done{Done: &robonetv1.WorkerDone{
			Slot: 1, AttemptId: id, Ok: false, Error: "boom",
		}}})
		_ = s.end(t)
		if err := <-done; err == nil || err.Error() != "boom" {
			t.Fatalf("run %d: the handler returned %v, want the program's result (boom)", i, err)
		}
	}
}

// Who may serve what: a token scoped to text serves text, not code.exec;
// no program claims a built-in action unless the node allows it; a call
// without a principal (in-process) serves anything but the built-ins.
func TestExternalWhoMayServe(t *testing.T) {
	worker := &access.Principal{Name: "gpu-box", Role: access.Worker, Capabilities: []string{"text", "ai.*"}}
	var pools []string // the pools added, by name
	hello := func(t *testing.T, opts ExternalOptions, p *access.Principal, capability string, actions ...string) error {
		t.Helper()
		s, cc := newExternalServer(t, opts, p)
		t.Cleanup(func() {
			s.host.mu.Lock()
			pools = append(pools, s.host.names...)
			s.host.mu.Unlock()
		})
		stream, err := robonetv1.NewWorkerServiceClient(cc).Serve(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Hello{Hello: &robonetv1.WorkerHello{
			Name: "p1", Capability: capability, Actions: actions, Slots: 4}}}); err != nil {
			t.Fatal(err)
		}
		msg, err := stream.Recv()
		if err == nil && msg.GetWelcome() == nil {
			t.Fatalf("first answer %v; want a welcome or an error", msg)
		}
		if err == nil {
			<-s.host.regs
		}
		return err
	}
	for _, c := range []struct {
		name       string
		opts       ExternalOptions
		p          *access.Principal
		capability string
		actions    []string
		says       []string // empty: welcomed
	}{
		{"its capability", ExternalOptions{}, worker, "text", []string{"summarize"}, nil},
		{"a capability its glob allows", ExternalOptions{}, worker, "ai.inference", []string{"generate"}, nil},
		{"another capability", ExternalOptions{}, worker, "code.exec", []string{"run"},
			[]string{"token gpu-box", "text,ai.*", "not code.exec"}},
		{"a built-in action", ExternalOptions{}, worker, "text", []string{"summarize", "exec"},
			[]string{"action exec", "--allow-worker-builtins exec"}},
		{"built-ins without a principal", ExternalOptions{}, nil, "text", []string{"echo", "sleep"},
			[]string{"action echo, sleep"}},
		{"a built-in the node allows", ExternalOptions{AllowBuiltins: []string{"echo"}}, worker, "text", []string{"echo"}, nil},
		{"another built-in than the one allowed", ExternalOptions{AllowBuiltins: []string{"echo"}}, worker, "text", []string{"exec"},
			[]string{"action exec"}},
		{"every built-in allowed", ExternalOptions{AllowBuiltins: []string{"*"}}, nil, "code.exec", []string{"exec", "http"}, nil},
		{"an admin token, any capability", ExternalOptions{}, &access.Principal{Name: "ops", Role: access.Admin}, "code.exec", []string{"run"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := hello(t, c.opts, c.p, c.capability, c.actions...)
			if len(c.says) == 0 {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if status.Code(err) != codes.PermissionDenied {
				t.Fatalf("%v, want PERMISSION_DENIED", err)
			}
			for _, w := range c.says {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v does not say %q", err, w)
				}
			}
		})
	}
	// A worker token's programs are judged as the token (its pool is
	// TOKEN~NAME: subject NODE/TOKEN), others by their names.
	if want := []string{"gpu-box~p1", "gpu-box~p1", "gpu-box~p1", "p1", "p1"}; !slices.Equal(pools, want) {
		t.Errorf("pools %q, want %q", pools, want)
	}
}

// What only the node sees a program do wrong is misbehaviour, told to its
// pool's Waggler and counted: an answer sooner than the floor (taken all
// the same), an answer to an attempt it was never given, a second answer.
// An answer to an attempt the node withdrew is not.
func TestExternalMisbehaviour(t *testing.T) {
	clk := clocktest.New()
	s := startExternalSessionWith(t, ExternalOptions{MinRuntime: time.Millisecond, Clock: clk})
	done := func(id string) {
		s.send(t, &robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Done{Done: &robonetv1.WorkerDone{
			Slot: 1, AttemptId: id, Ok: true, OutputJson: []byte(`"ok"`)}}})
	}

	id, res := s.run(t) // answered at once: sooner than the floor
	done(id)
	if err := <-res; err != nil {
		t.Fatalf("a fast answer is taken all the same: %v", err)
	}
	id2, res2 := s.run(t) // answered after the floor
	clk.Advance(time.Millisecond)
	done(id2)
	if err := <-res2; err != nil {
		t.Fatal(err)
	}
	done(id)    // again
	done("77")  // never given
	done("x-1") // never given

	// Withdrawn by the node, then answered: crossed the cancel.
	ctx, cancel := context.WithCancel(t.Context())
	h, _ := s.reg.Lookup("shout")
	withdrawn := make(chan error, 1)
	go func() {
		_, err := h(ctx, &wag.Call{Key: testKey, Slot: 1, Action: "shout", Input: map[string]any{}, MaxOutputBytes: 1 << 20})
		withdrawn <- err
	}()
	msg, err := s.stream.Recv()
	if err != nil || msg.GetRun() == nil {
		t.Fatalf("got %v, %v; want a WorkerRun", msg, err)
	}
	cancel()
	<-withdrawn
	clk.Advance(time.Second)
	done(msg.GetRun().GetAttemptId())
	if err := s.end(t); err != nil {
		t.Fatal(err)
	}

	want := []string{"ext/p1 too_fast", "ext/p1 unsolicited", "ext/p1 unsolicited", "ext/p1 unsolicited"}
	if got := s.host.misbehaviours(); !slices.Equal(got, want) {
		t.Errorf("told the waggler %q, want %q", got, want)
	}
	if got := s.srv.Misbehaviours(); got[wag.TooFast] != 1 || got[wag.Unsolicited] != 3 {
		t.Errorf("counted %v, want 1 too fast and 3 unsolicited", got)
	}
}
