package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	rpccode "google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/robonet/robonet/internal/access"
	"github.com/robonet/robonet/internal/audit"
	"github.com/robonet/robonet/internal/clock"
	"github.com/robonet/robonet/mesh"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// The audit trail (issue 38): every call that changes something, or
// tries to, is recorded — time, token name (never the token), role, peer
// address, method, target and outcome — as a log line on the "audit"
// logger and a JSON line in DATA_DIR/audit (package audit: bounded by
// rotation to audit.1). roboctl audit reads it through ListAudit.
//
// What is recorded:
//
//   - every call of a method whose rule changes something (rule.mutating:
//     submit, signal, publish, cancel, retry, pause, resume, schedules,
//     register, keyring, quarantine, WorkerService.Serve), whether it was
//     let in or refused — a token of too small a role, a call without a
//     valid token (token_name empty) — with the status it ended with;
//   - a worker program's Serve session once, when it ends: its time is
//     when it connected, its duration how long it stayed, its target the
//     capability and name of its hello;
//   - each reload of the API token file (ReloadTokens): the names it
//     holds now, or why it was refused — never a token.
//
// What is not: reads (get, list, watch, logs, the mesh's views), the
// operations of a mutating method that change nothing (listing
// quarantines or keys), reading the trail itself (ListAudit), and calls
// from other nodes (by their certificate): a node forwards a call on
// behalf of a client it let in and recorded itself, so each call is
// recorded once, by the node the client called. Calls from the dashboard
// are recorded as the calls they make (auditedAPI), with the browser's
// address.
//
// Targets name what a call acted on (instance=, workflow=NAME@VERSION,
// schedule=, signal=, event=, node=, a key's fingerprint); inputs,
// payloads and quarantine reasons are never recorded.
//
// A record is written after the call, before it returns, without a sync
// (package audit says what that means after a crash). A write that fails
// is logged and counted (robonet_audit_write_errors_total) and does not
// fail the call.

// auditReloadMethod is the method of a token file reload's record.
const auditReloadMethod = "ReloadTokens"

// Bounds of a record's parts.
const (
	auditValueBytes   = 128 // each value of a target
	auditOutcomeBytes = 256
	auditNames        = 32 // the token names of a reload
)

// auditTrail writes the records: to the log and to the file.
type auditTrail struct {
	node  string
	clock clock.Clock
	log   *zap.Logger
	file  *audit.Writer
	// written and failed count the records written to the file and the
	// writes that failed.
	written, failed prometheus.Counter
}

// openAudit opens the node's trail, DATA_DIR/audit, and records the
// reloads of its token file there.
func (n *Node) openAudit() (*auditTrail, error) {
	w, err := audit.Open(audit.Config{Path: n.cfg.auditPath(), MaxBytes: n.cfg.AuditFileBytes})
	if err != nil {
		return nil, fmt.Errorf("opening the audit trail: %w", err)
	}
	t := &auditTrail{
		node: n.cfg.Name, clock: n.cfg.Clock, log: n.log.Named("audit"), file: w,
		written: n.metrics.auditRecords, failed: n.metrics.auditErrors,
	}
	if n.tokens != nil {
		n.tokens.mu.Lock() // reload reads the hook under it
		n.tokens.onReload = t.tokensReloaded(n.cfg.APITokenFile)
		n.tokens.mu.Unlock()
	}
	return t, nil
}

// write records rec.
func (t *auditTrail) write(rec audit.Record) {
	t.log.Info("audited",
		zap.String("token_name", rec.TokenName), zap.String("role", rec.Role), zap.String("peer", rec.Peer),
		zap.String("method", rec.Method), zap.String("target", rec.Target), zap.String("outcome", rec.Outcome),
		zap.Float64("duration_ms", rec.DurationMS))
	err := t.file.Write(rec)
	switch {
	case err == nil:
		t.written.Inc()
	case errors.Is(err, audit.ErrClosed):
		// A call that ended as the node stopped: its log line stands.
	default:
		t.failed.Inc()
		t.log.Error("writing the audit trail", zap.String("method", rec.Method), zap.Error(err))
	}
}

// call records a call of method by p (nil: no valid credentials) made at
// start, on target, that ended with err.
func (t *auditTrail) call(ctx context.Context, p *access.Principal, method, target string, err error, start time.Time) {
	rec := audit.Record{
		Time: start, Node: t.node, Method: method, Target: target, Outcome: auditOutcome(err),
		DurationMS: float64(t.clock.Now().Sub(start).Microseconds()) / 1000,
	}
	if p != nil {
		rec.TokenName, rec.Role = p.Name, p.Role.String()
	}
	if pr, ok := peer.FromContext(ctx); ok && pr.Addr != nil {
		rec.Peer = pr.Addr.String()
	}
	t.write(rec)
}

// tokensReloaded is the token keeper's reload hook: it records the names
// the file holds now, or why it was refused.
func (t *auditTrail) tokensReloaded(file string) func(names []string, err error) {
	return func(names []string, err error) {
		var tg auditTargetBuilder
		tg.add("file", file)
		if err == nil {
			tg.add("names", boundedList(names, auditNames))
		}
		outcome := "ok"
		if err != nil {
			outcome = oneLine("error: "+err.Error(), auditOutcomeBytes)
		}
		t.write(audit.Record{Time: t.clock.Now(), Node: t.node, Method: auditReloadMethod, Target: tg.String(), Outcome: outcome})
	}
}

func (t *auditTrail) close() error { return t.file.Close() }

// auditCalls is the API's interceptor that records calls. It comes first
// in the chain: it sees the calls authz refuses and the statuses the
// handlers' errors become. It asks authz who the caller is the way authz
// does (who reads only the call's metadata and peer).
type auditCalls struct {
	trail *auditTrail
	who   func(ctx context.Context, fullMethod string) (*access.Principal, rule, error)
}

// caller returns who makes a call to fullMethod, whether to record it
// (not for other nodes), and ctx carrying the verdict for authz, which
// then does not look the token up again.
func (a auditCalls) caller(ctx context.Context, fullMethod string) (*access.Principal, bool, context.Context) {
	p, r, err := a.who(ctx, fullMethod) // the error is authz's to return
	return p, p == nil || !p.Node, withVerdict(ctx, verdict{p: p, r: r, err: err})
}

func (a auditCalls) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	r, ok := methodRules[info.FullMethod]
	if !ok || !changes(r, req) {
		return handler(ctx, req)
	}
	p, record, ctx := a.caller(ctx, info.FullMethod)
	if !record {
		return handler(ctx, req)
	}
	start := a.trail.clock.Now()
	resp, err := handler(ctx, req)
	a.trail.call(ctx, p, info.FullMethod, auditTarget(req, resp), err, start)
	return resp, err
}

func (a auditCalls) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	r, ok := methodRules[info.FullMethod]
	if !ok || !r.mutating() {
		return handler(srv, ss)
	}
	p, record, ctx := a.caller(ss.Context(), info.FullMethod)
	if !record {
		return handler(srv, &ctxStream{ServerStream: ss, ctx: ctx})
	}
	start := a.trail.clock.Now()
	fs := &firstMessageStream{ServerStream: ss, ctx: ctx}
	err := handler(srv, fs)
	a.trail.call(ss.Context(), p, info.FullMethod, fs.target(), err, start)
	return err
}

// firstMessageStream is a server stream that keeps the target of the
// first message it receives (a worker program's hello).
type firstMessageStream struct {
	grpc.ServerStream
	ctx  context.Context // carries the verdict for authz
	seen atomic.Bool
	mu   sync.Mutex
	tg   string
}

func (s *firstMessageStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if err == nil && !s.seen.Swap(true) {
		tg := auditTarget(m, nil)
		s.mu.Lock()
		s.tg = tg
		s.mu.Unlock()
	}
	return err
}

func (s *firstMessageStream) Context() context.Context { return s.ctx }

func (s *firstMessageStream) target() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tg
}

// changes reports whether a call of a method of rule r with req changes
// something: the method is mutating, and the operation asked is not a
// listing (quarantines, by the rule's own refinement; keys).
func changes(r rule, req any) bool {
	if !r.mutating() {
		return false
	}
	if r.needFor != nil && r.needFor(req) == access.Read {
		return false
	}
	if k, ok := req.(*robonetv1.KeyringRequest); ok && k.GetOp() == robonetv1.KeyringOp_KEYRING_OP_LIST {
		return false
	}
	return true
}

// auditOutcome is "ok", or err's status code and message on one line.
func auditOutcome(err error) string {
	if err == nil {
		return "ok"
	}
	st := status.Convert(err)
	return oneLine(rpccode.Code(st.Code()).String()+": "+st.Message(), auditOutcomeBytes)
}

// oneLine is s on one line, at most n bytes.
func oneLine(s string, n int) string {
	return audit.Clip(strings.ReplaceAll(s, "\n", "; "), n)
}

// auditTarget names what a call acted on, from its request and, once it
// succeeded, its response (the version a submission ran, the instance it
// started): names and ids only, never inputs or payloads.
func auditTarget(req, resp any) string {
	var t auditTargetBuilder
	switch r := req.(type) {
	case *robonetv1.RegisterWorkflowRequest:
		res, _ := resp.(*robonetv1.RegisterWorkflowResponse)
		t.workflow(res.GetWorkflow(), nil, r.GetSpec())
	case *robonetv1.SubmitWorkflowRequest:
		res, _ := resp.(*robonetv1.SubmitWorkflowResponse)
		t.workflow(res.GetWorkflow(), r.GetRef(), r.GetSpec())
		t.add("instance", res.GetInstanceId())
	case *robonetv1.SubmitWorkflowsRequest:
		res, _ := resp.(*robonetv1.SubmitWorkflowsResponse)
		t.workflow(res.GetWorkflow(), r.GetRef(), r.GetSpec())
		t.add("items", strconv.Itoa(len(r.GetItems())))
	case *robonetv1.CancelInstanceRequest:
		t.add("instance", r.GetInstanceId())
	case *robonetv1.PauseInstanceRequest:
		t.add("instance", r.GetInstanceId())
	case *robonetv1.ResumeInstanceRequest:
		t.add("instance", r.GetInstanceId())
	case *robonetv1.RetryInstanceRequest:
		t.add("instance", r.GetInstanceId())
		t.add("from", r.GetFromTask())
	case *robonetv1.SignalInstanceRequest:
		t.add("instance", r.GetInstanceId())
		t.add("signal", r.GetName())
	case *robonetv1.PublishEventRequest:
		t.add("event", r.GetName())
		if res, ok := resp.(*robonetv1.PublishEventResponse); ok {
			t.add("started", strconv.Itoa(len(res.GetStarted())))
		}
	case *robonetv1.PauseWorkflowRequest:
		t.add("workflow", r.GetWorkflow())
		t.add("op", map[bool]string{false: "pause", true: "resume"}[r.GetResume()])
		if res, ok := resp.(*robonetv1.PauseWorkflowResponse); ok {
			t.add("instances", strconv.Itoa(len(res.GetInstanceIds())))
		}
	case *robonetv1.CreateScheduleRequest:
		t.add("schedule", r.GetName())
		t.workflow(nil, r.GetWorkflow(), nil)
	case *robonetv1.UpdateScheduleRequest:
		t.add("schedule", r.GetName())
		t.add("op", enumName(r.GetOp().String(), "OP_"))
	case *robonetv1.DeleteScheduleRequest:
		t.add("schedule", r.GetName())
	case *robonetv1.QuarantineRequest:
		t.add("op", enumName(r.GetOp().String(), "QUARANTINE_OP_"))
		t.add("node", r.GetNode())
	case *robonetv1.KeyringRequest:
		t.add("op", enumName(r.GetOp().String(), "KEYRING_OP_"))
		if len(r.GetKey()) > 0 {
			t.add("key", mesh.Fingerprint(r.GetKey()))
		}
		if r.GetLocalOnly() {
			t.add("local_only", "true")
		}
	case *robonetv1.ServeRequest:
		h := r.GetHello()
		t.add("capability", h.GetCapability())
		t.add("name", h.GetName())
		if h.GetSlots() != 0 {
			t.add("slots", strconv.Itoa(int(h.GetSlots())))
		}
	}
	return t.String()
}

// auditTargetBuilder builds a record's target: key=value pairs, each value clipped,
// quoted when it holds spaces, quotes, '=' or unprintable characters.
type auditTargetBuilder struct{ b strings.Builder }

func (t *auditTargetBuilder) add(key, val string) {
	if val == "" {
		return
	}
	val = audit.Clip(val, auditValueBytes)
	if strings.ContainsFunc(val, func(r rune) bool { return unicode.IsSpace(r) || r == '"' || r == '=' || !unicode.IsPrint(r) }) {
		val = strconv.Quote(val)
	}
	if t.b.Len() > 0 {
		t.b.WriteByte(' ')
	}
	t.b.WriteString(key)
	t.b.WriteByte('=')
	t.b.WriteString(val)
}

// workflow adds the workflow a call acted on: the version it resolved to
// (info) when known, else the reference or the inline spec's file name.
func (t *auditTargetBuilder) workflow(info *robonetv1.WorkflowInfo, ref *robonetv1.WorkflowRef, spec *robonetv1.InlineSpec) {
	switch {
	case info.GetName() != "":
		t.add("workflow", fmt.Sprintf("%s@%d", info.GetName(), info.GetVersion()))
	case ref.GetName() != "" && ref.GetVersion() != 0:
		t.add("workflow", fmt.Sprintf("%s@%d", ref.GetName(), ref.GetVersion()))
	case ref.GetName() != "":
		t.add("workflow", ref.GetName())
	case spec != nil:
		t.add("spec", cmp.Or(spec.GetFilename(), "inline"))
	}
}

func (t *auditTargetBuilder) String() string { return t.b.String() }

// enumName is a protobuf enum value's name without its prefix, in lower
// case (QUARANTINE_OP_ADD: add).
func enumName(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}

// boundedList joins at most n of names with commas, saying how many more
// there are.
func boundedList(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ",")
	}
	return strings.Join(names[:n], ",") + fmt.Sprintf(",+%d more", len(names)-n)
}

// Bounds of ListAudit.
const (
	defaultAuditLimit = 1000
	maxAuditLimit     = 10000
)

// ListAudit reads this node's audit trail and, unless the request is
// local only or names this node, every other up member's (over the
// node-to-node channel, each within the ask timeout), merged by time: the
// last limit records.
func (s *meshAPI) ListAudit(ctx context.Context, req *robonetv1.ListAuditRequest) (*robonetv1.ListAuditResponse, error) {
	limit := int(req.GetLimit())
	switch {
	case limit < 0:
		return nil, badRequest("limit", "a limit is positive (0: the default, 1000)")
	case limit == 0:
		limit = defaultAuditLimit
	}
	limit = min(limit, maxAuditLimit)
	var since time.Time
	if ts := req.GetSince(); ts != nil {
		if err := ts.CheckValid(); err != nil {
			return nil, badRequest("since", "not a valid time: "+err.Error())
		}
		since = ts.AsTime()
	}
	resp := &robonetv1.ListAuditResponse{AnsweredBy: s.self}
	if req.GetLocalOnly() || req.GetNode() == s.self {
		recs, err := s.localAudit(since, limit)
		if err != nil {
			return nil, err
		}
		resp.Records = recs
		return resp, nil
	}
	members := s.mesh.Members()
	if node := req.GetNode(); node != "" && !slices.ContainsFunc(members, func(m mesh.Member) bool { return m.Name == node }) {
		return nil, status.Errorf(codes.NotFound, "audit: %s is not a member of the mesh (roboctl members)", node)
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		recs []*robonetv1.AuditRecord
	)
	gather := func(node string, got []*robonetv1.AuditRecord, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			resp.Errors = append(resp.Errors, node+": "+err.Error())
			return
		}
		recs = append(recs, got...)
	}
	if req.GetNode() == "" {
		got, err := s.localAudit(since, limit)
		gather(s.self, got, err)
	}
	for _, m := range members {
		if m.Name == s.self || (req.GetNode() != "" && m.Name != req.GetNode()) {
			continue
		}
		if !memberUp(m) {
			gather(m.Name, nil, fmt.Errorf("%s is %s", m.Name, m.Status))
			continue
		}
		wg.Go(func() {
			got, err := s.remoteAudit(ctx, m, req.GetSince(), limit)
			gather(m.Name, got, err)
		})
	}
	wg.Wait()
	slices.SortStableFunc(recs, func(a, b *robonetv1.AuditRecord) int {
		if c := a.GetTime().AsTime().Compare(b.GetTime().AsTime()); c != 0 {
			return c
		}
		return strings.Compare(a.GetNode(), b.GetNode())
	})
	if len(recs) > limit {
		recs = recs[len(recs)-limit:]
	}
	slices.Sort(resp.Errors)
	resp.Records = recs
	return resp, nil
}

// localAudit reads this node's trail.
func (s *meshAPI) localAudit(since time.Time, limit int) ([]*robonetv1.AuditRecord, error) {
	if s.auditPath == "" {
		return nil, status.Error(codes.Unimplemented, "this node keeps no audit trail")
	}
	recs, err := audit.Read(s.auditPath, since, limit)
	if err != nil {
		return nil, err
	}
	out := make([]*robonetv1.AuditRecord, 0, len(recs))
	for _, r := range recs {
		out = append(out, &robonetv1.AuditRecord{
			Time: timestamppb.New(r.Time), Node: r.Node, TokenName: r.TokenName, Role: r.Role, Peer: r.Peer,
			Method: r.Method, Target: r.Target, Outcome: r.Outcome,
			Duration: durationpb.New(time.Duration(r.DurationMS * float64(time.Millisecond))),
		})
	}
	return out, nil
}

// remoteAudit asks member for its own trail.
func (s *meshAPI) remoteAudit(ctx context.Context, m mesh.Member, since *timestamppb.Timestamp, limit int) ([]*robonetv1.AuditRecord, error) {
	if s.conn == nil || m.GRPCAddr == "" {
		return nil, fmt.Errorf("%s cannot be reached over gRPC", m.Name)
	}
	cc, err := s.conn(m.Name, m.GRPCAddr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout())
	defer cancel()
	resp, err := robonetv1.NewMeshServiceClient(cc).ListAudit(ctx, &robonetv1.ListAuditRequest{Since: since, Limit: int32(limit), LocalOnly: true}) //nolint:gosec // at most maxAuditLimit
	if err != nil {
		return nil, fmt.Errorf("asking %s: %s", m.Name, status.Convert(err).Message())
	}
	for _, r := range resp.GetRecords() {
		r.Node = m.Name // what a node says it recorded is its own
	}
	return resp.GetRecords(), nil
}

// auditedAPI is the WorkflowService as the dashboard calls it, in
// process (no interceptor sees those calls): each call that changes
// something is recorded as it would be over gRPC, with the principal the
// dashboard signed in and the browser's address (dashboardPeer), its
// target ending with via=dashboard. Every mutating method is here, so a
// button added to the dashboard is recorded too (TestAuditedAPI).
type auditedAPI struct {
	robonetv1.WorkflowServiceServer
	trail *auditTrail
}

// audited runs one call of the dashboard's and records it.
func audited[Req, Resp any](a auditedAPI, ctx context.Context, method string, req Req, call func(context.Context, Req) (Resp, error)) (Resp, error) {
	start := a.trail.clock.Now()
	resp, err := call(ctx, req)
	outcome := err
	if err != nil {
		outcome = errorStatus(zap.NewNop(), method, err) // the status the API would answer
	}
	tg := auditTarget(req, resp)
	if tg != "" {
		tg += " "
	}
	a.trail.call(ctx, principalOf(ctx), "/"+robonetv1.WorkflowService_ServiceDesc.ServiceName+"/"+method, tg+"via=dashboard", outcome, start)
	return resp, err
}

func (a auditedAPI) RegisterWorkflow(ctx context.Context, req *robonetv1.RegisterWorkflowRequest) (*robonetv1.RegisterWorkflowResponse, error) {
	return audited(a, ctx, "RegisterWorkflow", req, a.WorkflowServiceServer.RegisterWorkflow)
}

func (a auditedAPI) SubmitWorkflow(ctx context.Context, req *robonetv1.SubmitWorkflowRequest) (*robonetv1.SubmitWorkflowResponse, error) {
	return audited(a, ctx, "SubmitWorkflow", req, a.WorkflowServiceServer.SubmitWorkflow)
}

func (a auditedAPI) SubmitWorkflows(ctx context.Context, req *robonetv1.SubmitWorkflowsRequest) (*robonetv1.SubmitWorkflowsResponse, error) {
	return audited(a, ctx, "SubmitWorkflows", req, a.WorkflowServiceServer.SubmitWorkflows)
}

func (a auditedAPI) CancelInstance(ctx context.Context, req *robonetv1.CancelInstanceRequest) (*robonetv1.CancelInstanceResponse, error) {
	return audited(a, ctx, "CancelInstance", req, a.WorkflowServiceServer.CancelInstance)
}

func (a auditedAPI) SignalInstance(ctx context.Context, req *robonetv1.SignalInstanceRequest) (*robonetv1.SignalInstanceResponse, error) {
	return audited(a, ctx, "SignalInstance", req, a.WorkflowServiceServer.SignalInstance)
}

func (a auditedAPI) PublishEvent(ctx context.Context, req *robonetv1.PublishEventRequest) (*robonetv1.PublishEventResponse, error) {
	return audited(a, ctx, "PublishEvent", req, a.WorkflowServiceServer.PublishEvent)
}

func (a auditedAPI) RetryInstance(ctx context.Context, req *robonetv1.RetryInstanceRequest) (*robonetv1.RetryInstanceResponse, error) {
	return audited(a, ctx, "RetryInstance", req, a.WorkflowServiceServer.RetryInstance)
}

func (a auditedAPI) PauseInstance(ctx context.Context, req *robonetv1.PauseInstanceRequest) (*robonetv1.PauseInstanceResponse, error) {
	return audited(a, ctx, "PauseInstance", req, a.WorkflowServiceServer.PauseInstance)
}

func (a auditedAPI) ResumeInstance(ctx context.Context, req *robonetv1.ResumeInstanceRequest) (*robonetv1.ResumeInstanceResponse, error) {
	return audited(a, ctx, "ResumeInstance", req, a.WorkflowServiceServer.ResumeInstance)
}

func (a auditedAPI) PauseWorkflow(ctx context.Context, req *robonetv1.PauseWorkflowRequest) (*robonetv1.PauseWorkflowResponse, error) {
	return audited(a, ctx, "PauseWorkflow", req, a.WorkflowServiceServer.PauseWorkflow)
}

func (a auditedAPI) CreateSchedule(ctx context.Context, req *robonetv1.CreateScheduleRequest) (*robonetv1.CreateScheduleResponse, error) {
	return audited(a, ctx, "CreateSchedule", req, a.WorkflowServiceServer.CreateSchedule)
}

func (a auditedAPI) UpdateSchedule(ctx context.Context, req *robonetv1.UpdateScheduleRequest) (*robonetv1.UpdateScheduleResponse, error) {
	return audited(a, ctx, "UpdateSchedule", req, a.WorkflowServiceServer.UpdateSchedule)
}

func (a auditedAPI) DeleteSchedule(ctx context.Context, req *robonetv1.DeleteScheduleRequest) (*robonetv1.DeleteScheduleResponse, error) {
	return audited(a, ctx, "DeleteSchedule", req, a.WorkflowServiceServer.DeleteSchedule)
}

// dashboardPeer puts the browser's address into each request's context
// as a gRPC peer, where the audit trail reads a caller's address.
func dashboardPeer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(peer.NewContext(r.Context(), &peer.Peer{Addr: httpAddr(r.RemoteAddr)})))
	})
}

// httpAddr is an HTTP client's address.
type httpAddr string

func (a httpAddr) Network() string { return "tcp" }
func (a httpAddr) String() string  { return string(a) }
