package remote

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/protobuf/proto"

	"github.com/robonet/robonet/internal/clock"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag"
)

// Backoff between attempts to (re)connect a Work stream.
const (
	workBackoffMin = 20 * time.Millisecond
	workBackoffMax = 2 * time.Second
	// leaveTimeout bounds the wait for a WorkLeave to be sent.
	leaveTimeout = time.Second
)

// WorkTarget is a pool's Waggler on another node, behind a Work stream:
// the wag.Target of a pool whose capability's Waggler runs elsewhere. It
// keeps the stream up (connecting again with backoff), registers the
// pool's slots with what they run each time, numbers the pool's reports
// and keeps each until the Waggler acknowledges it, sending the rest
// again on every new stream — or handing them back (Release) when the
// pool moves to another Waggler.
type WorkTarget struct {
	client     robonetv1.WagServiceClient
	node       string
	capability string
	epoch      uint64
	running    func() []wag.Running
	log        *zap.Logger
	peer       string // the Waggler's node
	opts       WorkOptions

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	workers map[string]wag.Worker
	out     *sender[*robonetv1.WorkRequest] // of the current stream; nil while none
	limit   int                             // the largest message on it (fit.go)
	// leftOut are the slots this stream's registration left out, still
	// running what kept them out; when the last of them reports, the
	// stream ends (endStream) so that the next registers every slot.
	leftOut   map[string]bool
	endStream context.CancelFunc
	seq       uint64
	unacked   []seqReport
	started   bool
}

type seqReport struct {
	seq uint64
	r   wag.Report
}

var _ wag.Target = (*WorkTarget)(nil)

// WorkOptions are a WorkTarget's checks and hooks.
type WorkOptions struct {
	// OnViolation, when set, is told when what the Waggler sends breaks
	// the limits, which ends that stream.
	OnViolation ViolationFunc
	// Trust, when set, stamps every message the pool sends.
	Trust Trust
	// MaxMessageBytes is the largest message this node takes and sends
	// (its gRPC limit), told to the Waggler; 0: not said (see fit.go).
	MaxMessageBytes int
}

// NewWorkTarget returns the target for the pool of capability on node
// (this node's name, for the Waggler's logs) working for the Waggler at
// epoch behind client, on node peer. running lists what the pool's slots
// run, for the registration of every new stream. Nothing connects until
// Register.
func NewWorkTarget(client robonetv1.WagServiceClient, node, capability string, epoch uint64, running func() []wag.Running, log *zap.Logger,
	peer string, opts WorkOptions) *WorkTarget {
	if log == nil {
		log = zap.NewNop()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &WorkTarget{client: client, node: node, capability: capability, epoch: epoch, running: running, peer: peer, opts: opts,
		log: log.With(zap.String("capability", capability), zap.Uint64("epoch", epoch)), ctx: ctx, cancel: cancel,
		workers: map[string]wag.Worker{}}
}

// Register implements wag.Target: it keeps the pool's slots (assignments
// for them arrive on the stream) and starts the stream.
func (t *WorkTarget) Register(workers []wag.Worker, _ []wag.Running) {
	t.mu.Lock()
	for _, w := range workers {
		t.workers[w.ID()] = w
	}
	start := !t.started
	t.started = true
	t.mu.Unlock()
	if start {
		t.wg.Go(t.run)
	}
}

// Heartbeats implements wag.Target: the batch goes out on the stream, if
// there is one (a later batch supersedes a lost one).
func (t *WorkTarget) Heartbeats(hbs []wag.Heartbeat) {
	t.mu.Lock()
	out := t.out
	t.mu.Unlock()
	if out == nil {
		return
	}
	m := &robonetv1.WorkHeartbeats{Items: make([]*robonetv1.Heartbeat, len(hbs))}
	for i, hb := range hbs {
		m.Items[i] = heartbeatToProto(hb)
	}
	_ = out.push(&robonetv1.WorkRequest{Msg: &robonetv1.WorkRequest_Heartbeats{Heartbeats: m}})
}

// Report implements wag.Target: the report is kept until acknowledged.
func (t *WorkTarget) Report(r wag.Report) bool {
	t.mu.Lock()
	t.seq++
	sr := seqReport{seq: t.seq, r: r}
	t.unacked = append(t.unacked, sr)
	out, lim := t.out, t.limit
	var end context.CancelFunc
	if t.leftOut[r.WorkerID] {
		delete(t.leftOut, r.WorkerID)
		if len(t.leftOut) == 0 {
			end = t.endStream
		}
	}
	t.mu.Unlock()
	if out != nil {
		t.sendReports(out, lim, []seqReport{sr})
	}
	if end != nil {
		t.log.Info(msgReregister)
		end()
	}
	return true
}

// Leave implements wag.Target: the Waggler is told on the stream, if there
// is one (without one, its heartbeat ladder finds the workers gone).
func (t *WorkTarget) Leave(workerIDs []string) {
	t.mu.Lock()
	out := t.out
	t.mu.Unlock()
	if out == nil {
		return
	}
	ctx, cancel := context.WithTimeout(t.ctx, leaveTimeout)
	defer cancel()
	err := out.pushAndWait(ctx, &robonetv1.WorkRequest{Msg: &robonetv1.WorkRequest_Leave{Leave: &robonetv1.WorkLeave{Workers: workerIDs}}})
	if err != nil {
		t.log.Debug("telling the waggler the workers left failed; its ladder will find out", zap.Error(err))
	}
}

// Misbehaved implements wag.Target: the Waggler is told on the stream, if
// there is one (without one, it is not counted: the pool runs nothing).
func (t *WorkTarget) Misbehaved(workerID string, m wag.Misbehaviour) {
	t.mu.Lock()
	out := t.out
	t.mu.Unlock()
	if out == nil {
		return
	}
	_ = out.push(&robonetv1.WorkRequest{Msg: &robonetv1.WorkRequest_Misbehaved{Misbehaved: &robonetv1.WorkMisbehaved{
		Items: []*robonetv1.Misbehaviour{{WorkerId: workerID, Kind: misbehaviourKinds[m]}}}}})
}

// Release implements wag.Target: the stream ends and the reports not
// acknowledged go back to the pool.
func (t *WorkTarget) Release() []wag.Report {
	t.cancel()
	t.wg.Wait()
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]wag.Report, len(t.unacked))
	for i, sr := range t.unacked {
		out[i] = sr.r
	}
	t.unacked = nil
	return out
}

// sendReports sends rs in as many messages as runs (fit.go) makes of
// them; a report too large for lim goes as a failure.
func (t *WorkTarget) sendReports(out *sender[*robonetv1.WorkRequest], lim int, rs []seqReport) {
	encode := func(sr seqReport) (*robonetv1.Report, error) { return reportToProto(sr.seq, sr.r) }
	ps, sizes := outcomesWithin(rs, lim, "the waggler's node "+t.peer, t.log, encode, reportBound, func(sr seqReport, err error) *robonetv1.Report {
		sr.r.OK, sr.r.Output, sr.r.OutputJSON, sr.r.Error = false, nil, nil, err.Error()
		p, _ := encode(sr)
		return p
	})
	for start, end := range runs(sizes) {
		m := &robonetv1.WorkReports{Items: ps[start:end]}
		if out.push(&robonetv1.WorkRequest{Msg: &robonetv1.WorkRequest_Reports{Reports: m}}) != nil {
			return
		}
	}
}

// run keeps a stream up until Release.
func (t *WorkTarget) run() {
	backoff := workBackoffMin
	for {
		err := t.session()
		if t.ctx.Err() != nil {
			return
		}
		t.log.Debug("work stream ended; connecting again", zap.Duration("backoff", backoff), zap.Error(err))
		timer := time.NewTimer(backoff)
		select {
		case <-t.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		backoff = min(2*backoff, workBackoffMax)
		if err == nil {
			backoff = workBackoffMin
		}
	}
}

// msgReregister is logged when a stream ends so that the next registers
// the slots its registration left out.
const msgReregister = "the slots left out of the registration are free: registering them with a new stream"

// registration is the first message of a stream: the pool's slots and
// what they run, for the Waggler to adopt. It is one message, whatever the
// Waggler's node takes, so what the slots run is listed within
// maxCoalesced: a slot whose attempt is left out (inputs that large are
// rare) is left out too, and the Waggler fails its attempt over to
// another slot (at least once; the engine records one result). left names
// those slots: once they have all reported, the stream ends and the next
// registers them.
func (t *WorkTarget) registration() (reg *robonetv1.WorkRegister, left map[string]bool) {
	reg = &robonetv1.WorkRegister{Node: t.node, Capability: t.capability, Epoch: t.epoch, MaxMessageBytes: said(t.opts.MaxMessageBytes)}
	left = map[string]bool{}
	bytes := 0
	for _, r := range t.running() {
		a, err := assignmentToProto(r.Assignment)
		if err != nil {
			continue
		}
		ra := &robonetv1.RunningAttempt{Assignment: a, WorkerId: r.WorkerID, StartedUnixNs: clock.UnixNanos(r.StartedAt)}
		n := proto.Size(ra)
		if bytes+n > maxCoalesced {
			left[r.WorkerID] = true
			continue
		}
		bytes += n
		reg.Running = append(reg.Running, ra)
	}
	t.mu.Lock()
	for id := range t.workers {
		if !left[id] {
			reg.Workers = append(reg.Workers, id)
		}
	}
	t.mu.Unlock()
	if len(left) > 0 {
		t.log.Warn("some slots run attempts too large to list in one registration: they register once those end, and the attempts run again elsewhere",
			zap.Int("slots_left_out", len(left)), zap.Int("attempts_listed", len(reg.Running)))
	}
	return reg, left
}

// session runs one stream: register, send what is unacknowledged, then
// take assignments, cancels and acknowledgements until it breaks.
func (t *WorkTarget) session() error {
	ctx, cancel := context.WithCancel(t.ctx)
	defer cancel()
	stream, err := t.client.Work(ctx)
	if err != nil {
		return fmt.Errorf("opening a work stream: %w", err)
	}
	out := newSender(stamped(t.opts.Trust, stream.Send, setWorkStamp), t.log.With(zap.String("stream", "Work to the waggler of "+t.capability)))
	defer out.close()
	t.mu.Lock()
	regSeq := t.seq // reports after it were made after the registration's list
	t.mu.Unlock()
	reg, left := t.registration()
	lim, err := t.register(stream, out, reg)
	if err != nil {
		return err
	}
	unacked, freed := t.install(out, lim, left, regSeq, cancel)
	defer t.uninstall(out)
	if freed {
		t.log.Info(msgReregister)
		return nil
	}
	if len(unacked) > 0 {
		t.sendReports(out, lim, unacked)
	}
	return t.serve(stream)
}

// register sends the pool's registration on out and waits for the
// Waggler's WorkReady: it took the registration, and says what its node
// takes (the largest message on the stream, lim), before any report goes
// out.
func (t *WorkTarget) register(stream robonetv1.WagService_WorkClient, out *sender[*robonetv1.WorkRequest], reg *robonetv1.WorkRegister) (lim int, err error) {
	if err := out.push(&robonetv1.WorkRequest{Msg: &robonetv1.WorkRequest_Register{Register: reg}}); err != nil {
		return 0, err
	}
	first, err := stream.Recv()
	if err != nil {
		return 0, err
	}
	ready := first.GetReady()
	if ready == nil {
		err := invalid("a Work stream's first answer is WorkReady")
		t.opts.OnViolation.report(t.peer, err)
		return 0, err
	}
	lim = limit(t.opts.MaxMessageBytes, ready.GetMaxMessageBytes())
	warnIfLimitsDiffer(t.log, t.opts.MaxMessageBytes, ready.GetMaxMessageBytes(), t.peer)
	return lim, nil
}

// install makes out, whose messages are at most lim bytes, the stream the
// pool's messages go on (end ends it), and returns the reports to send on
// it again. left names the slots its registration, made at report
// sequence regSeq, left out: those that finished meanwhile (they reported,
// or run nothing now) are free already and leave it. freed reports that
// some were left out and all are free: the stream is to end at once, for
// the next to register them.
func (t *WorkTarget) install(out *sender[*robonetv1.WorkRequest], lim int, left map[string]bool, regSeq uint64, end context.CancelFunc) (unacked []seqReport, freed bool) {
	hadLeft := len(left) > 0
	running := map[string]bool{}
	for _, r := range t.running() {
		running[r.WorkerID] = true
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, sr := range t.unacked {
		if sr.seq > regSeq {
			delete(left, sr.r.WorkerID)
		}
	}
	for id := range left {
		if !running[id] {
			delete(left, id)
		}
	}
	t.out, t.limit = out, lim
	t.leftOut, t.endStream = left, end
	return append([]seqReport(nil), t.unacked...), hadLeft && len(left) == 0
}

// uninstall undoes install once out's stream has ended, unless a newer
// stream took its place.
func (t *WorkTarget) uninstall(out *sender[*robonetv1.WorkRequest]) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.out == out {
		t.out, t.leftOut, t.endStream = nil, nil, nil
	}
}

// serve takes assignments, cancels and acknowledgements from the Waggler
// until the stream breaks or the Waggler sends what no honest node sends.
func (t *WorkTarget) serve(stream robonetv1.WagService_WorkClient) error {
	for {
		resp, err := stream.Recv()
		if err != nil {
			return err
		}
		if err := checkWorkResponse(resp); err != nil {
			t.log.Warn("a waggler sent what no honest node sends: the stream is closed", zap.String("peer", t.peer), zap.Error(err))
			t.opts.OnViolation.report(t.peer, err)
			return err
		}
		switch m := resp.GetMsg().(type) {
		case *robonetv1.WorkResponse_Assign:
			t.assign(m.Assign)
		case *robonetv1.WorkResponse_Cancel:
			t.cancelAssigned(m.Cancel)
		case *robonetv1.WorkResponse_Ack:
			t.ack(m.Ack.GetSeq())
		}
	}
}

// assign gives the pool's slots their assignments.
func (t *WorkTarget) assign(m *robonetv1.WorkAssign) {
	for _, it := range m.GetItems() {
		a, err := assignmentFromProto(it.GetAssignment())
		if err != nil {
			t.log.Warn("an assignment cannot be read; the waggler's ladder will fail it over", zap.Error(err))
			continue
		}
		if w := t.worker(it.GetWorkerId()); w != nil {
			w.Run(a)
		}
	}
}

// cancelAssigned passes the Waggler's cancels to the pool's slots.
func (t *WorkTarget) cancelAssigned(m *robonetv1.WorkCancel) {
	for _, it := range m.GetItems() {
		k, err := keyFromProto(it.GetKey())
		if err != nil {
			continue
		}
		if w := t.worker(it.GetWorkerId()); w != nil {
			w.Cancel(k, it.GetGeneration())
		}
	}
}

func (t *WorkTarget) worker(id string) wag.Worker {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.workers[id]
}

func (t *WorkTarget) ack(seq uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := 0
	for i < len(t.unacked) && t.unacked[i].seq <= seq {
		i++
	}
	t.unacked = t.unacked[i:]
}
