// Package worker is the Go client of roboNet's WorkerService: a program
// outside robonode that serves a capability's actions. It connects to any
// node, says what it serves, runs the attempts the node sends it and
// answers each, beating every heartbeat interval so that the node knows
// it is alive. A broken stream is reconnected with backoff; what ran on
// it is cancelled here and retried by the mesh.
//
//	p := &worker.Program{
//		Name: "summarizer-1", Capability: "ai.inference", Slots: 4,
//		Handlers: map[string]worker.Handler{"summarize": summarize},
//	}
//	err := p.Run(ctx, conn) // until ctx ends
//
// Dispatch is at-least-once: the same attempt may arrive twice (after a
// failover, or when a result was lost). Job.IdempotencyKey names the
// attempt for deduplicating side effects.
//
// Programs in other languages speak the same protocol from
// proto/robonet/v1/worker.proto.
package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Handler runs one attempt. It must return promptly once ctx is done (the
// attempt was cancelled, timed out or the stream broke). The output is
// encoded with encoding/json; nil is JSON null.
type Handler func(ctx context.Context, job *Job) (any, error)

// Job is one attempt as the handler sees it.
type Job struct {
	Action         string
	Workflow       string
	Task           string
	Index          int32 // spread index, -1 for a plain task
	Attempt        uint32
	IdempotencyKey string
	// Input is the task's evaluated `with`, as JSON.
	Input json.RawMessage
	// Slot is the slot (1..Slots) the attempt runs on.
	Slot int32

	mu       sync.Mutex
	progress *robonetv1.SlotProgress
}

// Decode unmarshals the input into v.
func (j *Job) Decode(v any) error {
	if err := json.Unmarshal(j.Input, v); err != nil {
		return fmt.Errorf("worker: input of %s/%s: %w", j.Task, j.Action, err)
	}
	return nil
}

// Progress reports how far the attempt has come (total 0: unknown); the
// latest report rides the next beat. Safe from any goroutine.
func (j *Job) Progress(done, total int64, message string) {
	j.mu.Lock()
	j.progress.StepsDone, j.progress.StepsTotal, j.progress.Message = done, total, message
	j.mu.Unlock()
}

func (j *Job) snapshot() *robonetv1.SlotProgress {
	j.mu.Lock()
	defer j.mu.Unlock()
	p := j.progress
	return &robonetv1.SlotProgress{Slot: p.Slot, AttemptId: p.AttemptId, StepsDone: p.StepsDone, StepsTotal: p.StepsTotal, Message: p.Message}
}

// Program is a worker program's identity and actions.
type Program struct {
	// Name identifies the program on the node it connects to (letters,
	// digits, '.', '_', '-'; at most 64 bytes). Two programs connected to
	// the same node serving the same capability need different names.
	Name string
	// Capability is the capability served, e.g. "ai.inference".
	Capability string
	// Slots is how many attempts run at once (1..1024).
	Slots int
	// Handlers maps action names to handlers.
	Handlers map[string]Handler
	// Logger receives connection events; nil: none.
	Logger *zap.Logger
	// OnConnect, if set, is called with the node's name each time a
	// session starts (tests and progress output).
	OnConnect func(node string)
}

// Reconnection backoff.
const (
	backoffMin = 100 * time.Millisecond
	backoffMax = 5 * time.Second
)

// ErrRejected wraps the node's refusal of the program's hello (a bad name,
// capability, action or slot count): retrying cannot help.
var ErrRejected = errors.New("worker: the node rejected the program")

// Run serves until ctx ends (returning ctx's error) or the node rejects
// the hello (ErrRejected). Broken streams are reconnected with backoff.
func (p *Program) Run(ctx context.Context, cc grpc.ClientConnInterface) error {
	log := p.Logger
	if log == nil {
		log = zap.NewNop()
	}
	log = log.With(zap.String("program", p.Name), zap.String("capability", p.Capability))
	client := robonetv1.NewWorkerServiceClient(cc)
	backoff := backoffMin
	for {
		served, err := p.session(ctx, client, log)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if c := status.Code(err); c == codes.InvalidArgument {
			return fmt.Errorf("%w: %s", ErrRejected, status.Convert(err).Message())
		}
		if served {
			backoff = backoffMin
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		log.Info("session ended; connecting again", zap.Error(err), zap.Duration("in", wait))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		backoff = min(2*backoff, backoffMax)
	}
}

// session runs one stream; served tells whether the node welcomed it.
func (p *Program) session(ctx context.Context, client robonetv1.WorkerServiceClient, log *zap.Logger) (served bool, err error) {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.Serve(sctx)
	if err != nil {
		return false, err
	}
	actions := make([]string, 0, len(p.Handlers))
	for a := range p.Handlers {
		actions = append(actions, a)
	}
	hello := &robonetv1.WorkerHello{Name: p.Name, Capability: p.Capability, Actions: actions, Slots: int32(min(p.Slots, 1<<20))}
	if err := stream.Send(&robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Hello{Hello: hello}}); err != nil {
		return false, err
	}
	first, err := stream.Recv()
	if err != nil {
		return false, err
	}
	welcome := first.GetWelcome()
	if welcome == nil {
		return false, errors.New("worker: the node answered the hello without a WorkerWelcome")
	}
	interval := time.Duration(welcome.GetHeartbeatIntervalNs())
	if interval <= 0 {
		interval = time.Second
	}
	log.Info("serving", zap.String("node", welcome.GetNode()), zap.Duration("heartbeat_interval", interval))
	if p.OnConnect != nil {
		p.OnConnect(welcome.GetNode())
	}

	s := &session{p: p, stream: stream, log: log, runs: map[string]*running{}}
	defer s.wait()
	defer cancel() // runs stop before session waits for them

	beatErr := make(chan error, 1)
	s.wg.Go(func() { beatErr <- s.beat(sctx, interval) })
	for {
		msg, err := stream.Recv()
		if err != nil {
			return true, err
		}
		switch m := msg.GetMsg().(type) {
		case *robonetv1.ServeResponse_Run:
			s.start(sctx, m.Run)
		case *robonetv1.ServeResponse_Cancel:
			s.cancel(m.Cancel.GetAttemptId())
		}
		select {
		case err := <-beatErr:
			return true, err
		default:
		}
	}
}

// session is one stream's running attempts.
type session struct {
	p      *Program
	stream robonetv1.WorkerService_ServeClient
	log    *zap.Logger

	sendMu sync.Mutex // a gRPC stream has one sender at a time
	wg     sync.WaitGroup

	mu   sync.Mutex
	runs map[string]*running
}

type running struct {
	job    *Job
	cancel context.CancelFunc
}

func (s *session) send(req *robonetv1.ServeRequest) error {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	return s.stream.Send(req)
}

// beat sends the progress of what runs every interval until ctx ends.
func (s *session) beat(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		s.mu.Lock()
		b := &robonetv1.WorkerBeat{Running: make([]*robonetv1.SlotProgress, 0, len(s.runs))}
		for _, r := range s.runs {
			b.Running = append(b.Running, r.job.snapshot())
		}
		s.mu.Unlock()
		if err := s.send(&robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Beat{Beat: b}}); err != nil {
			return err
		}
	}
}

// start runs an attempt in a goroutine of its own.
func (s *session) start(ctx context.Context, run *robonetv1.WorkerRun) {
	job := &Job{
		Action: run.GetAction(), Workflow: run.GetWorkflow(), Task: run.GetTask(), Index: run.GetIndex(),
		Attempt: run.GetAttempt(), IdempotencyKey: run.GetIdempotencyKey(), Input: run.GetInputJson(), Slot: run.GetSlot(),
		progress: &robonetv1.SlotProgress{Slot: run.GetSlot(), AttemptId: run.GetAttemptId()},
	}
	var rctx context.Context
	var cancel context.CancelFunc
	if d := time.Duration(run.GetTimeoutNs()); d > 0 {
		rctx, cancel = context.WithTimeout(ctx, d)
	} else {
		rctx, cancel = context.WithCancel(ctx)
	}
	id := run.GetAttemptId()
	s.mu.Lock()
	s.runs[id] = &running{job: job, cancel: cancel}
	s.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		done := s.invoke(rctx, job)
		s.mu.Lock()
		delete(s.runs, id)
		s.mu.Unlock()
		if ctx.Err() != nil {
			return // the stream is gone: nobody reads the result
		}
		done.Slot, done.AttemptId = run.GetSlot(), id
		if err := s.send(&robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Done{Done: done}}); err != nil {
			s.log.Debug("sending a result failed", zap.Error(err))
		}
	}()
}

// invoke calls the handler, containing panics, and encodes its result.
func (s *session) invoke(ctx context.Context, job *Job) (done *robonetv1.WorkerDone) {
	h, ok := s.p.Handlers[job.Action]
	if !ok {
		return &robonetv1.WorkerDone{Error: fmt.Sprintf("program %s has no action %q", s.p.Name, job.Action)}
	}
	defer func() {
		if x := recover(); x != nil {
			done = &robonetv1.WorkerDone{Error: fmt.Sprintf("action %s panicked: %v", job.Action, x)}
		}
	}()
	out, err := h(ctx, job)
	if err != nil {
		return &robonetv1.WorkerDone{Error: err.Error()}
	}
	data, err := json.Marshal(out)
	if err != nil {
		return &robonetv1.WorkerDone{Error: fmt.Sprintf("encoding the output of %s: %v", job.Action, err)}
	}
	return &robonetv1.WorkerDone{Ok: true, OutputJson: data}
}

// cancel stops one attempt.
func (s *session) cancel(id string) {
	s.mu.Lock()
	r := s.runs[id]
	s.mu.Unlock()
	if r != nil {
		r.cancel()
	}
}

// wait waits for the session's attempts and its beat to return.
func (s *session) wait() { s.wg.Wait() }
