package remote

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/clock"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/sentinel"
	"github.com/robonet/robonet/wag"
)

// Server is the WagService of a node: the far end of a leader's Lead
// session with this node's Waggler host, and of the Work streams of the
// pools that work for this node's Wagglers.
type Server struct {
	robonetv1.UnimplementedWagServiceServer
	host *wag.WagglerHost
	log  *zap.Logger
	opts ServerOptions

	mu      sync.Mutex
	streams map[string]int // open Work streams by the node that holds them
}

// ServerOptions are a Server's checks and hooks.
type ServerOptions struct {
	// Caller, when set, checks who opens each stream.
	Caller CallerCheck
	// OnViolation, when set, is told of a peer whose message broke the
	// limits (limits.go).
	OnViolation ViolationFunc
	// HeartbeatInterval is the mesh's heartbeat interval: a Work stream
	// may send at most maxBeatsPerAttempt heartbeats per attempt in one.
	// Zero: wag.DefaultHeartbeatInterval.
	HeartbeatInterval time.Duration
	// Trust, when set, stamps what the host sends its leader and verifies
	// the stamps of what pools send.
	Trust Trust
	// Evidence, when set, is what this node's Wagglers and streams saw
	// other nodes do: a leader's session takes it to the leader.
	Evidence Evidence
	// MaxMessageBytes is the largest message this node takes and sends
	// (its gRPC limit), told to every peer; 0: not said (see fit.go).
	MaxMessageBytes int
}

// Evidence is the observations a node keeps for its leader.
type Evidence interface {
	// Ready is signalled when observations wait.
	Ready() <-chan struct{}
	// Drain takes what waits (at most MaxBatchItems).
	Drain() []sentinel.Observation
}

// evidenceEvery is how often a leader's session sends what its host
// observed, at most.
const evidenceEvery = 250 * time.Millisecond

// CallerCheck verifies that the node calling is the one a stream says it
// is — a leader (which must be a server) or a worker node — and returns
// the status error that refuses the stream otherwise.
type CallerCheck func(ctx context.Context, claimed string, server bool) error

// NewServer serves host.
func NewServer(host *wag.WagglerHost, log *zap.Logger, opts ServerOptions) *Server {
	if log == nil {
		log = zap.NewNop()
	}
	if opts.Caller == nil {
		opts.Caller = func(context.Context, string, bool) error { return nil }
	}
	if opts.HeartbeatInterval <= 0 {
		opts.HeartbeatInterval = wag.DefaultHeartbeatInterval
	}
	return &Server{host: host, log: log.Named("wagrpc"), opts: opts, streams: map[string]int{}}
}

// violated ends a stream of peer for err (a violation), telling
// OnViolation.
func (s *Server) violated(peer string, err error) error {
	s.log.Warn("a peer sent what no honest node sends: its stream is closed", zap.String("peer", peer), zap.Error(err))
	s.opts.OnViolation.report(peer, err)
	return err
}

// Lead runs one leader's session: the first message opens it with the
// leader's term; requests are answered in order; the host's results,
// progress and starts stream back until the session ends.
func (s *Server) Lead(stream robonetv1.WagService_LeadServer) error {
	in := newCtxRecv(stream.Context(), stream.Recv)
	first, err := in.Recv()
	if err != nil {
		return err
	}
	open := first.GetOpen()
	if open == nil {
		return status.Error(codes.InvalidArgument, "a Lead stream starts with LeadOpen")
	}
	if err := checkLeadRequest(first); err != nil {
		return s.violated(open.GetLeader(), err)
	}
	if err := s.opts.Caller(stream.Context(), open.GetLeader(), true); err != nil {
		return err
	}
	out := newSender(stamped(s.opts.Trust, stream.Send, setLeadStamp), s.log.With(zap.String("stream", "Lead from "+open.GetLeader())))
	defer out.close()
	up := leadUplink{out: out, log: s.log, leader: open.GetLeader(), limit: limit(s.opts.MaxMessageBytes, open.GetMaxMessageBytes())}
	owner, err := ownerFromProto(open)
	if err != nil {
		return s.violated(open.GetLeader(), err)
	}
	sess, err := s.host.OpenOwner(owner, up)
	if err != nil {
		if errors.Is(err, port.ErrStaleTerm) {
			return status.Error(codes.FailedPrecondition, err.Error())
		}
		return status.Error(codes.Unavailable, err.Error())
	}
	defer sess.Close()
	if err := out.push(&robonetv1.LeadResponse{Msg: &robonetv1.LeadResponse_Ready{Ready: &robonetv1.LeadReady{MaxMessageBytes: said(s.opts.MaxMessageBytes)}}}); err != nil {
		return err
	}
	s.log.Debug("owner session opened", zap.String("owner", open.GetLeader()), zap.Uint64("term", open.GetTerm()),
		zap.Bool("leader", !owner.Follower), zap.Int("partitions", len(owner.Partitions)))
	if s.opts.Evidence != nil && !owner.Follower { // the Sentinel is the leader's
		ctx, cancel := context.WithCancel(stream.Context())
		var wg sync.WaitGroup
		wg.Go(func() { s.sendEvidence(ctx, out) })
		defer wg.Wait()
		defer cancel()
	}
	for {
		req, err := in.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := checkLeadRequest(req); err != nil {
			return s.violated(open.GetLeader(), err)
		}
		var answer *robonetv1.LeadAnswer
		switch m := req.GetMsg().(type) {
		case *robonetv1.LeadRequest_Roles:
			answer = &robonetv1.LeadAnswer{Id: m.Roles.GetId(), Error: errToProto(sess.SetRoles(m.Roles.GetRoles(), m.Roles.GetQuarantined()))}
		case *robonetv1.LeadRequest_Dispatch:
			answer = s.dispatch(sess, m.Dispatch)
		case *robonetv1.LeadRequest_Cancel:
			keys := make([]port.AttemptKey, 0, len(m.Cancel.GetKeys()))
			for _, k := range m.Cancel.GetKeys() {
				if key, err := keyFromProto(k); err == nil {
					keys = append(keys, key)
				}
			}
			answer = &robonetv1.LeadAnswer{Id: m.Cancel.GetId(), Error: errToProto(sess.Cancel(keys))}
		case *robonetv1.LeadRequest_Ack:
			sess.Ack(m.Ack.GetSeq())
			continue
		default:
			return status.Error(codes.InvalidArgument, "unexpected message on a Lead stream")
		}
		if err := out.push(&robonetv1.LeadResponse{Msg: &robonetv1.LeadResponse_Answer{Answer: answer}}); err != nil {
			return err
		}
	}
}

// sendEvidence sends the leader what this node observed, batched, until
// ctx ends.
func (s *Server) sendEvidence(ctx context.Context, out *sender[*robonetv1.LeadResponse]) {
	t := time.NewTicker(evidenceEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.opts.Evidence.Ready():
		}
		if obs := s.opts.Evidence.Drain(); len(obs) > 0 {
			m := &robonetv1.LeadObservations{Items: make([]*robonetv1.Observation, len(obs))}
			for i, o := range obs {
				m.Items[i] = observationToProto(o)
			}
			if out.push(&robonetv1.LeadResponse{Msg: &robonetv1.LeadResponse_Observations{Observations: m}}) != nil {
				return
			}
		}
		select { // at most one batch per evidenceEvery
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *Server) dispatch(sess *wag.Session, m *robonetv1.LeadDispatch) *robonetv1.LeadAnswer {
	answer := &robonetv1.LeadAnswer{Id: m.GetId()}
	hs := make([]wag.Handoff, 0, len(m.GetHandoffs()))
	idx := make([]int32, 0, len(m.GetHandoffs())) // position of hs[i] in the request
	for i, h := range m.GetHandoffs() {
		d, err := dispatchFromProto(h.GetDispatch())
		if err != nil {
			if answer.AttemptErrors == nil {
				answer.AttemptErrors = map[int32]*robonetv1.WagError{}
			}
			answer.AttemptErrors[int32(i)] = errToProto(err)
			continue
		}
		hs = append(hs, wag.Handoff{TaskDispatch: d, Epoch: h.GetEpoch(), WorkerID: h.GetWorkerId(), Generation: h.GetGeneration(), MayRun: h.GetMayRun()})
		idx = append(idx, int32(i))
	}
	for i, err := range sess.Dispatch(hs) {
		if err != nil {
			if answer.AttemptErrors == nil {
				answer.AttemptErrors = map[int32]*robonetv1.WagError{}
			}
			answer.AttemptErrors[idx[i]] = errToProto(err)
		}
	}
	return answer
}

// leadUplink streams what the host reports to the leader.
type leadUplink struct {
	out    *sender[*robonetv1.LeadResponse]
	log    *zap.Logger
	leader string
	limit  int // the largest message to the leader (fit.go); 0: none known
}

// Results sends rs in as many messages as runs (fit.go) makes of them;
// a result too large for the leader goes as a failure.
func (u leadUplink) Results(rs []wag.SeqResult) error {
	ps, sizes := outcomesWithin(rs, u.limit, "the leader "+u.leader, u.log, resultToProto, resultBound, func(r wag.SeqResult, err error) *robonetv1.WagResult {
		r.OK, r.Output, r.OutputJSON, r.Error = false, nil, nil, err.Error()
		p, _ := resultToProto(r)
		return p
	})
	for start, end := range runs(sizes) {
		m := &robonetv1.LeadResults{Results: ps[start:end]}
		if err := u.out.push(&robonetv1.LeadResponse{Msg: &robonetv1.LeadResponse_Results{Results: m}}); err != nil {
			return err
		}
	}
	return nil
}

func (u leadUplink) Progress(ps []port.TaskProgress) {
	m := &robonetv1.LeadProgress{Items: make([]*robonetv1.WagProgress, len(ps))}
	for i, p := range ps {
		m.Items[i] = progressToProto(p)
	}
	_ = u.out.push(&robonetv1.LeadResponse{Msg: &robonetv1.LeadResponse_Progress{Progress: m}})
}

func (u leadUplink) Started(ss []wag.Started) {
	m := &robonetv1.LeadStarted{Items: make([]*robonetv1.AttemptStarted, len(ss))}
	for i, s := range ss {
		m.Items[i] = startedToProto(s)
	}
	_ = u.out.push(&robonetv1.LeadResponse{Msg: &robonetv1.LeadResponse_Started{Started: m}})
}

// Work runs one pool's stream with the Waggler of its capability here: the
// pool registers its slots and what they run (adopted, not run again),
// then sends heartbeats and reports; assignments and cancels go back to
// the slots. When the stream ends the slots get no new work until they
// register again; what they run stays theirs, watched by the ladder.
func (s *Server) Work(stream robonetv1.WagService_WorkServer) error {
	in := newCtxRecv(stream.Context(), stream.Recv)
	first, err := in.Recv()
	if err != nil {
		return err
	}
	reg := first.GetRegister()
	if reg == nil {
		return status.Error(codes.InvalidArgument, "a Work stream starts with WorkRegister")
	}
	if err := checkWorkRequest(first); err != nil {
		return s.violated(reg.GetNode(), err)
	}
	if err := s.opts.Caller(stream.Context(), reg.GetNode(), false); err != nil {
		return err
	}
	// Worker ids name their node and capability (node/capability/slot):
	// trust is kept by them (wag.WorkerSubject), so a pool names its own
	// node's workers only.
	prefix := reg.GetNode() + "/" + reg.GetCapability() + "/"
	if err := ownWorkers(prefix, reg.GetWorkers()); err != nil {
		return s.violated(reg.GetNode(), err)
	}
	for _, r := range reg.GetRunning() {
		if err := ownWorkers(prefix, []string{r.GetWorkerId()}); err != nil {
			return s.violated(reg.GetNode(), err)
		}
	}
	release, err := s.admit(reg.GetNode())
	if err != nil {
		return s.violated(reg.GetNode(), err)
	}
	defer release()
	chk, err := newStreamCheck(s.opts.Trust, reg.GetNode(), "Work stream of "+reg.GetNode())
	if err != nil {
		return err
	}
	if keep, err := chk.check(first.GetStamp(), false); err != nil || !keep {
		if err == nil {
			err = status.Error(codes.Unavailable, "the stamp of WorkRegister could not be verified: open the stream again")
		}
		return err
	}
	w := s.host.Waggler(reg.GetCapability())
	if w == nil || w.Epoch() != reg.GetEpoch() {
		return status.Errorf(codes.FailedPrecondition, "%s: this node is not the waggler of %s at epoch %d",
			wag.ErrNotWaggler, reg.GetCapability(), reg.GetEpoch())
	}
	out := newSender(stream.Send, s.log.With(zap.String("stream", "Work from "+reg.GetNode())))
	defer out.close()
	workers := make([]wag.Worker, len(reg.GetWorkers()))
	lim := limit(s.opts.MaxMessageBytes, reg.GetMaxMessageBytes())
	for i, id := range reg.GetWorkers() {
		workers[i] = &remoteWorker{id: id, node: reg.GetNode(), out: out, log: s.log, limit: lim, waggler: w}
	}
	var running []wag.Running
	for _, r := range reg.GetRunning() {
		a, err := assignmentFromProto(r.GetAssignment())
		if err != nil {
			s.log.Warn("a running attempt cannot be adopted", zap.Error(err))
			continue
		}
		running = append(running, wag.Running{Assignment: a, WorkerID: r.GetWorkerId(), StartedAt: clock.FromUnixNanos(r.GetStartedUnixNs())})
	}
	if err := out.push(&robonetv1.WorkResponse{Msg: &robonetv1.WorkResponse_Ready{Ready: &robonetv1.WorkReady{MaxMessageBytes: said(s.opts.MaxMessageBytes)}}}); err != nil {
		return err
	}
	w.Register(workers, running)
	defer w.Detach(reg.GetWorkers())
	s.log.Debug("pool registered", zap.String("worker_node", reg.GetNode()), zap.String("capability", reg.GetCapability()),
		zap.Int("workers", len(workers)), zap.Int("running", len(running)))
	beats := newBeatWindow(s.opts.HeartbeatInterval)
	for {
		req, err := in.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := checkWorkRequest(req); err != nil {
			return s.violated(reg.GetNode(), err)
		}
		_, beat := req.GetMsg().(*robonetv1.WorkRequest_Heartbeats)
		if keep, err := chk.check(req.GetStamp(), beat); err != nil {
			return err
		} else if !keep {
			if _, reports := req.GetMsg().(*robonetv1.WorkRequest_Reports); reports {
				// Reports are acknowledged cumulatively: passing over one
				// message would acknowledge it with the next. The stream
				// ends instead, and the pool sends every report not
				// acknowledged again on its next one.
				s.log.Warn("reports whose stamp could not be verified: the Work stream is closed for the pool to send them again", zap.String("worker_node", reg.GetNode()))
				return status.Error(codes.Unavailable, "a Reports message whose hash-chain stamp could not be verified was not taken: open the stream again")
			}
			continue
		}
		if err := ownWorkersOf(prefix, req); err != nil {
			return s.violated(reg.GetNode(), err)
		}
		switch m := req.GetMsg().(type) {
		case *robonetv1.WorkRequest_Heartbeats:
			if err := beats.add(m.Heartbeats.GetItems(), time.Now()); err != nil {
				return s.violated(reg.GetNode(), err)
			}
			hbs := make([]wag.Heartbeat, 0, len(m.Heartbeats.GetItems()))
			for _, p := range m.Heartbeats.GetItems() {
				if hb, err := heartbeatFromProto(p); err == nil {
					hbs = append(hbs, hb)
				}
			}
			w.Heartbeats(hbs)
		case *robonetv1.WorkRequest_Reports:
			var acked uint64
			for _, p := range m.Reports.GetItems() {
				r, err := reportFromProto(p)
				if err != nil {
					s.log.Warn("a report cannot be read; dropped", zap.Error(err))
					acked = p.GetSeq()
					continue
				}
				if !w.Report(r) {
					// This Waggler closed: the pool keeps the rest for the
					// next one.
					return status.Error(codes.Unavailable, "the waggler closed")
				}
				acked = p.GetSeq()
			}
			if acked > 0 {
				if err := out.push(&robonetv1.WorkResponse{Msg: &robonetv1.WorkResponse_Ack{Ack: &robonetv1.WorkAck{Seq: acked}}}); err != nil {
					return err
				}
			}
		case *robonetv1.WorkRequest_Leave:
			for _, id := range m.Leave.GetWorkers() {
				if slices.Contains(reg.GetWorkers(), id) { // only this stream's own
					w.WorkerDead(id)
				}
			}
		case *robonetv1.WorkRequest_Misbehaved:
			for _, it := range m.Misbehaved.GetItems() {
				// Only this stream's own workers: a node speaks for the
				// programs it connects, never about another node's.
				if mb, ok := misbehaviourFromProto(it.GetKind()); ok && slices.Contains(reg.GetWorkers(), it.GetWorkerId()) {
					w.Misbehaved(it.GetWorkerId(), mb)
				}
			}
		default:
			return status.Error(codes.InvalidArgument, "unexpected message on a Work stream")
		}
	}
}

// ownWorkers checks that every id names a worker of the stream's node and
// capability (prefix "node/capability/").
func ownWorkers(prefix string, ids []string) error {
	for _, id := range ids {
		if !strings.HasPrefix(id, prefix) || len(id) == len(prefix) {
			return invalid("worker id %s: a pool's workers are named %sSLOT", value.QuoteClipped(id, 64), prefix)
		}
	}
	return nil
}

// ownWorkersOf checks the worker ids of a heartbeat batch or reports.
func ownWorkersOf(prefix string, req *robonetv1.WorkRequest) error {
	switch m := req.GetMsg().(type) {
	case *robonetv1.WorkRequest_Heartbeats:
		for _, hb := range m.Heartbeats.GetItems() {
			if err := ownWorkers(prefix, []string{hb.GetWorkerId()}); err != nil {
				return err
			}
		}
	case *robonetv1.WorkRequest_Reports:
		for _, r := range m.Reports.GetItems() {
			if err := ownWorkers(prefix, []string{r.GetWorkerId()}); err != nil {
				return err
			}
		}
	}
	return nil
}

// admit counts a Work stream of node against MaxWorkStreamsPerNode;
// release uncounts it.
func (s *Server) admit(node string) (release func(), err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.streams[node] >= MaxWorkStreamsPerNode {
		return nil, exhausted("%d Work streams open from this node, the limit is %d (one per pool)", s.streams[node], MaxWorkStreamsPerNode)
	}
	s.streams[node]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.streams[node]--; s.streams[node] == 0 {
			delete(s.streams, node)
		}
	}, nil
}

// beatWindow counts a stream's heartbeats per attempt over one heartbeat
// interval.
type beatWindow struct {
	interval time.Duration
	start    time.Time
	counts   map[string]int
}

func newBeatWindow(interval time.Duration) *beatWindow {
	return &beatWindow{interval: interval, counts: map[string]int{}}
}

// add counts hbs received at now; more than maxBeatsPerAttempt for one
// attempt in the window is a flood.
func (w *beatWindow) add(hbs []*robonetv1.Heartbeat, now time.Time) error {
	if now.Sub(w.start) >= w.interval {
		w.start = now
		clear(w.counts)
	}
	for _, hb := range hbs {
		k := hb.GetKey().GetInstanceId() + "/" + hb.GetKey().GetExecutionId()
		if w.counts[k]++; w.counts[k] > maxBeatsPerAttempt {
			return exhausted("WorkHeartbeats: more than %d heartbeats of one attempt within a heartbeat interval of %v (an honest worker sends one)",
				maxBeatsPerAttempt, w.interval)
		}
	}
	return nil
}

// remoteWorker is a Waggler's handle on a slot of a pool on another node.
type remoteWorker struct {
	id      string
	node    string // the pool's
	out     *sender[*robonetv1.WorkResponse]
	log     *zap.Logger
	limit   int // the largest message to the pool (fit.go); 0: none known
	waggler *wag.Waggler
}

func (w *remoteWorker) ID() string { return w.id }

func (w *remoteWorker) Run(a wag.Assignment) {
	p, err := assignmentToProto(a)
	if err != nil {
		w.log.Error("an assignment cannot be sent", zap.Error(err))
		return // the ladder fails it over
	}
	sa := &robonetv1.SlotAssignment{WorkerId: w.id, Assignment: p}
	if size, ok := fits(slotAssignmentBound(sa), w.limit); !ok {
		// Sent, it would end the stream, and be sent again on the next:
		// the slot reports the attempt failed instead (after this call,
		// which the Waggler makes outside its lock).
		err := tooLarge("input", size, w.limit, "node "+w.node)
		w.log.Warn("an assignment is too large for the pool's node; it fails", zap.String("worker", w.id), zap.Error(err))
		now := time.Now()
		go w.waggler.Report(wag.Report{Key: a.AttemptKey, Generation: a.Generation, WorkerID: w.id, Error: err.Error(), StartedAt: now, FinishedAt: now})
		return
	}
	_ = w.out.push(&robonetv1.WorkResponse{Msg: &robonetv1.WorkResponse_Assign{Assign: &robonetv1.WorkAssign{Items: []*robonetv1.SlotAssignment{sa}}}})
}

func (w *remoteWorker) Cancel(key port.AttemptKey, gen uint64) {
	_ = w.out.push(&robonetv1.WorkResponse{Msg: &robonetv1.WorkResponse_Cancel{Cancel: &robonetv1.WorkCancel{
		Items: []*robonetv1.SlotCancel{{WorkerId: w.id, Key: keyToProto(key), Generation: gen}}}}})
}
