package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/internal/clock"
	"github.com/robonet/robonet/internal/pki"
	"github.com/robonet/robonet/mesh"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag/tasklog"
)

// forwardedHeader marks a call a node forwarded to the leader; its value
// names the forwarding node. A node that receives a forwarded call and
// does not lead answers with a NotLeaderError instead of forwarding again,
// so a call makes at most one hop and two nodes with different views of
// the leadership cannot bounce it between them.
const forwardedHeader = "robonet-forwarded-by"

// Backoff of the forwarding retries while an election is in progress.
const (
	forwardBackoffMin = 20 * time.Millisecond
	forwardBackoffMax = 500 * time.Millisecond
)

// The flow-control windows of every gRPC connection a node serves or dials:
// fixed, where gRPC would start each at 64 KiB and grow it from its own
// estimate of the link's bandwidth. A leader's request to a Waggler node
// carries up to 5,000 attempts (about 1 MiB); with the grown windows its
// sends waited for window updates from a receiver busy running attempts,
// 0.9 s in all over a run of 50,000 tasks, 29 ms with these. A peer may
// have at most connWindow bytes in flight to a node per connection, as
// many as gRPC's estimate may grow to (16 MiB), and at most streamWindow
// per stream. docs/benchmarks.md at f91b9cc, "fifteenth pass", has the figures.
const (
	streamWindow = 4 << 20
	connWindow   = 16 << 20
)

// ErrNoLeader: no engine leader was elected within the forwarding window
// (Config.ForwardTimeout). The servers may lack a quorum.
var ErrNoLeader = errors.New("no engine leader elected")

// forwarder serves the WorkflowService on every node and decides, per call,
// who answers it:
//
//	call                                leader       server (follower)              worker-only
//	RegisterWorkflow, SubmitWorkflow,   its engine   forwarded                      forwarded
//	SubmitWorkflows, PublishEvent,
//	CancelInstance, SignalInstance,
//	RetryInstance, PauseInstance,
//	ResumeInstance
//	PauseWorkflow                       lists as ListInstances, then pauses each instance as PauseInstance
//	GetInstance, WatchInstance          its engine   the store when finished;       forwarded
//	                                                 forwarded while live (per-task
//	                                                 detail lives on the leader)
//	CreateSchedule, UpdateSchedule,     its engine   forwarded                      forwarded
//	DeleteSchedule
//	ListInstances, ListWorkflows,       its engine   the store                      forwarded
//	ListSchedules
//
// "Its engine" is the engine of the current term once it runs (after the
// Barrier); a server that leads but whose engine is not running yet waits
// for it like a follower waits for an election. Forwarding waits for a
// leader with backoff, up to Config.ForwardTimeout, then fails with
// ErrNoLeader (UNAVAILABLE). A forwarded call that fails with UNAVAILABLE
// (the leader died or stepped down mid-call) is retried against the next
// leader within the same window: RegisterWorkflow is idempotent, cancels,
// pauses and resumes are, and a forwarded submission, signal or event
// without an idempotency key is given one so that a retry cannot start the
// workflow or deliver the signal twice.
type forwarder struct {
	robonetv1.UnimplementedWorkflowServiceServer

	self    string
	clock   clock.Clock // reads the forwarding window
	mesh    meshNode
	log     *zap.Logger
	limits  apiLimits
	timeout time.Duration
	// active returns the running engine of the current term, nil when this
	// node does not lead (or its engine has not started yet).
	active func() *engine.Engine
	// reader serves reads from the store on servers; nil on worker-only
	// nodes, which have no store.
	reader *engine.Query
	conns  *connCache
	// logs are the task logs of the attempts this node ran.
	logs *tasklog.Store
}

var _ robonetv1.WorkflowServiceServer = (*forwarder)(nil)

// target is where one call goes: the local engine or another node's API.
type target struct {
	local  *engine.Engine
	remote robonetv1.WorkflowServiceClient
	node   string
	// toOwner: the call goes to the owner of an instance's partition (it
	// carries ownerHeader and is not forwarded again).
	toOwner bool
}

// ownerHeader marks a call a node forwarded to the owner of an instance's
// partition. A node that receives it and does not own the partition
// answers with a NotLeaderError naming the owner it knows (UNAVAILABLE:
// the forwarding node reads the control state again and retries), never
// forwarding it again.
const ownerHeader = "robonet-to-owner"

// route says which engine answers a call.
type route struct {
	kind routeKind
	id   uuid.UUID // of routeOwner
}

type routeKind int

const (
	// routeLeader: the Raft leader's engine (schedules).
	routeLeader routeKind = iota
	// routeAny: any running engine — this node's, else the leader's
	// (registrations and submissions: a submission goes into a partition
	// the receiving engine owns, so it costs no hop).
	routeAny
	// routeOwner: the engine that owns the instance's partition (gets,
	// watches, cancels), found in the control state without a lookup.
	routeOwner
)

// resolve waits (with backoff, within deadline) until the engine rt
// names is known and returns where to send the call. A call forwarded to
// the leader may be forwarded once more, to the owner of an instance's
// partition (a worker-only node knows no partitions); a call forwarded to
// an owner, or to the leader for anything else, is never forwarded again.
func (r *forwarder) resolve(ctx context.Context, deadline time.Time, rt route) (target, error) {
	forwarded := isForwarded(ctx)
	backoff := forwardBackoffMin
	for {
		e := r.active()
		where := ownerNoPartitions
		switch rt.kind {
		case routeAny:
			if e != nil {
				return target{local: e, node: r.self}, nil
			}
		case routeOwner:
			if e != nil && e.Owns(rt.id) {
				return target{local: e, node: r.self}, nil
			}
			var t target
			var err error
			t, where, err = r.toOwner(ctx, rt.id)
			switch {
			case err != nil || where == ownerElsewhere:
				return t, err
			case where == ownerWait:
				// This node owns it and its engine is not running it
				// yet (starting, or the assignment just landed), or the
				// owner is not up (the leader moves its partitions): wait.
				if err := sleepUntil(ctx, r.now(), deadline, backoff); err != nil {
					return target{}, err
				}
				backoff = min(2*backoff, forwardBackoffMax)
				continue
			}
		}
		l := r.mesh.Leader()
		switch {
		case l.IsLeader && e != nil && !e.Follower() && where == ownerNoPartitions:
			return target{local: e, node: r.self}, nil
		case l.IsLeader:
			// Elected, engine not running yet (Barrier), or the instance's
			// owner not known yet: wait for it.
		case forwarded:
			return target{}, &mesh.NotLeaderError{Leader: l.Leader, LeaderGRPC: l.LeaderGRPC, Term: l.Term}
		case l.Leader != "" && l.LeaderGRPC != "" && l.Leader != r.self:
			c, err := r.conns.get(l.Leader, l.LeaderGRPC)
			if err != nil {
				return target{}, err
			}
			return target{remote: c, node: l.Leader}, nil
		}
		if err := sleepUntil(ctx, r.now(), deadline, backoff); err != nil {
			return target{}, err
		}
		backoff = min(2*backoff, forwardBackoffMax)
	}
}

// ownerWhere is where toOwner found an instance's owner.
type ownerWhere int

const (
	ownerNoPartitions ownerWhere = iota // a worker-only node, or no partition count yet: the leader answers
	ownerUnknown                        // the partition has no owner yet
	ownerWait                           // this node, whose engine does not run it yet, or a node not up
	ownerElsewhere                      // another node: the target, or an error
)

// toOwner finds the owner of instance id's partition as the control state
// names it. Elsewhere, it returns the owner's API, or an error when this
// call was sent here as the owner's (ownerHeader) or the owner is not up:
// the caller retries once the placement moved on.
func (r *forwarder) toOwner(ctx context.Context, id uuid.UUID) (target, ownerWhere, error) {
	st := r.mesh.State()
	if st.PartitionCount == 0 {
		return target{}, ownerNoPartitions, nil
	}
	owner := st.Partitions[port.PartitionOf(id, st.PartitionCount)].Node
	switch owner {
	case "":
		return target{}, ownerUnknown, nil
	case r.self:
		return target{}, ownerWait, nil
	}
	addr := ""
	for _, m := range r.mesh.Members() {
		if m.Name == owner && (m.Status == mesh.StatusAlive || m.Status == mesh.StatusSuspect) {
			addr = m.GRPCAddr
		}
	}
	switch {
	case isToOwner(ctx):
		return target{}, ownerElsewhere, &mesh.NotLeaderError{Leader: owner, LeaderGRPC: addr, Term: r.mesh.Leader().Term}
	case addr == "":
		return target{}, ownerWait, nil
	}
	c, err := r.conns.get(owner, addr)
	if err != nil {
		return target{}, ownerElsewhere, err
	}
	return target{remote: c, node: owner, toOwner: true}, ownerElsewhere, nil
}

// now reads the node's clock (the system's for a forwarder built bare, in
// tests).
func (r *forwarder) now() time.Time {
	if r.clock == nil {
		return clock.System().Now()
	}
	return r.clock.Now()
}

// sleepUntil waits d, or fails with ErrNoLeader if that would pass the
// deadline, or with ctx's error.
func sleepUntil(ctx context.Context, now, deadline time.Time, d time.Duration) error {
	if deadline.Sub(now) < d {
		return fmt.Errorf("%w within the forwarding window", ErrNoLeader)
	}
	return sleepCtx(ctx, d)
}

func isForwarded(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(forwardedHeader)) > 0
}

// ownsHere reports whether this node's engine answers rt: it runs the
// instance's partition.
func (r *forwarder) ownsHere(rt route) bool {
	e := r.active()
	return e != nil && (rt.kind != routeOwner || e.Owns(rt.id))
}

// instanceRoute routes a call about the instance named id to its
// partition's owner; an id that does not parse goes to any engine, whose
// API says what is wrong with it.
func instanceRoute(id string) route {
	u, err := uuid.Parse(id)
	if err != nil {
		return route{kind: routeAny}
	}
	return route{kind: routeOwner, id: u}
}

func isToOwner(ctx context.Context) bool {
	md, _ := metadata.FromIncomingContext(ctx)
	return len(md.Get(ownerHeader)) > 0
}

// retryable reports whether a forwarded call's error means "try the next
// leader": the leader was unreachable, stopping, or no longer leads, or
// its store could not take the call and nothing of it happened. A call the
// store may have applied (outcome unknown) is not sent again: a submission
// without an idempotency key would start twice; the client decides.
func retryable(err error) bool {
	st := status.Convert(err)
	if st.Code() != codes.Unavailable {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == ReasonStoreUnavailable {
			return info.GetMetadata()["outcome"] != "unknown"
		}
	}
	return true
}

// leaderCall runs a unary call on the engine rt names: locally when this
// node's engine is that one, otherwise on the node that runs it, retrying
// while leadership and ownership move.
func leaderCall[Req, Resp any](ctx context.Context, r *forwarder, rt route, req Req,
	local func(*apiServer, context.Context, Req) (Resp, error),
	remote func(robonetv1.WorkflowServiceClient, context.Context, Req, ...grpc.CallOption) (Resp, error),
) (Resp, error) {
	var zero Resp
	deadline := r.now().Add(r.timeout)
	backoff := forwardBackoffMin
	for {
		t, err := r.resolve(ctx, deadline, rt)
		if err != nil {
			return zero, err
		}
		if t.local != nil {
			return local(r.api(t.local), ctx, req)
		}
		resp, callErr := remote(t.remote, r.outgoing(ctx, t), req)
		if callErr == nil || !retryable(callErr) || isForwarded(ctx) {
			return resp, callErr
		}
		r.log.Debug("forwarded call failed; retrying", zap.String("node", t.node), zap.Error(callErr))
		if err := sleepUntil(ctx, r.now(), deadline, backoff); err != nil {
			return zero, fmt.Errorf("%w (the last node tried, %s, answered: %s)", err, t.node, status.Convert(callErr).Message())
		}
		backoff = min(2*backoff, forwardBackoffMax)
	}
}

// api is the translation layer over one engine.
func (r *forwarder) api(e *engine.Engine) *apiServer {
	return &apiServer{reads: e, eng: e, apiLimits: r.limits, served: r.servedCapabilities}
}

// servedCapabilities are the capabilities some up member of the mesh
// serves, as gossip says.
func (r *forwarder) servedCapabilities() map[string]bool {
	served := map[string]bool{}
	for c := range servingMembers(r.mesh.Members()) {
		served[c] = true
	}
	return served
}

// outgoing marks ctx's call as forwarded by this node, to t.
func (r *forwarder) outgoing(ctx context.Context, t target) context.Context {
	if t.toOwner {
		return metadata.AppendToOutgoingContext(ctx, forwardedHeader, r.self, ownerHeader, t.node)
	}
	return metadata.AppendToOutgoingContext(ctx, forwardedHeader, r.self)
}

// reads returns the read API that answers here without the leader: the
// running engine's, or the store reader's; nil on worker-only nodes.
func (r *forwarder) reads() *apiServer {
	if e := r.active(); e != nil {
		return r.api(e)
	}
	if r.reader != nil {
		return r.readAPI()
	}
	return nil
}

// readAPI is the translation layer over the store reader (reads only).
func (r *forwarder) readAPI() *apiServer {
	return &apiServer{reads: r.reader, apiLimits: r.limits}
}

func (r *forwarder) RegisterWorkflow(ctx context.Context, req *robonetv1.RegisterWorkflowRequest) (*robonetv1.RegisterWorkflowResponse, error) {
	return leaderCall(ctx, r, route{kind: routeAny}, req, (*apiServer).RegisterWorkflow, robonetv1.WorkflowServiceClient.RegisterWorkflow)
}

func (r *forwarder) SubmitWorkflow(ctx context.Context, req *robonetv1.SubmitWorkflowRequest) (*robonetv1.SubmitWorkflowResponse, error) {
	if r.active() == nil && req.GetIdempotencyKey() == "" {
		// Forwarding retries on UNAVAILABLE, which may come after the
		// leader committed the submission: a key makes the retry find
		// that instance instead of starting another.
		req = cloneSubmit(req)
		req.IdempotencyKey = "forwarded:" + uuid.NewString()
	}
	return leaderCall(ctx, r, route{kind: routeAny}, req, (*apiServer).SubmitWorkflow, robonetv1.WorkflowServiceClient.SubmitWorkflow)
}

func (r *forwarder) SubmitWorkflows(ctx context.Context, req *robonetv1.SubmitWorkflowsRequest) (*robonetv1.SubmitWorkflowsResponse, error) {
	if r.active() == nil {
		// As for SubmitWorkflow: a retried forward must find what the
		// leader may already have committed, so every item gets a key.
		req = cloneSubmitBatch(req)
		batch := uuid.NewString()
		for i, it := range req.Items {
			if it.GetIdempotencyKey() == "" {
				req.Items[i] = &robonetv1.SubmitItem{InputsJson: it.GetInputsJson(), Deadline: it.GetDeadline(),
					IdempotencyKey: fmt.Sprintf("forwarded:%s:%d", batch, i)}
			}
		}
	}
	return leaderCall(ctx, r, route{kind: routeAny}, req, (*apiServer).SubmitWorkflows, robonetv1.WorkflowServiceClient.SubmitWorkflows)
}

func (r *forwarder) CancelInstance(ctx context.Context, req *robonetv1.CancelInstanceRequest) (*robonetv1.CancelInstanceResponse, error) {
	return leaderCall(ctx, r, instanceRoute(req.GetInstanceId()), req, (*apiServer).CancelInstance, robonetv1.WorkflowServiceClient.CancelInstance)
}

func (r *forwarder) ListWorkflows(ctx context.Context, req *robonetv1.ListWorkflowsRequest) (*robonetv1.ListWorkflowsResponse, error) {
	if a := r.reads(); a != nil {
		return a.ListWorkflows(ctx, req)
	}
	return leaderCall(ctx, r, route{kind: routeAny}, req, (*apiServer).ListWorkflows, robonetv1.WorkflowServiceClient.ListWorkflows)
}

func (r *forwarder) CreateSchedule(ctx context.Context, req *robonetv1.CreateScheduleRequest) (*robonetv1.CreateScheduleResponse, error) {
	return leaderCall(ctx, r, route{kind: routeLeader}, req, (*apiServer).CreateSchedule, robonetv1.WorkflowServiceClient.CreateSchedule)
}

func (r *forwarder) UpdateSchedule(ctx context.Context, req *robonetv1.UpdateScheduleRequest) (*robonetv1.UpdateScheduleResponse, error) {
	return leaderCall(ctx, r, route{kind: routeLeader}, req, (*apiServer).UpdateSchedule, robonetv1.WorkflowServiceClient.UpdateSchedule)
}

func (r *forwarder) DeleteSchedule(ctx context.Context, req *robonetv1.DeleteScheduleRequest) (*robonetv1.DeleteScheduleResponse, error) {
	return leaderCall(ctx, r, route{kind: routeLeader}, req, (*apiServer).DeleteSchedule, robonetv1.WorkflowServiceClient.DeleteSchedule)
}

func (r *forwarder) ListSchedules(ctx context.Context, req *robonetv1.ListSchedulesRequest) (*robonetv1.ListSchedulesResponse, error) {
	if a := r.reads(); a != nil {
		return a.ListSchedules(ctx, req)
	}
	return leaderCall(ctx, r, route{kind: routeAny}, req, (*apiServer).ListSchedules, robonetv1.WorkflowServiceClient.ListSchedules)
}

func (r *forwarder) ListInstances(ctx context.Context, req *robonetv1.ListInstancesRequest) (*robonetv1.ListInstancesResponse, error) {
	if a := r.reads(); a != nil {
		return a.ListInstances(ctx, req)
	}
	return leaderCall(ctx, r, route{kind: routeAny}, req, (*apiServer).ListInstances, robonetv1.WorkflowServiceClient.ListInstances)
}

// GetInstance answers from the store on a server that does not own the
// instance when it has finished (the store has all of it) and asks the
// owner of its partition while it runs (the owner holds the live per-task
// detail). Without an owner within the forwarding window, a server
// answers from the store after all: the instance's state is right, only
// live attempts and progress are missing.
func (r *forwarder) GetInstance(ctx context.Context, req *robonetv1.GetInstanceRequest) (*robonetv1.GetInstanceResponse, error) {
	rt := instanceRoute(req.GetInstanceId())
	if r.ownsHere(rt) || r.reader == nil {
		return leaderCall(ctx, r, rt, req, (*apiServer).GetInstance, robonetv1.WorkflowServiceClient.GetInstance)
	}
	stored, err := r.readAPI().GetInstance(ctx, req)
	if err != nil || instanceFinished(stored.GetInstance().GetState()) {
		return stored, err
	}
	resp, err := leaderCall(ctx, r, rt, req, (*apiServer).GetInstance, robonetv1.WorkflowServiceClient.GetInstance)
	if errors.Is(err, ErrNoLeader) {
		return stored, nil
	}
	return resp, err
}

// WatchInstance streams from the owner of the instance's partition while
// the instance runs, and resumes after the last event it relayed when the
// owner changes, so a client watching through another node sees a
// failover as a gap filled by a snapshot, not as an error. A finished
// instance is answered from the store.
func (r *forwarder) WatchInstance(req *robonetv1.WatchInstanceRequest, stream grpc.ServerStreamingServer[robonetv1.WatchInstanceResponse]) error {
	ctx := stream.Context()
	rt := instanceRoute(req.GetInstanceId())
	if !r.ownsHere(rt) && r.reader != nil {
		stored, err := r.readAPI().GetInstance(ctx, &robonetv1.GetInstanceRequest{InstanceId: req.GetInstanceId()})
		if err != nil {
			return err
		}
		if instanceFinished(stored.GetInstance().GetState()) {
			return r.readAPI().WatchInstance(req, stream)
		}
	}
	after := req.GetAfterSeq()
	deadline := r.now().Add(r.timeout)
	backoff := forwardBackoffMin
	for {
		t, err := r.resolve(ctx, deadline, rt)
		if err != nil {
			return err
		}
		if t.local != nil {
			return r.api(t.local).WatchInstance(&robonetv1.WatchInstanceRequest{InstanceId: req.GetInstanceId(), AfterSeq: after}, stream)
		}
		relayed, err := relayWatch(r.outgoing(ctx, t), t.remote, req.GetInstanceId(), &after, stream)
		if err == nil || !retryable(err) || isForwarded(ctx) {
			return err
		}
		if relayed {
			// Progress was made: the window starts again for the next leader.
			deadline, backoff = r.now().Add(r.timeout), forwardBackoffMin
		}
		r.log.Debug("forwarded watch ended; resuming with the next owner", zap.String("node", t.node),
			zap.Uint64("after_seq", after), zap.Error(err))
		if err := sleepUntil(ctx, r.now(), deadline, backoff); err != nil {
			return err
		}
		backoff = min(2*backoff, forwardBackoffMax)
	}
}

// relayWatch copies the leader's event stream to the client, recording the
// last sequence number sent in after. relayed reports whether any event
// was.
func relayWatch(ctx context.Context, leader robonetv1.WorkflowServiceClient, id string, after *uint64,
	out grpc.ServerStreamingServer[robonetv1.WatchInstanceResponse],
) (relayed bool, err error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	in, err := leader.WatchInstance(ctx, &robonetv1.WatchInstanceRequest{InstanceId: id, AfterSeq: *after})
	if err != nil {
		return false, err
	}
	for {
		msg, err := in.Recv()
		if errors.Is(err, io.EOF) {
			return relayed, nil
		}
		if err != nil {
			return relayed, err
		}
		if err := out.Send(msg); err != nil {
			return relayed, err
		}
		relayed = true
		*after = msg.GetEvent().GetSeq()
	}
}

func instanceFinished(s robonetv1.InstanceState) bool {
	switch s {
	case robonetv1.InstanceState_INSTANCE_STATE_COMPLETE, robonetv1.InstanceState_INSTANCE_STATE_FAILED,
		robonetv1.InstanceState_INSTANCE_STATE_CANCELLED:
		return true
	}
	return false
}

func cloneSubmit(req *robonetv1.SubmitWorkflowRequest) *robonetv1.SubmitWorkflowRequest {
	return proto.CloneOf(req) // every field, also those added later
}

// cloneSubmitBatch copies req down to its item list (the items
// themselves are shared, not copied).
func cloneSubmitBatch(req *robonetv1.SubmitWorkflowsRequest) *robonetv1.SubmitWorkflowsRequest {
	c := &robonetv1.SubmitWorkflowsRequest{Items: append([]*robonetv1.SubmitItem(nil), req.GetItems()...)}
	switch w := req.GetWorkflow().(type) {
	case *robonetv1.SubmitWorkflowsRequest_Ref:
		c.Workflow = &robonetv1.SubmitWorkflowsRequest_Ref{Ref: w.Ref}
	case *robonetv1.SubmitWorkflowsRequest_Spec:
		c.Workflow = &robonetv1.SubmitWorkflowsRequest_Spec{Spec: w.Spec}
	}
	return c
}

// connCache holds one client connection per node and address, so calls
// to other nodes (forwarding, Waggler and worker streams, control-state
// reads) do not dial per call. With an identity, connections are mutual
// TLS and verify the peer by its node name. Connections are dialled
// lazily by gRPC and closed by close (node Stop).
type connCache struct {
	maxMsg int
	id     *pki.Identity // nil: plaintext

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn // by node@addr
	closed bool
}

func newConnCache(maxMsg int, id *pki.Identity) *connCache {
	return &connCache{maxMsg: maxMsg, id: id, conns: make(map[string]*grpc.ClientConn)}
}

func (c *connCache) get(node, addr string) (robonetv1.WorkflowServiceClient, error) {
	cc, err := c.conn(node, addr)
	if err != nil {
		return nil, err
	}
	return robonetv1.NewWorkflowServiceClient(cc), nil
}

// conn returns the connection to node at addr.
func (c *connCache) conn(node, addr string) (*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errStopping
	}
	key := node + "@" + addr
	if cc, ok := c.conns[key]; ok {
		return cc, nil
	}
	creds := insecure.NewCredentials()
	if c.id != nil {
		creds = credentials.NewTLS(c.id.ClientTLS(node))
	}
	cc, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(c.maxMsg), grpc.MaxCallSendMsgSize(c.maxMsg)),
		grpc.WithInitialWindowSize(streamWindow), grpc.WithInitialConnWindowSize(connWindow),
	)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s at %s: %w", node, addr, err)
	}
	c.conns[key] = cc
	return cc, nil
}

// close closes every connection; later gets fail.
func (c *connCache) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var errs []error
	for addr, cc := range c.conns {
		if err := cc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the connection to %s: %w", addr, err))
		}
	}
	c.conns = nil
	return errors.Join(errs...)
}
