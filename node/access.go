package node

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/internal/access"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// Who may call what on a node's gRPC port. Every method the port serves
// has a rule here, and a method without one is refused (e2e TestRoleMatrix
// fails when a service gains a method this table does not name):
//
//   - public: anyone (health checks, for load balancers and probes);
//   - nodes: other nodes of the mesh only, by their certificate (the
//     Waggler streams);
//   - otherwise the least role a client's token needs (access.Role); a
//     node's certificate counts as admin, since a node calls another for a
//     client it has let in itself.
//
// Without TLS and tokens the port is open to whoever reaches it, as admin,
// which the node allows on loopback only unless Config.Insecure is set.

// rule is what one method asks of its callers.
type rule struct {
	need   access.Role
	nodes  bool // other nodes only
	public bool // anyone
	// needFor, when set, refines need by the request (unary methods):
	// listing quarantines is a read, changing them an admin's act.
	needFor func(req any) access.Role
	// reads marks a method that needs more than read yet changes nothing
	// (reading the audit trail).
	reads bool
}

// mutating reports whether a method changes something: its calls go to the
// audit trail (audit.go).
func (r rule) mutating() bool {
	return !r.public && !r.nodes && !r.reads && r.need != access.Read
}

// methodRules maps every method of the port to its rule.
var methodRules = map[string]rule{}

func init() {
	const wf, mesh = "/" + "robonet.v1.WorkflowService/", "/" + "robonet.v1.MeshService/"
	for method, need := range map[string]access.Role{
		wf + "ListWorkflows":  access.Read,
		wf + "GetInstance":    access.Read,
		wf + "WatchInstance":  access.Read,
		wf + "ListInstances":  access.Read,
		wf + "TaskLogs":       access.Read,
		wf + "ListSchedules":  access.Read,
		wf + "SubmitWorkflow": access.Submit, wf + "SubmitWorkflows": access.Submit,
		wf + "SignalInstance": access.Submit, wf + "PublishEvent": access.Submit,
		wf + "CancelInstance": access.Operate, wf + "RetryInstance": access.Operate,
		wf + "PauseInstance": access.Operate, wf + "ResumeInstance": access.Operate, wf + "PauseWorkflow": access.Operate,
		wf + "CreateSchedule": access.Operate, wf + "UpdateSchedule": access.Operate, wf + "DeleteSchedule": access.Operate,
		wf + "RegisterWorkflow": access.Admin,

		mesh + "ListMembers":     access.Read,
		mesh + "GetLeader":       access.Read,
		mesh + "ListWagglers":    access.Read,
		mesh + "LocalWagglers":   access.Read,
		mesh + "LocalPools":      access.Read,
		mesh + "ListTrust":       access.Read,
		mesh + "ListPartitions":  access.Read,
		mesh + "LocalPartitions": access.Read,
		mesh + "Keyring":         access.Admin,

		"/robonet.v1.WorkerService/Serve":                                access.Worker,
		"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      access.Read,
		"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": access.Read,
	} {
		methodRules[method] = rule{need: need}
	}
	methodRules[mesh+"Quarantine"] = rule{need: access.Admin, needFor: func(req any) access.Role {
		if q, ok := req.(*robonetv1.QuarantineRequest); ok && q.GetOp() == robonetv1.QuarantineOp_QUARANTINE_OP_LIST {
			return access.Read
		}
		return access.Admin
	}}
	methodRules[mesh+"ListAudit"] = rule{need: access.Admin, reads: true}
	for _, m := range robonetv1.WagService_ServiceDesc.Streams {
		methodRules["/"+robonetv1.WagService_ServiceDesc.ServiceName+"/"+m.StreamName] = rule{nodes: true}
	}
	for _, m := range healthpb.Health_ServiceDesc.Methods {
		methodRules["/"+healthpb.Health_ServiceDesc.ServiceName+"/"+m.MethodName] = rule{public: true}
	}
	for _, m := range healthpb.Health_ServiceDesc.Streams {
		methodRules["/"+healthpb.Health_ServiceDesc.ServiceName+"/"+m.StreamName] = rule{public: true}
	}
}

// methodName is the last part of a full method name.
func methodName(fullMethod string) string {
	return fullMethod[strings.LastIndexByte(fullMethod, '/')+1:]
}

// authz decides whether a call may proceed, and who makes it.
type authz struct {
	tls    bool         // the port speaks TLS; nodes present certificates
	tokens *tokenKeeper // nil: no tokens configured
}

// errNoCredentials is the message of a refused client call.
const errNoCredentials = `no valid credentials: send "authorization: Bearer TOKEN" with one of the node's API tokens (roboctl --token-file FILE or $ROBONET_TOKEN)`

// who returns the principal of a call to a method of rule r, or the status
// error that refuses it (before the request is read: a role refined by the
// request is checked by allowed).
func (a authz) who(ctx context.Context, fullMethod string) (*access.Principal, rule, error) {
	r, ok := methodRules[fullMethod]
	if !ok {
		return nil, r, status.Errorf(codes.PermissionDenied, "%s is not in the node's table of who may call what: no one may call it", fullMethod)
	}
	if r.public {
		return access.Anonymous, r, nil
	}
	name, _, isNode := callerNode(ctx)
	if r.nodes {
		if a.tls && !isNode {
			return nil, r, status.Errorf(codes.PermissionDenied, "%s is for the mesh's nodes: present a node certificate signed by the mesh CA", fullMethod)
		}
		return &access.Principal{Name: name, Role: access.Admin, Node: true}, r, nil
	}
	if isNode {
		return &access.Principal{Name: name, Role: access.Admin, Node: true}, r, nil
	}
	if a.tokens == nil {
		return access.Anonymous, r, nil
	}
	token, ok := bearer(ctx)
	if !ok {
		return nil, r, status.Error(codes.Unauthenticated, errNoCredentials)
	}
	p, ok := a.tokens.lookup(token)
	if !ok {
		return nil, r, status.Error(codes.Unauthenticated, errNoCredentials)
	}
	if r.needFor != nil {
		return p, r, nil // the request decides (unary)
	}
	return p, r, allowed(p, r.need, fullMethod)
}

// allowed refuses p a call that needs role need.
func allowed(p *access.Principal, need access.Role, fullMethod string) error {
	if p.Role.Allows(need) {
		return nil
	}
	if need == access.Worker {
		return status.Errorf(codes.PermissionDenied, "%s serves capabilities: it needs a token with role worker (TOKEN name=NAME role=worker capabilities=GLOB,…); %s has role %s",
			methodName(fullMethod), p.Name, p.Role)
	}
	return status.Errorf(codes.PermissionDenied, "%s needs role %s or above; the token %s has role %s", methodName(fullMethod), need, p.Name, p.Role)
}

// verdict is who makes a call and the rule of its method, as who decided
// them; an interceptor before authz that asked already (the audit's)
// hands its verdict down in the call's context, so that the token is
// looked up once a call.
type verdict struct {
	p   *access.Principal
	r   rule
	err error
}

type verdictKey struct{}

// withVerdict returns ctx carrying v for authz.
func withVerdict(ctx context.Context, v verdict) context.Context {
	return context.WithValue(ctx, verdictKey{}, v)
}

// decide is who, or the verdict an earlier interceptor handed down.
func (a authz) decide(ctx context.Context, fullMethod string) (*access.Principal, rule, error) {
	if v, ok := ctx.Value(verdictKey{}).(verdict); ok {
		return v.p, v.r, v.err
	}
	return a.who(ctx, fullMethod)
}

func (a authz) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	p, r, err := a.decide(ctx, info.FullMethod)
	if err == nil && r.needFor != nil {
		err = allowed(p, r.needFor(req), info.FullMethod)
	}
	if err != nil {
		return nil, err
	}
	return handler(access.NewContext(ctx, p), req)
}

func (a authz) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	p, r, err := a.decide(ss.Context(), info.FullMethod)
	if err == nil && r.needFor != nil {
		err = allowed(p, r.need, info.FullMethod) // a stream's rule cannot depend on a request
	}
	if err != nil {
		return err
	}
	return handler(srv, &ctxStream{ServerStream: ss, ctx: access.NewContext(ss.Context(), p)})
}

// permits reports whether p may call fullMethod, by the method's rule (the
// dashboard's buttons and forms).
func permits(p *access.Principal, fullMethod string) bool {
	r, ok := methodRules[fullMethod]
	return ok && !r.nodes && (r.public || p.Role.Allows(r.need))
}

// principalOf returns the caller of a call that came through authz; a call
// that did not (in-process) acts as admin.
func principalOf(ctx context.Context) *access.Principal {
	if p, ok := access.FromContext(ctx); ok {
		return p
	}
	return access.Anonymous
}

// errOutOfScope refuses p a workflow its token is not scoped to.
func errOutOfScope(p *access.Principal, workflow string) error {
	return status.Error(codes.PermissionDenied, fmt.Sprintf("the token %s may act on workflows %s only, not on %s",
		p.Name, strings.Join(p.Workflows, ","), workflow))
}
