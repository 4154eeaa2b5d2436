package remote

import (
	"context"
	"errors"
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
	l := &leadStream{s: s, ctx: stream.Context()}
	o, err := handshake[*robonetv1.LeadRequest, *robonetv1.LeadOpen, *robonetv1.LeadResponse]{
		opening: (*robonetv1.LeadRequest).GetOpen,
		missing: "a Lead stream starts with LeadOpen",
		admit:   l.admit,
		send:    stamped(s.opts.Trust, stream.Send, setLeadStamp),
		log:     s.log,
		name:    func(open *robonetv1.LeadOpen) string { return "Lead from " + open.GetLeader() },
		setUp:   l.setUp,
	}.accept(in.Recv)
	if err != nil {
		return err
	}
	defer o.close()
	s.log.Debug("owner session opened", zap.String("owner", l.leader), zap.Uint64("term", o.open.GetTerm()),
		zap.Bool("leader", !l.owner.Follower), zap.Int("partitions", len(l.owner.Partitions)))
	if s.opts.Evidence != nil && !l.owner.Follower { // the Sentinel is the leader's
		ctx, cancel := context.WithCancel(stream.Context())
		var wg sync.WaitGroup
		wg.Go(func() { s.sendEvidence(ctx, o.out) })
		defer wg.Wait()
		defer cancel()
	}
	return serveRequests(in.Recv, checkLeadRequest, l.violated, l.handle)
}

// admitPeer admits the opening of a peer's stream: within the limits
// (limits is the opening's check; an error is a violation), and from the
// node it names (CallerCheck; server: a leader, which must be a server).
func (s *Server) admitPeer(ctx context.Context, peer string, server bool, limits error) error {
	if limits != nil {
		return s.violated(peer, limits)
	}
	return s.opts.Caller(ctx, peer, server)
}

// leadStream is the server side of one leader's Lead stream: the leader's
// session with the host.
type leadStream struct {
	s      *Server
	ctx    context.Context // the stream's
	leader string
	owner  wag.Owner
	sess   *wag.Session
	out    *sender[*robonetv1.LeadResponse]
}

// admit admits a leader's LeadOpen: within the limits, from the leader it
// names.
func (l *leadStream) admit(first *robonetv1.LeadRequest, open *robonetv1.LeadOpen) (undo func(), err error) {
	return nil, l.s.admitPeer(l.ctx, open.GetLeader(), true, checkLeadRequest(first))
}

// setUp opens the leader's session with the host, its reports sent on
// out: the LeadReady to answer, and the session's Close.
func (l *leadStream) setUp(open *robonetv1.LeadOpen, out *sender[*robonetv1.LeadResponse]) (*robonetv1.LeadResponse, func(), error) {
	s := l.s
	l.leader, l.out = open.GetLeader(), out
	up := leadUplink{out: out, log: s.log, leader: open.GetLeader(), limit: limit(s.opts.MaxMessageBytes, open.GetMaxMessageBytes())}
	owner, err := ownerFromProto(open)
	if err != nil {
		return nil, nil, s.violated(open.GetLeader(), err)
	}
	sess, err := s.host.OpenOwner(owner, up)
	if err != nil {
		if errors.Is(err, port.ErrStaleTerm) {
			return nil, nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		return nil, nil, status.Error(codes.Unavailable, err.Error())
	}
	l.owner, l.sess = owner, sess
	return &robonetv1.LeadResponse{Msg: &robonetv1.LeadResponse_Ready{Ready: &robonetv1.LeadReady{MaxMessageBytes: said(s.opts.MaxMessageBytes)}}}, sess.Close, nil
}

// violated ends the stream for err, a violation of the leader's.
func (l *leadStream) violated(err error) error { return l.s.violated(l.leader, err) }

// handle answers one request of the leader's (an Ack needs no answer).
func (l *leadStream) handle(req *robonetv1.LeadRequest) error {
	var answer *robonetv1.LeadAnswer
	switch m := req.GetMsg().(type) {
	case *robonetv1.LeadRequest_Roles:
		answer = &robonetv1.LeadAnswer{Id: m.Roles.GetId(), Error: errToProto(l.sess.SetRoles(m.Roles.GetRoles(), m.Roles.GetQuarantined()))}
	case *robonetv1.LeadRequest_Dispatch:
		answer = l.s.dispatch(l.sess, m.Dispatch)
	case *robonetv1.LeadRequest_Cancel:
		answer = &robonetv1.LeadAnswer{Id: m.Cancel.GetId(), Error: errToProto(l.sess.Cancel(readable(m.Cancel.GetKeys(), keyFromProto)))}
	case *robonetv1.LeadRequest_Ack:
		l.sess.Ack(m.Ack.GetSeq())
		return nil
	default:
		return status.Error(codes.InvalidArgument, "unexpected message on a Lead stream")
	}
	return l.out.push(&robonetv1.LeadResponse{Msg: &robonetv1.LeadResponse_Answer{Answer: answer}})
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
	ws := &workStream{s: s, ctx: stream.Context()}
	o, err := handshake[*robonetv1.WorkRequest, *robonetv1.WorkRegister, *robonetv1.WorkResponse]{
		opening: (*robonetv1.WorkRequest).GetRegister,
		missing: "a Work stream starts with WorkRegister",
		admit:   ws.admit,
		send:    stream.Send,
		log:     s.log,
		name:    func(reg *robonetv1.WorkRegister) string { return "Work from " + reg.GetNode() },
		setUp:   ws.setUp,
	}.accept(in.Recv)
	if err != nil {
		return err
	}
	defer o.close()
	reg := o.open
	ws.w.Register(ws.workers, ws.running)
	defer ws.w.Detach(reg.GetWorkers())
	s.log.Debug("pool registered", zap.String("worker_node", reg.GetNode()), zap.String("capability", reg.GetCapability()),
		zap.Int("workers", len(ws.workers)), zap.Int("running", len(ws.running)))
	ws.beats = newBeatWindow(s.opts.HeartbeatInterval)
	return serveRequests(in.Recv, checkWorkRequest, ws.violated, ws.handle)
}

// workStream is the server side of one pool's Work stream: the pool's
// slots, workers of the Waggler of its capability here.
type workStream struct {
	s      *Server
	ctx    context.Context // the stream's
	reg    *robonetv1.WorkRegister
	prefix string // of the pool's worker ids: "node/capability/"
	chk    *streamCheck
	w      *wag.Waggler
	out    *sender[*robonetv1.WorkResponse]
	beats  *beatWindow
	// workers and running are what the registration hands the Waggler,
	// once WorkReady is on its way.
	workers []wag.Worker
	running []wag.Running
}

// admit admits a pool's WorkRegister: within the limits, from the node it
// names, of that node's workers only, within MaxWorkStreamsPerNode (undo
// uncounts the stream), its stamp verified, for this node's Waggler of the
// capability at the epoch.
func (ws *workStream) admit(first *robonetv1.WorkRequest, reg *robonetv1.WorkRegister) (undo func(), err error) {
	s := ws.s
	if err := s.admitPeer(ws.ctx, reg.GetNode(), false, checkWorkRequest(first)); err != nil {
		return nil, err
	}
	// Worker ids name their node and capability (node/capability/slot):
	// trust is kept by them (wag.WorkerSubject), so a pool names its own
	// node's workers only.
	ws.reg, ws.prefix = reg, reg.GetNode()+"/"+reg.GetCapability()+"/"
	if err := ownRegistered(ws.prefix, reg); err != nil {
		return nil, s.violated(reg.GetNode(), err)
	}
	release, err := s.countStream(reg.GetNode())
	if err != nil {
		return nil, s.violated(reg.GetNode(), err)
	}
	if ws.chk, err = newStreamCheck(s.opts.Trust, reg.GetNode(), "Work stream of "+reg.GetNode()); err != nil {
		return release, err
	}
	if keep, err := ws.chk.check(first.GetStamp(), false); err != nil || !keep {
		if err == nil {
			err = status.Error(codes.Unavailable, "the stamp of WorkRegister could not be verified: open the stream again")
		}
		return release, err
	}
	ws.w = s.host.Waggler(reg.GetCapability())
	if ws.w == nil || ws.w.Epoch() != reg.GetEpoch() {
		return release, status.Errorf(codes.FailedPrecondition, "%s: this node is not the waggler of %s at epoch %d",
			wag.ErrNotWaggler, reg.GetCapability(), reg.GetEpoch())
	}
	return release, nil
}

// setUp makes the registered slots the Waggler's workers, their
// assignments sent on out, and reads what they run, for the Waggler to
// adopt: the WorkReady to answer.
func (ws *workStream) setUp(reg *robonetv1.WorkRegister, out *sender[*robonetv1.WorkResponse]) (*robonetv1.WorkResponse, func(), error) {
	s := ws.s
	ws.out = out
	ws.workers = make([]wag.Worker, len(reg.GetWorkers()))
	lim := limit(s.opts.MaxMessageBytes, reg.GetMaxMessageBytes())
	for i, id := range reg.GetWorkers() {
		ws.workers[i] = &remoteWorker{id: id, node: reg.GetNode(), out: out, log: s.log, limit: lim, waggler: ws.w}
	}
	for _, r := range reg.GetRunning() {
		a, err := assignmentFromProto(r.GetAssignment())
		if err != nil {
			s.log.Warn("a running attempt cannot be adopted", zap.Error(err))
			continue
		}
		ws.running = append(ws.running, wag.Running{Assignment: a, WorkerID: r.GetWorkerId(), StartedAt: clock.FromUnixNanos(r.GetStartedUnixNs())})
	}
	return &robonetv1.WorkResponse{Msg: &robonetv1.WorkResponse_Ready{Ready: &robonetv1.WorkReady{MaxMessageBytes: said(s.opts.MaxMessageBytes)}}}, nil, nil
}

// violated ends the stream for err, a violation of the pool's node.
func (ws *workStream) violated(err error) error { return ws.s.violated(ws.reg.GetNode(), err) }

// handle takes one request of the pool's, once its stamp is verified and
// the workers it names are the pool's own.
func (ws *workStream) handle(req *robonetv1.WorkRequest) error {
	if keep, err := ws.verified(req); err != nil || !keep {
		return err
	}
	if err := ownWorkersOf(ws.prefix, req); err != nil {
		return ws.violated(err)
	}
	switch m := req.GetMsg().(type) {
	case *robonetv1.WorkRequest_Heartbeats:
		return ws.heartbeats(m.Heartbeats)
	case *robonetv1.WorkRequest_Reports:
		return ws.reports(m.Reports)
	case *robonetv1.WorkRequest_Leave:
		ws.leave(m.Leave)
	case *robonetv1.WorkRequest_Misbehaved:
		ws.misbehaved(m.Misbehaved)
	default:
		return status.Error(codes.InvalidArgument, "unexpected message on a Work stream")
	}
	return nil
}

// verified checks req's stamp: keep reports whether to take req; err ends
// the stream.
func (ws *workStream) verified(req *robonetv1.WorkRequest) (keep bool, err error) {
	_, beat := req.GetMsg().(*robonetv1.WorkRequest_Heartbeats)
	if keep, err := ws.chk.check(req.GetStamp(), beat); err != nil || keep {
		return keep, err
	}
	if _, reports := req.GetMsg().(*robonetv1.WorkRequest_Reports); reports {
		// Reports are acknowledged cumulatively: passing over one
		// message would acknowledge it with the next. The stream
		// ends instead, and the pool sends every report not
		// acknowledged again on its next one.
		ws.s.log.Warn("reports whose stamp could not be verified: the Work stream is closed for the pool to send them again", zap.String("worker_node", ws.reg.GetNode()))
		return false, status.Error(codes.Unavailable, "a Reports message whose hash-chain stamp could not be verified was not taken: open the stream again")
	}
	return false, nil
}

// heartbeats passes a batch of heartbeats to the Waggler, unless the pool
// sends more than an honest one does.
func (ws *workStream) heartbeats(m *robonetv1.WorkHeartbeats) error {
	if err := ws.beats.add(m.GetItems(), time.Now()); err != nil {
		return ws.violated(err)
	}
	ws.w.Heartbeats(readable(m.GetItems(), heartbeatFromProto))
	return nil
}

// reports passes reports to the Waggler and acknowledges those it took
// (and those that cannot be read, dropped).
func (ws *workStream) reports(m *robonetv1.WorkReports) error {
	var acked uint64
	for _, p := range m.GetItems() {
		r, err := reportFromProto(p)
		if err != nil {
			ws.s.log.Warn("a report cannot be read; dropped", zap.Error(err))
			acked = p.GetSeq()
			continue
		}
		if !ws.w.Report(r) {
			// This Waggler closed: the pool keeps the rest for the
			// next one.
			return status.Error(codes.Unavailable, "the waggler closed")
		}
		acked = p.GetSeq()
	}
	if acked > 0 {
		return ws.out.push(&robonetv1.WorkResponse{Msg: &robonetv1.WorkResponse_Ack{Ack: &robonetv1.WorkAck{Seq: acked}}})
	}
	return nil
}

// leave declares the pool's workers in m dead.
func (ws *workStream) leave(m *robonetv1.WorkLeave) {
	for _, id := range m.GetWorkers() {
		if slices.Contains(ws.reg.GetWorkers(), id) { // only this stream's own
			ws.w.WorkerDead(id)
		}
	}
}

// misbehaved tells the Waggler what the programs behind the pool's
// workers did.
func (ws *workStream) misbehaved(m *robonetv1.WorkMisbehaved) {
	for _, it := range m.GetItems() {
		// Only this stream's own workers: a node speaks for the
		// programs it connects, never about another node's.
		if mb, ok := misbehaviourFromProto(it.GetKind()); ok && slices.Contains(ws.reg.GetWorkers(), it.GetWorkerId()) {
			ws.w.Misbehaved(it.GetWorkerId(), mb)
		}
	}
}

// ownRegistered checks that the workers a registration names, and those
// of the attempts it lists, are the stream's (prefix, see ownWorkers).
func ownRegistered(prefix string, reg *robonetv1.WorkRegister) error {
	if err := ownWorkers(prefix, reg.GetWorkers()); err != nil {
		return err
	}
	for _, r := range reg.GetRunning() {
		if err := ownWorkers(prefix, []string{r.GetWorkerId()}); err != nil {
			return err
		}
	}
	return nil
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

// countStream counts a Work stream of node against MaxWorkStreamsPerNode;
// release uncounts it.
func (s *Server) countStream(node string) (release func(), err error) {
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
