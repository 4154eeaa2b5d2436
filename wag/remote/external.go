package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/access"
	"github.com/robonet/robonet/internal/clock"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag"
	"github.com/robonet/robonet/wag/tasklog"
)

// Bounds of a WorkerHello.
const (
	MaxExternalSlots   = 1024
	MaxExternalActions = 256
	maxWorkerName      = 64
	maxActionName      = 128
	maxDoneError       = 64 << 10 // bytes of a WorkerDone error kept
	maxProgressMessage = 1 << 10
)

var workerNameRE = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// PoolHost is where external workers' pools live: the node's
// *wag.WorkerHost.
type PoolHost interface {
	AddPool(capability, name string, size int, reg *wag.Registry) (remove func(ctx context.Context) error, err error)
	// Misbehaved tells the pool's Waggler what the program behind the
	// pool called name did (wag.WorkerHost.Misbehaved).
	Misbehaved(capability, name string, m wag.Misbehaviour)
}

// ExternalServer is the WorkerService of a node: it lets a program in any
// language serve a capability. Each stream becomes one pool of the node's
// worker host whose handlers forward attempts to the program; the node
// heartbeats them to the capability's Waggler like its own pools'. A
// program that stops talking for MissedHeartbeats intervals, or whose
// stream breaks, loses its pool: what it ran fails and is retried. The
// lines a program sends for a running attempt (WorkerLog) go to the node's
// task logs, read as an exec attempt's output is (roboctl logs).
//
// Who may serve what: a program's token must allow its capability (a
// worker token's capabilities=; the node's API interceptor lets in only
// worker and admin tokens), and no program may claim a built-in action
// (wag.BuiltinActions) unless the node allows it (AllowBuiltins).
// Refusals are PERMISSION_DENIED naming the token, the capability or
// actions, and what is allowed. Each program is a trust subject of its
// own, NODE/PROGRAM (wag.WorkerSubject; PROGRAM is its worker token's
// name, see poolName): the Waggler gives it one attempt
// at a time until it has earned the dispatch tier, and counts against it
// what it loses or gets outvoted on. What only the node sees — an answer
// to an attempt the program was never given (or had answered already),
// an answer sooner than MinRuntime — is misbehaviour: counted here
// (Misbehaviours) and told to the pool's Waggler (PoolHost.Misbehaved),
// which counts it against the program's trust; the Sentinel quarantines
// a program that keeps at it. The answer itself is taken as it is.
type ExternalServer struct {
	robonetv1.UnimplementedWorkerServiceServer
	host     PoolHost
	node     string
	interval time.Duration
	missed   int
	logs     *tasklog.Store
	log      *zap.Logger
	builtins []string // the built-in actions programs may claim
	floor    time.Duration
	clock    clock.Clock

	droppedLines atomic.Uint64
	misbehaved   [wag.MisbehaviourKinds]atomic.Uint64 // by wag.Misbehaviour
}

// ExternalOptions are an ExternalServer's optional parts.
type ExternalOptions struct {
	// TaskLogs keeps the lines programs send for their attempts; nil:
	// they are dropped (and counted).
	TaskLogs *tasklog.Store
	// AllowBuiltins names the built-in actions (wag.BuiltinActions)
	// programs may claim; "*" allows them all. Empty: none.
	AllowBuiltins []string
	// MinRuntime is the floor of how soon a program may answer an
	// attempt after the node sent it: a sooner answer is misbehaviour
	// (wag.TooFast). 0: no floor.
	MinRuntime time.Duration
	// Clock times the answers; nil: the system clock.
	Clock clock.Clock
}

// NewExternalServer serves external workers into host; interval and
// missed are the node's heartbeat interval and missed-heartbeat count.
func NewExternalServer(host PoolHost, node string, interval time.Duration, missed int, log *zap.Logger, opts ExternalOptions) *ExternalServer {
	if log == nil {
		log = zap.NewNop()
	}
	if opts.Clock == nil {
		opts.Clock = clock.System()
	}
	return &ExternalServer{host: host, node: node, interval: interval, missed: missed, logs: opts.TaskLogs, log: log.Named("external"),
		builtins: opts.AllowBuiltins, floor: opts.MinRuntime, clock: opts.Clock}
}

// DroppedLogLines counts the lines programs sent that no log took: for an
// attempt the node does not know or that had finished (or one it keeps no
// log of).
func (s *ExternalServer) DroppedLogLines() uint64 { return s.droppedLines.Load() }

// Misbehaviours counts what the programs connected to this node did that
// no honest program does, by kind.
func (s *ExternalServer) Misbehaviours() map[wag.Misbehaviour]uint64 {
	out := make(map[wag.Misbehaviour]uint64, len(wag.Misbehaviours))
	for _, m := range wag.Misbehaviours {
		out[m] = s.misbehaved[m].Load()
	}
	return out
}

// poolName names the pool of a program called name: its name, or for a
// program connected with a worker token TOKEN~NAME, so that its trust
// subject is the token's (wag.WorkerSubject: NODE/TOKEN). The credential
// is the program's identity: a program that changes its name, or a token
// that connects more programs, gets no fresh probation and escapes no
// quarantine. (An admin, or anyone on a node without tokens, may do
// anything anyway: its programs are judged by their names.)
func poolName(ctx context.Context, name string) string {
	if p, ok := access.FromContext(ctx); ok && p.Role == access.Worker {
		return p.Name + wag.SubjectSep + name
	}
	return name
}

// mayServe checks that the caller's token may serve the hello's
// capability, and that the hello claims no built-in action the node keeps
// to itself. A call without a principal (in-process, or a node without
// tokens) may serve any capability.
func (s *ExternalServer) mayServe(ctx context.Context, h *robonetv1.WorkerHello) error {
	if p, ok := access.FromContext(ctx); ok && !p.MayCapability(h.GetCapability()) {
		return status.Errorf(codes.PermissionDenied,
			"token %s may serve the capabilities %s, not %s: serve one of those, or give the program a token whose capabilities= allows %s",
			p.Name, strings.Join(p.Capabilities, ","), h.GetCapability(), h.GetCapability())
	}
	var claimed []string
	for _, a := range h.GetActions() {
		if slices.Contains(wag.BuiltinActions(), a) && !slices.Contains(s.builtins, a) && !slices.Contains(s.builtins, "*") {
			claimed = append(claimed, a)
		}
	}
	if len(claimed) > 0 {
		return status.Errorf(codes.PermissionDenied,
			"action %s: robonode's built-in actions (%s) are not a worker program's to claim unless its node allows them (robonode --allow-worker-builtins %s); give the program's actions names of their own",
			strings.Join(claimed, ", "), strings.Join(wag.BuiltinActions(), ", "), strings.Join(claimed, ","))
	}
	return nil
}

// Serve runs one program's session (see worker.proto for the protocol).
func (s *ExternalServer) Serve(stream robonetv1.WorkerService_ServeServer) error {
	ctx, cancel := context.WithCancelCause(stream.Context())
	defer cancel(errors.New("stream ended"))
	var c *extConn
	o, err := handshake[*robonetv1.ServeRequest, *robonetv1.WorkerHello, *robonetv1.ServeResponse]{
		opening: (*robonetv1.ServeRequest).GetHello,
		missing: "a Serve stream starts with WorkerHello (name, capability, actions, slots)",
		admit: func(_ *robonetv1.ServeRequest, hello *robonetv1.WorkerHello) (func(), error) {
			return nil, s.admit(stream.Context(), hello)
		},
		send: stream.Send,
		log:  s.log,
		name: func(hello *robonetv1.WorkerHello) string { return "Serve to " + hello.GetName() },
		setUp: func(hello *robonetv1.WorkerHello, out *sender[*robonetv1.ServeResponse]) (*robonetv1.ServeResponse, func(), error) {
			pool := poolName(stream.Context(), hello.GetName())
			c = s.newConn(ctx, hello, pool, out)
			return s.addPool(c, hello, pool, cancel)
		},
	}.accept(stream.Recv)
	if err != nil {
		return err
	}
	defer o.close()
	c.log.Info("external worker connected", zap.Strings("actions", o.open.GetActions()), zap.Int32("slots", o.open.GetSlots()))
	return s.converse(ctx, stream.Recv, c)
}

// admit admits a program's WorkerHello: well formed, and within what the
// caller's token and the node allow (mayServe).
func (s *ExternalServer) admit(ctx context.Context, hello *robonetv1.WorkerHello) error {
	if err := validateHello(hello); err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	if err := s.mayServe(ctx, hello); err != nil {
		s.log.Warn("a worker program was refused", zap.String("program", hello.GetName()), zap.String("capability", hello.GetCapability()), zap.Error(err))
		return err
	}
	return nil
}

// newConn is the connection of the program that said hello, whose pool
// is called pool: attempts go to it on out; ctx ends with its stream.
func (s *ExternalServer) newConn(ctx context.Context, hello *robonetv1.WorkerHello, pool string, out *sender[*robonetv1.ServeResponse]) *extConn {
	c := &extConn{
		name:     hello.GetName(),
		out:      out,
		calls:    map[string]*extCall{},
		answered: newRecent(maxAnsweredKept),
		ctx:      ctx,
		logs:     s.logs,
		drops:    &s.droppedLines,
		log:      s.log.With(zap.String("program", hello.GetName()), zap.String("capability", hello.GetCapability())),
		clock:    s.clock,
		floor:    s.floor,
	}
	c.misbehave = func(m wag.Misbehaviour) {
		s.misbehaved[m].Add(1)
		s.host.Misbehaved(hello.GetCapability(), pool, m)
	}
	return c
}

// addPool adds the program's pool to the node's worker host, its actions
// handled by c: the WorkerWelcome to answer, and the pool's removal, which
// first ends c (cancel) so that its handlers return at once.
func (s *ExternalServer) addPool(c *extConn, hello *robonetv1.WorkerHello, pool string, cancel context.CancelCauseFunc) (*robonetv1.ServeResponse, func(), error) {
	reg := wag.NewEmptyRegistry()
	for _, a := range hello.GetActions() {
		if err := reg.Register(a, c.handle); err != nil {
			return nil, nil, status.Error(codes.InvalidArgument, err.Error())
		}
	}
	remove, err := s.host.AddPool(hello.GetCapability(), pool, int(hello.GetSlots()), reg)
	if err != nil {
		switch {
		case errors.Is(err, wag.ErrNotRunning):
			return nil, nil, status.Error(codes.Unavailable, err.Error())
		case errors.Is(err, wag.ErrPoolExists):
			return nil, nil, status.Error(codes.AlreadyExists, err.Error()+": give each program connected to this node its own name")
		}
		return nil, nil, status.Error(codes.InvalidArgument, err.Error())
	}
	undo := func() {
		// Cancelled first, the pool's handlers return at once: removing
		// the pool waits for nothing slow.
		cancel(errors.New("stream ended"))
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer rcancel()
		if err := remove(rctx); err != nil {
			c.log.Warn("removing the pool", zap.Error(err))
		}
	}
	return &robonetv1.ServeResponse{Msg: &robonetv1.ServeResponse_Welcome{Welcome: &robonetv1.WorkerWelcome{
		Node: s.node, HeartbeatIntervalNs: int64(s.interval),
	}}}, undo, nil
}

// converse takes the program's messages (recv) until its stream ends, ctx
// ends (the node is stopping), or the program says nothing for missed
// intervals: it has hung, and its stream is ended so that what it runs
// fails over.
func (s *ExternalServer) converse(ctx context.Context, recv func() (*robonetv1.ServeRequest, error), c *extConn) error {
	in := newCtxRecv(ctx, recv)
	silence := time.Duration(s.missed) * s.interval
	timer := time.NewTimer(silence)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx) // the node is stopping
		case <-timer.C:
			c.log.Warn("external worker went silent: ending its session", zap.Duration("silence", silence))
			return status.Errorf(codes.DeadlineExceeded, "no WorkerBeat for %v (%d heartbeat intervals of %v): send one every interval, even when idle", silence, s.missed, s.interval)
		case m := <-in.ch:
			if errors.Is(m.err, io.EOF) {
				c.log.Info("external worker said goodbye")
				return nil
			}
			if m.err != nil {
				c.log.Info("external worker disconnected", zap.Error(m.err))
				return m.err
			}
			timer.Reset(silence)
			if err := c.take(m.v); err != nil {
				return err
			}
		}
	}
}

// take takes one message of the program's after its hello.
func (c *extConn) take(req *robonetv1.ServeRequest) error {
	switch m := req.GetMsg().(type) {
	case *robonetv1.ServeRequest_Beat:
		c.beat(m.Beat)
	case *robonetv1.ServeRequest_Done:
		c.done(m.Done)
	case *robonetv1.ServeRequest_Log:
		if err := c.lines(m.Log); err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
	default:
		return status.Error(codes.InvalidArgument, "after WorkerHello a program sends WorkerBeat, WorkerLog and WorkerDone only")
	}
	return nil
}

func validateHello(h *robonetv1.WorkerHello) error {
	var errs []error
	if n := h.GetName(); len(n) == 0 || len(n) > maxWorkerName || !workerNameRE.MatchString(n) {
		errs = append(errs, fmt.Errorf("name %s: use 1..%d letters, digits, '.', '_' or '-'", value.QuoteClipped(n, maxWorkerName), maxWorkerName))
	}
	if h.GetCapability() == "" {
		errs = append(errs, errors.New("capability is empty: name the capability served, e.g. ai.inference"))
	}
	if n := len(h.GetActions()); n == 0 || n > MaxExternalActions {
		errs = append(errs, fmt.Errorf("actions: %d given, name 1..%d", n, MaxExternalActions))
	}
	for _, a := range h.GetActions() {
		if len(a) > maxActionName {
			errs = append(errs, fmt.Errorf("action %s is longer than %d bytes", value.QuoteClipped(a, 32), maxActionName))
		}
	}
	if s := h.GetSlots(); s < 1 || s > MaxExternalSlots {
		errs = append(errs, fmt.Errorf("slots %d must be 1..%d", s, MaxExternalSlots))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid WorkerHello: %w", err)
	}
	return nil
}

// extConn is one program's stream: the attempts sent to it, by id.
type extConn struct {
	name string
	out  *sender[*robonetv1.ServeResponse]
	ctx  context.Context // done when the stream ends
	log  *zap.Logger
	// logs keeps attempts' lines (nil: none); drops counts those dropped.
	logs  *tasklog.Store
	drops *atomic.Uint64
	clock clock.Clock
	floor time.Duration // ExternalOptions.MinRuntime
	// misbehave counts what the program did wrong and tells its Waggler.
	misbehave func(wag.Misbehaviour)

	mu    sync.Mutex
	next  uint64
	calls map[string]*extCall
	// answered are the latest attempts the program answered: another
	// answer to one of them is misbehaviour. (An answer to an attempt
	// the node withdrew — cancelled, timed out — is not: it crossed the
	// cancel.)
	answered *recent
}

// maxAnsweredKept bounds the answered attempts a connection remembers.
const maxAnsweredKept = 1024

type extCall struct {
	call *wag.Call
	done chan *robonetv1.WorkerDone // buffered 1
	log  *attemptLog                // nil: its lines are dropped
	sent time.Time                  // when the node sent it
}

// handle is the handler of every action the program serves: it sends the
// attempt and waits for its WorkerDone, the attempt's cancellation (which
// it passes on), or the end of the stream.
func (c *extConn) handle(ctx context.Context, call *wag.Call) (any, error) {
	input, err := value.Encode(call.Input)
	if err != nil {
		return nil, fmt.Errorf("encoding the input for %s: %w", c.name, err)
	}
	slot := int32(call.Slot)
	ec := &extCall{call: call, done: make(chan *robonetv1.WorkerDone, 1), log: openAttemptLog(c.logs, call), sent: c.clock.Now()}
	c.mu.Lock()
	c.next++
	id := strconv.FormatUint(c.next, 10)
	c.calls[id] = ec
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.calls, id)
		c.mu.Unlock()
		// Lines that arrive from now on are dropped.
		if err := ec.log.close(); err != nil {
			call.Logger().Warn("the attempt's log is incomplete", zap.Error(err))
		}
	}()
	run := &robonetv1.WorkerRun{
		Slot: slot, AttemptId: id, Action: call.Action, InputJson: input,
		IdempotencyKey: call.IdempotencyKey(), Workflow: call.Workflow, Task: call.Task,
		Index: call.Index, Attempt: call.Key.Attempt, TimeoutNs: int64(call.Timeout),
	}
	if err := c.out.push(&robonetv1.ServeResponse{Msg: &robonetv1.ServeResponse_Run{Run: run}}); err != nil {
		return nil, fmt.Errorf("worker program %s is gone: %w", c.name, err)
	}
	select {
	case d := <-ec.done:
		return c.result(call, d)
	case <-ctx.Done():
		_ = c.out.push(&robonetv1.ServeResponse{Msg: &robonetv1.ServeResponse_Cancel{Cancel: &robonetv1.WorkerCancel{Slot: slot, AttemptId: id}}})
		return nil, context.Cause(ctx)
	case <-c.ctx.Done():
		// The stream ended. A result that came before its end stands
		// (select picks among ready cases at random: a program that
		// sends its result and disconnects must not lose it).
		select {
		case d := <-ec.done:
			return c.result(call, d)
		default:
		}
		// The program is gone. Its pool is being removed, which cancels
		// ctx: the attempt then reports nothing and the Waggler fails it
		// over as the same attempt, instead of it failing here.
		<-ctx.Done()
		return nil, fmt.Errorf("worker program %s disconnected while running the attempt: %w", c.name, context.Cause(ctx))
	}
}

// result turns a program's WorkerDone into the attempt's output or error.
func (c *extConn) result(call *wag.Call, d *robonetv1.WorkerDone) (any, error) {
	if !d.GetOk() {
		msg := d.GetError()
		if msg == "" {
			msg = "failed (the program gave no error message)"
		}
		return nil, errors.New(value.Clip(msg, maxDoneError))
	}
	if len(d.GetOutputJson()) > call.MaxOutputBytes {
		return nil, fmt.Errorf("output is %d bytes of JSON, more than %d (the node's output-bytes limit): return a reference (a path or URL) to large data instead", len(d.GetOutputJson()), call.MaxOutputBytes)
	}
	if len(d.GetOutputJson()) == 0 {
		return nil, nil
	}
	v, err := value.Decode(d.GetOutputJson())
	if err != nil {
		return nil, fmt.Errorf("output of worker program %s: %w", c.name, err)
	}
	return v, nil
}

// done delivers a result to its waiting handler; one for an attempt that
// is no longer waited for is dropped. An answer to an attempt the program
// was never given, a second answer to one, and an answer sooner than the
// floor are misbehaviour; one to an attempt the node withdrew is not.
func (c *extConn) done(d *robonetv1.WorkerDone) {
	now := c.clock.Now()
	id := d.GetAttemptId()
	c.mu.Lock()
	ec := c.calls[id]
	given := ec != nil || c.given(id)
	again := c.answered.has(id)
	if ec != nil && !again {
		c.answered.add(id) // as it arrives: a second answer before the call ends is one too
	}
	c.mu.Unlock()
	if ec == nil || again {
		if !given || again {
			c.log.Warn("an answer to an attempt the program was never given, or had answered: misbehaviour", zap.String("attempt_id", value.Clip(id, 32)))
			c.misbehave(wag.Unsolicited)
			return
		}
		c.log.Debug("result for an attempt no longer running: ignored", zap.String("attempt_id", value.Clip(id, 32)))
		return
	}
	if took := now.Sub(ec.sent); c.floor > 0 && took < c.floor {
		c.log.Warn("an answer sooner than any real work could: misbehaviour", zap.String("attempt_id", value.Clip(id, 32)),
			zap.Duration("took", took), zap.Duration("floor", c.floor))
		c.misbehave(wag.TooFast)
	}
	select {
	case ec.done <- d:
	default: // a second WorkerDone for the same attempt
		c.log.Warn("a second answer to an attempt: misbehaviour", zap.String("attempt_id", value.Clip(id, 32)))
		c.misbehave(wag.Unsolicited)
	}
}

// given reports whether the node sent the program the attempt called id
// (ids are 1, 2, 3, … on a connection); c.mu held.
func (c *extConn) given(id string) bool {
	n, err := strconv.ParseUint(id, 10, 64)
	return err == nil && n >= 1 && n <= c.next && strconv.FormatUint(n, 10) == id
}

// recent is a bounded set of the latest ids added to it.
type recent struct {
	ids  map[string]bool
	ring []string
	next int
}

func newRecent(n int) *recent { return &recent{ids: make(map[string]bool, n), ring: make([]string, n)} }

func (r *recent) add(id string) {
	if old := r.ring[r.next]; old != "" {
		delete(r.ids, old)
	}
	r.ring[r.next] = id
	r.ids[id] = true
	r.next = (r.next + 1) % len(r.ring)
}

func (r *recent) has(id string) bool { return r.ids[id] }

// lines keeps the lines of a running attempt in its log; those of an
// attempt no longer running (or unknown) are dropped and counted. An
// unknown stream is the program's error.
func (c *extConn) lines(l *robonetv1.WorkerLog) error {
	st, ok := workerLogStream(l.GetStream())
	if !ok {
		return fmt.Errorf("WorkerLog stream %s: a line goes to \"stdout\" or \"stderr\"", value.QuoteClipped(l.GetStream(), 32))
	}
	if len(l.GetLines()) == 0 {
		return nil
	}
	c.mu.Lock()
	ec := c.calls[l.GetAttemptId()]
	c.mu.Unlock()
	if ec == nil || !ec.log.write(st, l.GetLines()) {
		c.drops.Add(uint64(len(l.GetLines())))
		c.log.Debug("log lines for an attempt not running (or without a log): dropped",
			zap.String("attempt_id", value.Clip(l.GetAttemptId(), 32)), zap.Int("lines", len(l.GetLines())))
	}
	return nil
}

// beat passes the progress of running attempts to their heartbeats.
func (c *extConn) beat(b *robonetv1.WorkerBeat) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range b.GetRunning() {
		if ec := c.calls[p.GetAttemptId()]; ec != nil {
			ec.call.Progress(wag.Progress{StepsDone: p.GetStepsDone(), StepsTotal: p.GetStepsTotal(), Message: value.Clip(p.GetMessage(), maxProgressMessage)})
		}
	}
}
