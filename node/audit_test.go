package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/robonet/robonet/engine"
	"github.com/robonet/robonet/internal/access"
	"github.com/robonet/robonet/internal/audit"
	"github.com/robonet/robonet/internal/clock/clocktest"
	"github.com/robonet/robonet/internal/connect"
	"github.com/robonet/robonet/mesh"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

const (
	wfSvc   = "/robonet.v1.WorkflowService/"
	meshSvc = "/robonet.v1.MeshService/"
)

// testTrail is a trail writing to a file of a temporary directory, and
// the file.
func testTrail(t *testing.T) (*auditTrail, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "audit")
	w, err := audit.Open(audit.Config{Path: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	m := newNodeMetrics(&Node{log: zap.NewNop()})
	return &auditTrail{node: "n1", clock: clocktest.New(), log: zaptest.NewLogger(t), file: w,
		written: m.auditRecords, failed: m.auditErrors}, p
}

func readTrail(t *testing.T, p string) []audit.Record {
	t.Helper()
	recs, err := audit.Read(p, time.Time{}, 0)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestAuditTarget: targets name what a call acts on, and never hold
// inputs, payloads or keys.
func TestAuditTarget(t *testing.T) {
	const id = "6f1c1d1e-0000-4000-8000-000000000001"
	key := []byte("0123456789abcdef0123456789abcdef")
	for _, c := range []struct {
		req, resp any
		want      string
	}{
		{&robonetv1.SubmitWorkflowRequest{Workflow: &robonetv1.SubmitWorkflowRequest_Ref{Ref: &robonetv1.WorkflowRef{Name: "billing"}}, InputsJson: `{"password":"hunter2"}`},
			&robonetv1.SubmitWorkflowResponse{InstanceId: id, Workflow: &robonetv1.WorkflowInfo{Name: "billing", Version: 3}},
			"workflow=billing@3 instance=" + id},
		{&robonetv1.SubmitWorkflowRequest{Workflow: &robonetv1.SubmitWorkflowRequest_Ref{Ref: &robonetv1.WorkflowRef{Name: "billing", Version: 2}}}, nil,
			"workflow=billing@2"},
		{&robonetv1.SubmitWorkflowRequest{Workflow: &robonetv1.SubmitWorkflowRequest_Spec{Spec: &robonetv1.InlineSpec{Source: []byte("name: x\npassword: hunter2"), Filename: "x.yaml"}}}, nil,
			"spec=x.yaml"},
		{&robonetv1.SubmitWorkflowsRequest{Workflow: &robonetv1.SubmitWorkflowsRequest_Ref{Ref: &robonetv1.WorkflowRef{Name: "billing"}},
			Items: []*robonetv1.SubmitItem{{InputsJson: `{"password":"hunter2"}`}, {}, {}}},
			&robonetv1.SubmitWorkflowsResponse{Workflow: &robonetv1.WorkflowInfo{Name: "billing", Version: 1}}, "workflow=billing@1 items=3"},
		{&robonetv1.SignalInstanceRequest{InstanceId: id, Name: "approve", PayloadJson: `{"password":"hunter2"}`}, nil, "instance=" + id + " signal=approve"},
		{&robonetv1.PublishEventRequest{Name: "order.created", PayloadJson: `"hunter2"`},
			&robonetv1.PublishEventResponse{Started: []*robonetv1.EventStart{{}, {}}}, "event=order.created started=2"},
		{&robonetv1.RetryInstanceRequest{InstanceId: id, FromTask: "apply"}, nil, "instance=" + id + " from=apply"},
		{&robonetv1.PauseWorkflowRequest{Workflow: "billing", Resume: true}, &robonetv1.PauseWorkflowResponse{InstanceIds: []string{"a", "b"}},
			"workflow=billing op=resume instances=2"},
		{&robonetv1.CreateScheduleRequest{Name: "nightly", Workflow: &robonetv1.WorkflowRef{Name: "billing", Version: 1}, InputsJson: `{"password":"hunter2"}`},
			nil, "schedule=nightly workflow=billing@1"},
		{&robonetv1.UpdateScheduleRequest{Name: "nightly", Op: robonetv1.UpdateScheduleRequest_OP_PAUSE}, nil, "schedule=nightly op=pause"},
		{&robonetv1.QuarantineRequest{Op: robonetv1.QuarantineOp_QUARANTINE_OP_ADD, Node: "w1", Reason: "hunter2"}, nil, "op=add node=w1"},
		{&robonetv1.KeyringRequest{Op: robonetv1.KeyringOp_KEYRING_OP_INSTALL, Key: key}, nil, "op=install key=" + mesh.Fingerprint(key)},
		{&robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Hello{Hello: &robonetv1.WorkerHello{Name: "gpu-1", Capability: "ai.inference", Slots: 2}}}, nil,
			"capability=ai.inference name=gpu-1 slots=2"},
		{&robonetv1.CancelInstanceRequest{InstanceId: "not an id\n=x"}, nil, `instance="not an id\n=x"`},
		{&robonetv1.CancelInstanceRequest{InstanceId: strings.Repeat("x", 1000)}, nil, "instance=" + strings.Repeat("x", auditValueBytes-len("…")) + "…"},
	} {
		if got := auditTarget(c.req, c.resp); got != c.want {
			t.Errorf("%T: %q, want %q", c.req, got, c.want)
		}
	}
}

// TestAuditCalls: the interceptor records a mutating call once, allowed
// or refused, with the token's name and never the token; it leaves out
// reads, listings, and calls from other nodes.
func TestAuditCalls(t *testing.T) {
	trail, p := testTrail(t)
	const token = "the-secret-token-of-ada"
	tokens, err := newTokenKeeper(Config{APITokens: []string{token}}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	az := authz{tokens: tokens}
	au := auditCalls{trail: trail, who: az.who}
	client := func(tok string) context.Context {
		ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 4242}})
		return metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+tok))
	}
	call := func(ctx context.Context, method string, req any) {
		t.Helper()
		info := &grpc.UnaryServerInfo{FullMethod: method}
		_, _ = au.unary(ctx, req, info, func(ctx context.Context, req any) (any, error) {
			return az.unary(ctx, req, info, func(ctx context.Context, _ any) (any, error) {
				if p, _ := access.FromContext(ctx); p.Name != "token-1" {
					t.Errorf("the handler runs as %v", p)
				}
				return &robonetv1.CancelInstanceResponse{}, nil
			})
		})
	}
	call(client(token), wfSvc+"CancelInstance", &robonetv1.CancelInstanceRequest{InstanceId: "i-1"})
	call(client("not-a-token-at-all"), wfSvc+"CancelInstance", &robonetv1.CancelInstanceRequest{InstanceId: "i-2"})
	call(client(token), wfSvc+"GetInstance", &robonetv1.GetInstanceRequest{InstanceId: "i-3"})
	call(client(token), meshSvc+"Quarantine", &robonetv1.QuarantineRequest{Op: robonetv1.QuarantineOp_QUARANTINE_OP_LIST})
	call(client(token), meshSvc+"Keyring", &robonetv1.KeyringRequest{Op: robonetv1.KeyringOp_KEYRING_OP_LIST})
	call(client(token), meshSvc+"ListAudit", &robonetv1.ListAuditRequest{})
	// A node forwarding a client's call (its certificate, here faked).
	fromNode := auditCalls{trail: trail, who: func(context.Context, string) (*access.Principal, rule, error) {
		return &access.Principal{Name: "n2", Role: access.Admin, Node: true}, rule{}, nil
	}}
	_, _ = fromNode.unary(context.Background(), &robonetv1.CancelInstanceRequest{InstanceId: "i-4"}, &grpc.UnaryServerInfo{FullMethod: wfSvc + "CancelInstance"},
		func(context.Context, any) (any, error) { return nil, nil })

	recs := readTrail(t, p)
	want := []audit.Record{
		{Node: "n1", TokenName: "token-1", Role: "admin", Peer: "10.0.0.7:4242", Method: wfSvc + "CancelInstance", Target: "instance=i-1", Outcome: "ok"},
		{Node: "n1", Peer: "10.0.0.7:4242", Method: wfSvc + "CancelInstance", Target: "instance=i-2", Outcome: "UNAUTHENTICATED: " + errNoCredentials},
	}
	if len(recs) != len(want) {
		t.Fatalf("%d records, want %d: %+v", len(recs), len(want), recs)
	}
	for i, r := range recs {
		r.Time = time.Time{}
		if r != want[i] {
			t.Errorf("record %d:\n %+v\nwant\n %+v", i, r, want[i])
		}
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), token) || strings.Contains(string(data), "not-a-token-at-all") {
		t.Fatalf("a token is in the trail:\n%s", data)
	}
}

// TestAuditedAPI: every mutating method of the WorkflowService is
// recorded when the dashboard calls it in process, as the signed-in
// principal from the browser's address.
func TestAuditedAPI(t *testing.T) {
	trail, p := testTrail(t)
	api := reflect.ValueOf(auditedAPI{WorkflowServiceServer: robonetv1.UnimplementedWorkflowServiceServer{}, trail: trail})
	ctx := access.NewContext(context.Background(), &access.Principal{Name: "ops", Role: access.Operate})
	ctx = peer.NewContext(ctx, &peer.Peer{Addr: httpAddr("192.0.2.1:555")})
	var methods []string
	for _, m := range robonetv1.WorkflowService_ServiceDesc.Methods {
		if !methodRules[wfSvc+m.MethodName].mutating() {
			continue
		}
		methods = append(methods, m.MethodName)
		fn := api.MethodByName(m.MethodName)
		fn.Call([]reflect.Value{reflect.ValueOf(ctx), reflect.New(fn.Type().In(1).Elem())})
	}
	recs := readTrail(t, p)
	if len(methods) < 10 || len(recs) != len(methods) {
		t.Fatalf("%d records of %d mutating methods (%v): %+v", len(recs), len(methods), methods, recs)
	}
	for i, r := range recs {
		if r.Method != wfSvc+methods[i] || r.TokenName != "ops" || r.Role != "operate" || r.Peer != "192.0.2.1:555" ||
			!strings.HasSuffix(r.Target, "via=dashboard") || !strings.HasPrefix(r.Outcome, "UNIMPLEMENTED: ") {
			t.Errorf("%s: %+v", methods[i], r)
		}
	}
}

// auditSession is a node with API tokens of every role, and a connection
// per token.
type auditSession struct {
	n         *Node
	dir       string
	tokenFile string
	clk       *clocktest.Fake
	logs      *observer.ObservedLogs
	conns     map[string]*grpc.ClientConn // by token name; "" without a token
	tokens    map[string]string           // name → token
}

// tokenLines are the lines of the session's token file.
var tokenLines = []string{
	"ada-0123456789abcdef name=ada role=admin",
	"ops-0123456789abcdef name=ops role=operate",
	"sub-0123456789abcdef name=sub role=submit",
	"reader-0123456789abcdef name=reader role=read",
	"wkr-0123456789abcdef name=wkr role=worker capabilities=ai.*",
}

func startAuditSession(t *testing.T) *auditSession {
	t.Helper()
	s := &auditSession{dir: t.TempDir(), clk: clocktest.New(), conns: map[string]*grpc.ClientConn{}, tokens: map[string]string{}}
	s.tokenFile = filepath.Join(t.TempDir(), "api-tokens")
	if err := os.WriteFile(s.tokenFile, []byte(strings.Join(tokenLines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	s.logs = logs
	log := zap.New(zapcore.NewTee(core, zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel)).Core()))
	n, err := New(Config{
		Name: "audit-1", DataDir: s.dir, GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0",
		GossipAddr: "127.0.0.1:0", RaftAddr: "127.0.0.1:0", Capabilities: map[string]int{"core": 2},
		APITokenFile: s.tokenFile, Clock: s.clk, Logger: log, StopTimeout: 5 * time.Second,
		Engine: engine.Config{ClaimInterval: 50 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.n = n
	t.Cleanup(func() {
		if err := n.Stop(context.Background()); err != nil {
			t.Errorf("Stop: %v", err)
		}
	})
	for _, line := range append(tokenLines, "") {
		tok, attrs, _ := strings.Cut(line, " ")
		name := strings.TrimPrefix(strings.Fields(attrs + " name=")[0], "name=")
		conn, err := connect.Dial(n.GRPCAddr(), connect.Credentials{Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		s.conns[name], s.tokens[name] = conn, tok
	}
	return s
}

func (s *auditSession) wf(name string) robonetv1.WorkflowServiceClient {
	return robonetv1.NewWorkflowServiceClient(s.conns[name])
}

func (s *auditSession) mesh(name string) robonetv1.MeshServiceClient {
	return robonetv1.NewMeshServiceClient(s.conns[name])
}

// expect is a record the session should find: its target is matched by
// prefix (instance ids are learnt as the session runs).
type expect struct {
	token, role, method, target string
	err                         error // the call's error: the record's outcome
}

// TestAuditSession runs a session through the gRPC API of a real node
// with tokens of every role — register, submit, reads, a refused submit,
// a call without a token, signal, pause, resume, cancel, schedules,
// quarantine, a dashboard button, a worker program's session, token file
// reloads — and finds
// in DATA_DIR/audit one record per call that changed something (or
// tried), in order, with the token's name and role, the method, the
// target and the outcome; no read; no token and no input or payload
// anywhere in the file; a log line per record on the audit logger; and
// ListAudit answers admins only.
func TestAuditSession(t *testing.T) {
	s := startAuditSession(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	spec, err := os.ReadFile("../examples/approval.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want []expect
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	ref := &robonetv1.SubmitWorkflowRequest_Ref{Ref: &robonetv1.WorkflowRef{Name: "approval"}}
	const secretInput, secretPayload = "SECRET-INPUT-7f3a", "SECRET-PAYLOAD-9c2e"

	reg, err := s.wf("ada").RegisterWorkflow(ctx, &robonetv1.RegisterWorkflowRequest{Spec: &robonetv1.InlineSpec{Source: spec, Filename: "approval.yaml"}})
	must("register", err)
	want = append(want, expect{"ada", "admin", wfSvc + "RegisterWorkflow", "workflow=approval@1", nil})
	if reg.GetWorkflow().GetVersion() != 1 {
		t.Fatalf("registered %v", reg.GetWorkflow())
	}

	sub1, err := s.wf("sub").SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{Workflow: ref, InputsJson: `{"change": "` + secretInput + `"}`})
	must("submit", err)
	id1 := sub1.GetInstanceId()
	want = append(want, expect{"sub", "submit", wfSvc + "SubmitWorkflow", "workflow=approval@1 instance=" + id1, nil})

	// Reads are not recorded.
	_, err = s.wf("reader").GetInstance(ctx, &robonetv1.GetInstanceRequest{InstanceId: id1})
	must("get", err)
	_, err = s.wf("reader").ListInstances(ctx, &robonetv1.ListInstancesRequest{})
	must("ls", err)
	_, err = s.mesh("ada").Quarantine(ctx, &robonetv1.QuarantineRequest{Op: robonetv1.QuarantineOp_QUARANTINE_OP_LIST})
	must("quarantine ls", err)

	// Refused: a read token submitting; a call without a token.
	_, err = s.wf("reader").SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{Workflow: ref})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("a read token submitting: %v", err)
	}
	want = append(want, expect{"reader", "read", wfSvc + "SubmitWorkflow", "workflow=approval", err})
	_, err = s.wf("").CancelInstance(ctx, &robonetv1.CancelInstanceRequest{InstanceId: id1})
	if status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token: %v", err)
	}
	want = append(want, expect{"", "", wfSvc + "CancelInstance", "instance=" + id1, err})

	_, err = s.wf("sub").SignalInstance(ctx, &robonetv1.SignalInstanceRequest{InstanceId: id1, Name: "approve", PayloadJson: `{"ok": true, "by": "` + secretPayload + `"}`})
	must("signal", err)
	want = append(want, expect{"sub", "submit", wfSvc + "SignalInstance", "instance=" + id1 + " signal=approve", nil})

	sub2, err := s.wf("sub").SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{Workflow: ref})
	must("submit", err)
	id2 := sub2.GetInstanceId()
	want = append(want, expect{"sub", "submit", wfSvc + "SubmitWorkflow", "workflow=approval@1 instance=" + id2, nil})
	_, err = s.wf("ops").PauseInstance(ctx, &robonetv1.PauseInstanceRequest{InstanceId: id2})
	must("pause", err)
	want = append(want, expect{"ops", "operate", wfSvc + "PauseInstance", "instance=" + id2, nil})
	_, err = s.wf("ops").ResumeInstance(ctx, &robonetv1.ResumeInstanceRequest{InstanceId: id2})
	must("resume", err)
	want = append(want, expect{"ops", "operate", wfSvc + "ResumeInstance", "instance=" + id2, nil})
	_, err = s.wf("ops").CancelInstance(ctx, &robonetv1.CancelInstanceRequest{InstanceId: id2})
	must("cancel", err)
	want = append(want, expect{"ops", "operate", wfSvc + "CancelInstance", "instance=" + id2, nil})

	_, err = s.wf("ops").CreateSchedule(ctx, &robonetv1.CreateScheduleRequest{Name: "nightly", Workflow: &robonetv1.WorkflowRef{Name: "approval", Version: 1},
		InputsJson: `{"change": "` + secretInput + `"}`, Interval: durationpb.New(time.Hour)})
	must("schedule create", err)
	want = append(want, expect{"ops", "operate", wfSvc + "CreateSchedule", "schedule=nightly workflow=approval@1", nil})
	_, err = s.wf("ops").DeleteSchedule(ctx, &robonetv1.DeleteScheduleRequest{Name: "nightly"})
	must("schedule delete", err)
	want = append(want, expect{"ops", "operate", wfSvc + "DeleteSchedule", "schedule=nightly", nil})

	_, err = s.mesh("ada").Quarantine(ctx, &robonetv1.QuarantineRequest{Op: robonetv1.QuarantineOp_QUARANTINE_OP_ADD, Node: "ghost", Reason: "drill"})
	must("quarantine add", err)
	want = append(want, expect{"ada", "admin", meshSvc + "Quarantine", "op=add node=ghost", nil})
	_, err = s.mesh("ops").Quarantine(ctx, &robonetv1.QuarantineRequest{Op: robonetv1.QuarantineOp_QUARANTINE_OP_RELEASE, Node: "ghost"})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("an operator releasing a quarantine: %v", err)
	}
	want = append(want, expect{"ops", "operate", meshSvc + "Quarantine", "op=release node=ghost", err})

	// A button of the dashboard: the call it makes, from the browser.
	sub3, err := s.wf("sub").SubmitWorkflow(ctx, &robonetv1.SubmitWorkflowRequest{Workflow: ref})
	must("submit", err)
	id3 := sub3.GetInstanceId()
	want = append(want, expect{"sub", "submit", wfSvc + "SubmitWorkflow", "workflow=approval@1 instance=" + id3, nil})
	post, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.n.HTTPAddr()+"/ui/instances/"+id3+"/cancel", nil)
	must("dashboard request", err)
	post.Header.Set("Authorization", "Bearer "+s.tokens["ops"])
	browser := &http.Client{}
	defer browser.CloseIdleConnections()
	res, err := browser.Do(post)
	must("dashboard cancel", err)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("dashboard cancel: %s", res.Status)
	}
	want = append(want, expect{"ops", "operate", wfSvc + "CancelInstance", "instance=" + id3 + " via=dashboard", nil})

	// A worker program's session: recorded once, when it ends.
	stream, err := robonetv1.NewWorkerServiceClient(s.conns["wkr"]).Serve(ctx)
	must("serve", err)
	must("hello", stream.Send(&robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Hello{Hello: &robonetv1.WorkerHello{
		Name: "prog-1", Capability: "ai.test", Actions: []string{"run"}, Slots: 1}}}))
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("welcome: %v", err)
	}
	must("goodbye", stream.CloseSend())
	for err == nil {
		_, err = stream.Recv()
	}
	if !errors.Is(err, io.EOF) {
		t.Fatalf("the session ended with %v", err)
	}
	want = append(want, expect{"wkr", "worker", "/robonet.v1.WorkerService/Serve", "capability=ai.test name=prog-1 slots=1", nil})

	// The token file: a new token, then a file that does not parse.
	lines := append(tokenLines[:len(tokenLines):len(tokenLines)], "new-0123456789abcdef name=newbie role=read")
	must("token file", os.WriteFile(s.tokenFile, []byte(strings.Join(lines, "\n")), 0o600))
	must("reload", s.n.ReloadTokens())
	want = append(want, expect{"", "", auditReloadMethod, "file=" + s.tokenFile + " names=ada,ops,sub,reader,wkr,newbie", nil})
	must("token file", os.WriteFile(s.tokenFile, []byte("short name=x role=read\n"), 0o600))
	reloadErr := s.n.ReloadTokens()
	if reloadErr == nil {
		t.Fatal("a broken token file was taken")
	}
	want = append(want, expect{"", "", auditReloadMethod, "file=" + s.tokenFile, errors.New("error: " + reloadErr.Error())})

	// The trail, as written.
	path := filepath.Join(s.dir, "audit")
	recs := readTrail(t, path)
	if len(recs) != len(want) {
		for _, r := range recs {
			t.Logf("%+v", r)
		}
		t.Fatalf("%d records, want %d", len(recs), len(want))
	}
	for i, r := range recs {
		w := want[i]
		outcome := auditOutcome(w.err)
		if w.method == auditReloadMethod && w.err != nil {
			outcome = oneLine(w.err.Error(), auditOutcomeBytes)
		}
		if r.Node != "audit-1" || r.TokenName != w.token || r.Role != w.role || r.Method != w.method ||
			!strings.HasPrefix(r.Target, w.target) || r.Outcome != outcome || !r.Time.Equal(s.clk.Now()) {
			t.Errorf("record %d:\n  %+v\nwant\n  %+v (outcome %q)", i, r, w, outcome)
		}
		if w.method != auditReloadMethod && !strings.HasPrefix(r.Peer, "127.0.0.1:") {
			t.Errorf("record %d: peer %q", i, r.Peer)
		}
	}
	data, err := os.ReadFile(path)
	must("read the trail", err)
	for _, secret := range append(slices.Collect(maps.Values(s.tokens)), secretInput, secretPayload, "new-0123456789abcdef") {
		if secret != "" && strings.Contains(string(data), secret) {
			t.Errorf("the trail holds %q", secret)
		}
	}

	// One log line per record, on the audit logger, with fixed keys.
	entries := s.logs.FilterLoggerName("node.audit").FilterMessage("audited").All()
	if len(entries) != len(recs) {
		t.Fatalf("%d audit log lines, want %d", len(entries), len(recs))
	}
	for i, e := range entries {
		m := e.ContextMap()
		if m["token_name"] != recs[i].TokenName || m["method"] != recs[i].Method || m["target"] != recs[i].Target || m["outcome"] != recs[i].Outcome ||
			m["role"] != recs[i].Role || m["peer"] != recs[i].Peer || e.Level != zapcore.InfoLevel {
			t.Errorf("log line %d: %v, record %+v", i, m, recs[i])
		}
	}

	// ListAudit: an admin's; this node's records, also since a time.
	resp, err := s.mesh("ada").ListAudit(ctx, &robonetv1.ListAuditRequest{})
	must("ListAudit", err)
	if len(resp.GetRecords()) != len(recs) || len(resp.GetErrors()) != 0 || resp.GetAnsweredBy() != "audit-1" {
		t.Fatalf("ListAudit: %d records (errors %v), want %d", len(resp.GetRecords()), resp.GetErrors(), len(recs))
	}
	if r := resp.GetRecords()[1]; r.GetTokenName() != "sub" || r.GetTarget() != recs[1].Target || !r.GetTime().AsTime().Equal(s.clk.Now()) {
		t.Errorf("ListAudit record 1: %v, want %+v", r, recs[1])
	}
	later, err := s.mesh("ada").ListAudit(ctx, &robonetv1.ListAuditRequest{Since: timestamppb.New(s.clk.Now().Add(time.Second)), Node: "audit-1"})
	must("ListAudit since", err)
	if len(later.GetRecords()) != 0 {
		t.Errorf("ListAudit since a second later: %v", later.GetRecords())
	}
	if _, err := s.mesh("reader").ListAudit(ctx, &robonetv1.ListAuditRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("ListAudit with a read token: %v", err)
	}
	if _, err := s.mesh("ada").ListAudit(ctx, &robonetv1.ListAuditRequest{Node: "nowhere"}); status.Code(err) != codes.NotFound {
		t.Errorf("ListAudit of no member: %v", err)
	}
	if n := len(readTrail(t, path)); n != len(recs) {
		t.Errorf("reading the trail added %d records", n-len(recs))
	}
}

// TestListAuditGathers: ListAudit merges this node's trail with every
// other up member's, asked over gRPC, by time; a member that cannot be
// asked is named in errors; limit keeps the newest; a node filter asks
// that node only.
func TestListAuditGathers(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	trailOf := func(node string, secs ...int) string {
		p := filepath.Join(t.TempDir(), "audit")
		w, err := audit.Open(audit.Config{Path: p})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = w.Close() }()
		for _, s := range secs {
			if err := w.Write(audit.Record{Time: t0.Add(time.Duration(s) * time.Second), Node: node, TokenName: "ada", Role: "admin",
				Method: wfSvc + "CancelInstance", Target: "instance=" + node, Outcome: "ok", DurationMS: 1.5}); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	m2 := &meshAPI{self: "n2", mesh: newFakeMesh(), auditPath: trailOf("n2", 2, 4)}
	addr2 := serveMesh(t, m2)
	fm := newFakeMesh()
	fm.members = []mesh.Member{
		member("n1", mesh.StatusAlive, "", nil),
		member("n2", mesh.StatusAlive, addr2, nil),
		member("n3", mesh.StatusFailed, "127.0.0.1:1", nil),
	}
	m1 := &meshAPI{self: "n1", mesh: fm, auditPath: trailOf("n1", 1, 3, 5), conn: testConns(t)}
	ctx := context.Background()

	line := func(resp *robonetv1.ListAuditResponse) string {
		var parts []string
		for _, r := range resp.GetRecords() {
			parts = append(parts, fmt.Sprintf("%s@%d", r.GetNode(), int(r.GetTime().AsTime().Sub(t0).Seconds())))
		}
		return strings.Join(parts, " ")
	}
	resp, err := m1.ListAudit(ctx, &robonetv1.ListAuditRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got := line(resp); got != "n1@1 n2@2 n1@3 n2@4 n1@5" {
		t.Errorf("every node: %s", got)
	}
	if errs := strings.Join(resp.GetErrors(), "; "); errs != "n3: n3 is failed" {
		t.Errorf("errors: %s", errs)
	}
	if r := resp.GetRecords()[1]; r.GetDuration().AsDuration() != 1500*time.Microsecond || r.GetTarget() != "instance=n2" || r.GetTokenName() != "ada" {
		t.Errorf("a record of n2: %v", r)
	}
	resp, err = m1.ListAudit(ctx, &robonetv1.ListAuditRequest{Since: timestamppb.New(t0.Add(2 * time.Second)), Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if got := line(resp); got != "n2@4 n1@5" {
		t.Errorf("since 2 s, limit 2: %s", got)
	}
	resp, err = m1.ListAudit(ctx, &robonetv1.ListAuditRequest{Node: "n2"})
	if err != nil {
		t.Fatal(err)
	}
	if got := line(resp); got != "n2@2 n2@4" {
		t.Errorf("node n2: %s", got)
	}
	if _, err := m1.ListAudit(ctx, &robonetv1.ListAuditRequest{Limit: -1}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("a negative limit: %v", err)
	}
}
