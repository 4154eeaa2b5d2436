package remote

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/sentinel"
	"github.com/robonet/robonet/wag"
)

// requestTimeout bounds the wait for the answer to one request of a Lead
// session; a host that does not answer in time is treated as gone (the
// Router opens a new session).
const requestTimeout = 10 * time.Second

// LeadLink is a leader's session with another node's Waggler host over a
// Lead stream: the wag.Link the Router uses for that node.
type LeadLink struct {
	stream robonetv1.WagService_LeadClient
	cancel context.CancelFunc
	out    *sender[*robonetv1.LeadRequest]
	up     wag.Uplink
	log    *zap.Logger
	peer   string // the Waggler host's node
	opts   LeadOptions
	check  *streamCheck

	ready     chan struct{} // closed when the host's LeadReady arrived
	peerLimit atomic.Uint64 // the host's message-bytes, from LeadReady

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan *robonetv1.LeadAnswer
	err     error         // set when the stream broke
	done    chan struct{} // closed when the receive loop returns
}

var _ wag.Link = (*LeadLink)(nil)

// LeadOptions are a LeadLink's checks and hooks.
type LeadOptions struct {
	// OnViolation, when set, is told when what the host sends breaks the
	// limits, which also ends the session.
	OnViolation ViolationFunc
	// Trust, when set, verifies the stamp of everything the host sends.
	Trust Trust
	// OnObservations, when set, takes what the host observed other nodes
	// do (the Sentinel's evidence), host naming the observer.
	OnObservations func(host string, obs []sentinel.Observation)
	// MaxMessageBytes is the largest message this node takes and sends
	// (its gRPC limit), told to the host; 0: not said (see fit.go).
	MaxMessageBytes int
}

// OpenLead opens a session of owner with the Waggler host behind client;
// what it reports arrives on up. It returns once the host took the session
// (LeadReady), or with the reason it did not. The session lives until
// Close or until the stream breaks (then every call fails and the Router
// opens another). peer names the host's node.
func OpenLead(ctx context.Context, client robonetv1.WagServiceClient, owner wag.Owner, leader, peer string, up wag.Uplink, log *zap.Logger, opts LeadOptions) (*LeadLink, error) {
	if log == nil {
		log = zap.NewNop()
	}
	check, err := newStreamCheck(opts.Trust, peer, "Lead stream from "+peer)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stream, err := client.Lead(sctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("opening a lead stream: %w", err)
	}
	l := &LeadLink{stream: stream, cancel: cancel, up: up, log: log, peer: peer, opts: opts, check: check,
		pending: map[uint64]chan *robonetv1.LeadAnswer{}, ready: make(chan struct{}), done: make(chan struct{})}
	l.out = newSender(stream.Send, log.With(zap.String("stream", "Lead to "+peer)))
	go l.recv()
	open := &robonetv1.LeadOpen{Leader: leader, MaxMessageBytes: said(opts.MaxMessageBytes)}
	ownerToProto(owner, open)
	if err := l.out.push(&robonetv1.LeadRequest{Msg: &robonetv1.LeadRequest_Open{Open: open}}); err != nil {
		l.Close()
		return nil, err
	}
	t := time.NewTimer(requestTimeout)
	defer t.Stop()
	select {
	case <-l.ready:
		warnIfLimitsDiffer(log, opts.MaxMessageBytes, l.peerLimit.Load(), peer)
		return l, nil
	case <-l.done:
		l.mu.Lock()
		err = l.err
		l.mu.Unlock()
	case <-t.C:
		err = fmt.Errorf("the waggler host on %s did not take the session within %s", peer, requestTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	l.Close()
	return nil, err
}

// recv delivers answers to their requests and reports to the uplink.
func (l *LeadLink) recv() {
	defer close(l.done)
	for {
		resp, err := l.stream.Recv()
		if err != nil {
			l.fail(fmt.Errorf("lead stream: %w", err))
			return
		}
		keep, err := l.judge(resp)
		if err != nil {
			l.fail(err)
			l.cancel()
			return
		}
		if keep {
			l.deliver(resp)
		}
	}
}

// judge judges what the host sent before anything acts on it: within the
// limits (a violation otherwise, told to OnViolation), its stamp verified.
// keep reports whether to deliver it; an error ends the session.
func (l *LeadLink) judge(resp *robonetv1.LeadResponse) (keep bool, err error) {
	if err := checkLeadResponse(resp); err != nil {
		l.log.Warn("a waggler host sent what no honest node sends: the session is closed", zap.String("peer", l.peer), zap.Error(err))
		l.opts.OnViolation.report(l.peer, err)
		return false, fmt.Errorf("lead stream: %w", err)
	}
	keep, err = l.check.check(resp.GetStamp(), false)
	if err != nil {
		l.log.Warn("a waggler host's stamp failed: the session is closed", zap.String("peer", l.peer), zap.Error(err))
		return false, fmt.Errorf("lead stream: %w", err)
	}
	if !keep {
		switch resp.GetMsg().(type) {
		case *robonetv1.LeadResponse_Results, *robonetv1.LeadResponse_Answer, *robonetv1.LeadResponse_Ready:
			// Results are acknowledged cumulatively, and a request
			// (the session itself, for LeadReady) waits for its
			// answer: passing over any would lose it.
			// The session ends instead; the host sends its results
			// not acknowledged again on the next one.
			l.log.Warn("results or an answer whose stamp could not be verified: the session is closed for the host to send them again", zap.String("peer", l.peer))
			return false, errors.New("lead stream: a message whose hash-chain stamp could not be verified was not taken")
		}
	}
	return keep, nil
}

// deliver passes what the host sent on: LeadReady opens the session, an
// answer goes to its request, the rest to the uplink (or OnObservations).
func (l *LeadLink) deliver(resp *robonetv1.LeadResponse) {
	switch m := resp.GetMsg().(type) {
	case *robonetv1.LeadResponse_Ready:
		select {
		case <-l.ready: // said once; a repetition changes nothing
		default:
			l.peerLimit.Store(m.Ready.GetMaxMessageBytes())
			close(l.ready)
		}
	case *robonetv1.LeadResponse_Answer:
		l.answer(m.Answer)
	case *robonetv1.LeadResponse_Results:
		_ = l.up.Results(l.results(m.Results.GetResults()))
	case *robonetv1.LeadResponse_Progress:
		l.up.Progress(readable(m.Progress.GetItems(), progressFromProto))
	case *robonetv1.LeadResponse_Observations:
		if l.opts.OnObservations != nil {
			l.opts.OnObservations(l.peer, observationsFromProto(m.Observations.GetItems()))
		}
	case *robonetv1.LeadResponse_Started:
		l.up.Started(readable(m.Started.GetItems(), startedFromProto))
	}
}

// answer gives a to the request waiting for it, if one is.
func (l *LeadLink) answer(a *robonetv1.LeadAnswer) {
	l.mu.Lock()
	ch := l.pending[a.GetId()]
	delete(l.pending, a.GetId())
	l.mu.Unlock()
	if ch != nil {
		ch <- a
	}
}

// results reads the results the host sent; one that cannot be read is
// dropped.
func (l *LeadLink) results(ps []*robonetv1.WagResult) []wag.SeqResult {
	rs := make([]wag.SeqResult, 0, len(ps))
	for _, p := range ps {
		r, err := resultFromProto(p)
		if err != nil {
			l.log.Warn("a result from a waggler cannot be read; dropped", zap.Error(err))
			continue
		}
		rs = append(rs, r)
	}
	return rs
}

// Done returns a channel closed when the session's stream has ended (the
// Router then opens a new one).
func (l *LeadLink) Done() <-chan struct{} { return l.done }

// fail marks the session broken and fails every request waiting.
func (l *LeadLink) fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
	}
	for id, ch := range l.pending {
		close(ch)
		delete(l.pending, id)
	}
}

// request sends a request built with its id and waits for its answer.
func (l *LeadLink) request(build func(id uint64) *robonetv1.LeadRequest) (*robonetv1.LeadAnswer, error) {
	l.mu.Lock()
	if l.err != nil {
		err := l.err
		l.mu.Unlock()
		return nil, err
	}
	l.nextID++
	id := l.nextID
	ch := make(chan *robonetv1.LeadAnswer, 1)
	l.pending[id] = ch
	l.mu.Unlock()
	if err := l.out.push(build(id)); err != nil {
		l.fail(err)
		return nil, err
	}
	t := time.NewTimer(requestTimeout)
	defer t.Stop()
	select {
	case a, ok := <-ch:
		if !ok {
			l.mu.Lock()
			err := l.err
			l.mu.Unlock()
			return nil, err
		}
		return a, nil
	case <-t.C:
		err := fmt.Errorf("no answer from the waggler host within %s", requestTimeout)
		l.fail(err)
		return nil, err
	}
}

// SetRoles implements wag.Link.
func (l *LeadLink) SetRoles(roles map[string]uint64, quarantined []string) error {
	a, err := l.request(func(id uint64) *robonetv1.LeadRequest {
		return &robonetv1.LeadRequest{Msg: &robonetv1.LeadRequest_Roles{Roles: &robonetv1.LeadRoles{Id: id, Roles: roles, Quarantined: quarantined}}}
	})
	if err != nil {
		return err
	}
	return errFromProto(a.GetError())
}

// Dispatch implements wag.Link: one answer per handoff. Handoffs go in
// requests of at most maxPerRequest (a host accepts MaxBatchItems) and
// maxCoalesced bytes, or alone when one is larger; one larger than a
// message to the host may be fails with wag.ErrTooLarge (fit.go).
func (l *LeadLink) Dispatch(hs []wag.Handoff) []error {
	var errs []error
	set := func(i int, err error) {
		if errs == nil {
			errs = make([]error, len(hs))
		}
		errs[i] = err
	}
	lim := limit(l.opts.MaxMessageBytes, l.peerLimit.Load())
	var (
		ps    []*robonetv1.Handoff
		idx   []int // ps[j] is hs[idx[j]]
		sizes []int
	)
	for i, h := range hs {
		d, err := dispatchToProto(h.TaskDispatch)
		if err != nil {
			set(i, err)
			continue
		}
		p := &robonetv1.Handoff{Dispatch: d, Epoch: h.Epoch, WorkerId: h.WorkerID, Generation: h.Generation, MayRun: h.MayRun}
		n := handoffBound(p)
		if size, ok := fits(n, lim); !ok {
			set(i, tooLarge("input", size, lim, "node "+l.peer))
			continue
		}
		ps, idx, sizes = append(ps, p), append(idx, i), append(sizes, n)
	}
	for start, end := range runs(sizes) {
		for j, err := range l.dispatch(ps[start:end]) {
			if err != nil {
				set(idx[start+j], err)
			}
		}
	}
	return errs
}

// maxPerRequest bounds the items of one message a node sends (handoffs or
// cancels of a Lead request, results, reports), well under what a peer
// accepts (MaxBatchItems).
const maxPerRequest = MaxBatchItems / 4

// dispatch sends one request of handoffs; the answer has one entry per
// handoff.
func (l *LeadLink) dispatch(hs []*robonetv1.Handoff) []error {
	errs := make([]error, len(hs))
	m := &robonetv1.LeadDispatch{Handoffs: hs}
	a, err := l.request(func(id uint64) *robonetv1.LeadRequest {
		m.Id = id
		return &robonetv1.LeadRequest{Msg: &robonetv1.LeadRequest_Dispatch{Dispatch: m}}
	})
	if err == nil {
		err = errFromProto(a.GetError())
	}
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	for j, e := range a.GetAttemptErrors() {
		if int(j) >= 0 && int(j) < len(errs) {
			errs[j] = errFromProto(e)
		}
	}
	return errs
}

// Cancel implements wag.Link: keys go in requests of at most
// maxPerRequest.
func (l *LeadLink) Cancel(keys []port.AttemptKey) error {
	for start := 0; start < len(keys); start += maxPerRequest {
		if err := l.cancelKeys(keys[start:min(start+maxPerRequest, len(keys))]); err != nil {
			return err
		}
	}
	return nil
}

func (l *LeadLink) cancelKeys(keys []port.AttemptKey) error {
	m := &robonetv1.LeadCancel{Keys: make([]*robonetv1.AttemptKey, len(keys))}
	for i, k := range keys {
		m.Keys[i] = keyToProto(k)
	}
	a, err := l.request(func(id uint64) *robonetv1.LeadRequest {
		m.Id = id
		return &robonetv1.LeadRequest{Msg: &robonetv1.LeadRequest_Cancel{Cancel: m}}
	})
	if err != nil {
		return err
	}
	return errFromProto(a.GetError())
}

// Ack implements wag.Link.
func (l *LeadLink) Ack(seq uint64) {
	_ = l.out.push(&robonetv1.LeadRequest{Msg: &robonetv1.LeadRequest_Ack{Ack: &robonetv1.LeadAck{Seq: seq}}})
}

// Close ends the session and waits for its goroutines.
func (l *LeadLink) Close() {
	l.cancel()
	l.out.close()
	<-l.done
	l.fail(errors.New("lead session closed"))
}
