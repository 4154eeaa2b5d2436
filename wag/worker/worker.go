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
// What a handler writes to Job.Stdout and Job.Stderr (a log.Logger's or
// slog handler's output, say) goes to the node as WorkerLog lines with the
// next beat, and `roboctl logs` shows it as it shows an exec task's
// output.
//
// Programs in other languages speak the same protocol from
// proto/robonet/v1/worker.proto.
package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"time"
	"unicode/utf8"

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

	attemptID string // the node's name of the attempt on this stream

	mu       sync.Mutex
	progress *robonetv1.SlotProgress

	logMu   sync.Mutex
	logs    [2]lineBuf // stdout, stderr
	pending int        // bytes of complete lines waiting
	ended   bool       // the last lines went: later writes are dropped
	// sendMu orders the job's WorkerLogs: lines taken are sent before
	// later ones are taken.
	sendMu sync.Mutex
	send   func(*robonetv1.ServeRequest) error
}

// Log line bounds: a line is at most maxLogLine bytes (worker.proto), and
// a job sends what it has once flushBytes wait, without waiting for the
// beat.
const (
	maxLogLine = 4 << 10
	flushBytes = 32 << 10
)

// lineBuf is one stream's lines waiting to be sent and the line being
// written.
type lineBuf struct {
	lines   []string
	partial []byte
	cut     int // bytes of the partial line past maxLogLine, dropped
}

// Stdout returns a writer of lines to the attempt's log (stream stdout):
// each line reaches the node with the next beat, or sooner when many wait,
// and before the attempt's result. Longer lines than 4 KiB are clipped,
// saying so; a last line without a newline is sent when the handler
// returns. Safe from any goroutine.
func (j *Job) Stdout() io.Writer { return jobLog{j, 0} }

// Stderr is Stdout's twin for stream stderr.
func (j *Job) Stderr() io.Writer { return jobLog{j, 1} }

type jobLog struct {
	j      *Job
	stream int
}

func (w jobLog) Write(p []byte) (int, error) {
	j, n := w.j, len(p)
	for len(p) > 0 {
		j.logMu.Lock()
		if j.ended {
			j.logMu.Unlock()
			break
		}
		b := &j.logs[w.stream]
		for len(p) > 0 && j.pending < flushBytes {
			i := bytes.IndexByte(p, '\n')
			chunk := p
			if i >= 0 {
				chunk = p[:i]
			}
			keep := min(max(maxLogLine-len(b.partial), 0), len(chunk))
			b.partial = append(b.partial, chunk[:keep]...)
			b.cut += len(chunk) - keep
			if i < 0 {
				p = nil
				break
			}
			j.pending += b.endLine()
			p = p[i+1:]
		}
		full := j.pending >= flushBytes
		j.logMu.Unlock()
		if full { // sent now, so that a message stays small
			j.flushLog(false)
		}
	}
	return n, nil
}

// endLine moves the partial line to the lines waiting; it returns its
// length.
func (b *lineBuf) endLine() int {
	line := string(b.partial)
	if b.cut > 0 {
		// Room for the note with as many digits as the whole line's
		// length has (the count cut has no more), cut at a rune.
		keep := max(maxLogLine-len(clipNote(b.cut+len(line))), 0)
		for keep > 0 && !utf8.RuneStart(line[keep]) {
			keep--
		}
		line = line[:keep] + clipNote(b.cut+len(line)-keep)
	}
	b.lines = append(b.lines, line)
	b.partial, b.cut = b.partial[:0], 0
	return len(line)
}

func clipNote(n int) string { return fmt.Sprintf(" … (%d bytes clipped)", n) }

// flushLog sends the lines waiting, one WorkerLog a stream; last also
// sends partial lines and refuses later writes.
func (j *Job) flushLog(last bool) {
	j.sendMu.Lock()
	defer j.sendMu.Unlock()
	j.logMu.Lock()
	var msgs []*robonetv1.WorkerLog
	for i := range j.logs {
		b := &j.logs[i]
		if last && (len(b.partial) > 0 || b.cut > 0) {
			b.endLine()
		}
		if len(b.lines) > 0 {
			msgs = append(msgs, &robonetv1.WorkerLog{Slot: j.Slot, AttemptId: j.attemptID, Stream: [2]string{"stdout", "stderr"}[i], Lines: b.lines})
			b.lines = nil
		}
	}
	j.pending = 0
	j.ended = j.ended || last
	j.logMu.Unlock()
	for _, m := range msgs {
		if j.send == nil || j.send(&robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Log{Log: m}}) != nil {
			return // the stream is gone: so is the attempt
		}
	}
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
// capability, action or slot count) or of its token (none, a wrong one,
// or one that may not serve the capability or claim the actions):
// retrying cannot help.
var ErrRejected = errors.New("worker: the node rejected the program")

// Run serves until ctx ends (returning ctx's error) or the node rejects
// the hello or the token (ErrRejected, with the node's status).
// Broken streams are reconnected with backoff.
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
		switch status.Code(err) {
		case codes.InvalidArgument:
			return fmt.Errorf("%w: %s", ErrRejected, status.Convert(err).Message())
		case codes.PermissionDenied, codes.Unauthenticated:
			return fmt.Errorf("%w: %w", ErrRejected, err)
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
		jobs := make([]*Job, 0, len(s.runs))
		for _, r := range s.runs {
			jobs = append(jobs, r.job)
		}
		s.mu.Unlock()
		if err := s.send(&robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Beat{Beat: b}}); err != nil {
			return err
		}
		for _, j := range jobs {
			j.flushLog(false)
		}
	}
}

// start runs an attempt in a goroutine of its own.
func (s *session) start(ctx context.Context, run *robonetv1.WorkerRun) {
	job := &Job{
		Action: run.GetAction(), Workflow: run.GetWorkflow(), Task: run.GetTask(), Index: run.GetIndex(),
		Attempt: run.GetAttempt(), IdempotencyKey: run.GetIdempotencyKey(), Input: run.GetInputJson(), Slot: run.GetSlot(),
		progress:  &robonetv1.SlotProgress{Slot: run.GetSlot(), AttemptId: run.GetAttemptId()},
		attemptID: run.GetAttemptId(), send: s.send,
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
		job.flushLog(true) // the node takes an attempt's lines until its result
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
