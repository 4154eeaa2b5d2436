package e2e_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/internal/connect"
	"github.com/robonet/robonet/internal/pki"
	"github.com/robonet/robonet/mesh"
	"github.com/robonet/robonet/node"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

// testPKI is a mesh CA with the means to certify nodes, a token and a
// gossip key.
type testPKI struct {
	t     *testing.T
	dir   string
	token string
	key   []byte
	certs map[string]pki.Files // by node name: a restarted node keeps its certificate
}

func newTestPKI(t *testing.T) *testPKI {
	t.Helper()
	p := &testPKI{t: t, dir: t.TempDir(), token: "a-test-token-of-32-bytes-0123456", key: []byte("0123456789abcdef0123456789abcdef"),
		certs: map[string]pki.Files{}}
	if _, _, err := pki.CreateCA(p.dir, time.Hour, time.Now()); err != nil {
		t.Fatal(err)
	}
	return p
}

// files certifies a node (server or not) once and returns its files.
func (p *testPKI) files(name string, server bool) pki.Files {
	p.t.Helper()
	if f, ok := p.certs[name]; ok {
		return f
	}
	cert, key, err := pki.CreateNodeCert(p.dir, p.dir, pki.NodeCert{Name: name, Server: server, Validity: time.Hour}, time.Now())
	if err != nil {
		p.t.Fatal(err)
	}
	p.certs[name] = pki.Files{CA: filepath.Join(p.dir, pki.CAFile), Cert: cert, Key: key}
	return p.certs[name]
}

// secure gives cfg a certificate of this CA, the token and the gossip key.
func (p *testPKI) secure(cfg *node.Config) {
	cfg.TLS = p.files(cfg.Name, cfg.Server != nil && *cfg.Server)
	cfg.APITokens = []string{p.token}
	cfg.GossipKey = p.key
}

func (p *testPKI) creds() connect.Credentials {
	return connect.Credentials{CAFile: filepath.Join(p.dir, pki.CAFile), Token: p.token}
}

// A secured mesh — mutual TLS between nodes and on Raft, API tokens,
// encrypted gossip — runs work across nodes (Lead and Work streams over
// mutual TLS); a client needs the CA and a token; health answers anyone.
func TestSecureMesh(t *testing.T) {
	p := newTestPKI(t)
	m := startWagMeshWith(t, func(_ string, cfg *node.Config) { p.secure(cfg) }, "w1", "w2")
	m.waggler("")
	id := submitSpec(t, m.server.api, markSpec, `{"n": 4}`)
	m.marks.waitRuns(t, "four runs", func(r []markRun) bool { return len(r) == 4 })
	close(m.marks.release)
	wantState(t, waitDone(t, m.server.api, id, 30*time.Second), robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	checkOncePerExecution(t, id, m.history(id), 4)

	addr := m.workers["w1"].node.GRPCAddr() // a worker-only node: it forwards to the leader over mutual TLS
	ctx := ctxFor(t, 10*time.Second)
	for _, c := range []struct {
		name  string
		creds connect.Credentials
		code  codes.Code
	}{
		{"CA and token", p.creds(), codes.OK},
		{"no token", connect.Credentials{CAFile: p.creds().CAFile}, codes.Unauthenticated},
		{"a wrong token", connect.Credentials{CAFile: p.creds().CAFile, Token: "not-the-token-but-long-enough"}, codes.Unauthenticated},
		{"plaintext", connect.Credentials{}, codes.Unavailable},
	} {
		conn := dialAs(t, addr, c.creds)
		_, err := robonetv1.NewWorkflowServiceClient(conn).ListInstances(ctx, &robonetv1.ListInstancesRequest{})
		if got := status.Code(err); got != c.code {
			t.Errorf("%s: ListInstances answered %s (%v), want %s", c.name, got, err, c.code)
		}
		if c.code == codes.Unauthenticated && !strings.Contains(err.Error(), "--token-file") {
			t.Errorf("%s: the refusal does not say how to authenticate: %v", c.name, err)
		}
		_, err = robonetv1.NewMeshServiceClient(conn).ListMembers(ctx, &robonetv1.ListMembersRequest{})
		if got := status.Code(err); got != c.code {
			t.Errorf("%s: ListMembers answered %s, want %s", c.name, got, c.code)
		}
		if c.code == codes.Unauthenticated {
			// Health answers without credentials (probes, load balancers).
			if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
				t.Errorf("%s: health: %v", c.name, err)
			}
		}
	}
	// A client cannot open the nodes' own streams, even with a token.
	conn := dialAs(t, addr, p.creds())
	stream, err := robonetv1.NewWagServiceClient(conn).Work(ctx)
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("a client opening a Work stream: %v, want PermissionDenied", err)
	}

	// The audit trail: a call w1 forwards to the leader is recorded once,
	// by w1 (the leader knows w1 by its certificate); ListAudit through w1
	// asks every node over mutual TLS.
	_, err = robonetv1.NewWorkflowServiceClient(conn).CancelInstance(ctx, &robonetv1.CancelInstanceRequest{InstanceId: id})
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("cancelling a finished instance: %v", err)
	}
	trail, err := robonetv1.NewMeshServiceClient(conn).ListAudit(ctx, &robonetv1.ListAuditRequest{})
	if err != nil || len(trail.GetErrors()) > 0 {
		t.Fatalf("ListAudit: %v %v", err, trail.GetErrors())
	}
	var cancels, submits []string
	for _, r := range trail.GetRecords() {
		switch r.GetMethod() {
		case "/robonet.v1.WorkflowService/CancelInstance":
			cancels = append(cancels, r.GetNode()+" "+r.GetTokenName()+" "+r.GetTarget()+" "+r.GetOutcome())
		case "/robonet.v1.WorkflowService/SubmitWorkflow":
			submits = append(submits, r.GetNode()+" "+r.GetTokenName()+" "+r.GetTarget())
		}
	}
	if len(cancels) != 1 || !strings.HasPrefix(cancels[0], "w1 token-1 instance="+id+" FAILED_PRECONDITION: ") {
		t.Errorf("the forwarded cancel is recorded as %q, want once, by w1", cancels)
	}
	if len(submits) != 1 || !strings.HasPrefix(submits[0], m.server.node.Name()+" token-1 workflow=") || !strings.HasSuffix(submits[0], " instance="+id) {
		t.Errorf("the submission is recorded as %q, want once, by %s", submits, m.server.node.Name())
	}
}

// Nodes that are not of the mesh get nothing: one without the gossip key
// cannot join it and nobody sees it; one with the key but a certificate of
// another CA is seen, but can neither open a Waggler stream nor be reached
// by the leader, so no work goes to it.
func TestIntrudersKeptOut(t *testing.T) {
	p := newTestPKI(t)
	m := startWagMeshWith(t, func(_ string, cfg *node.Config) { p.secure(cfg) }, "w1")
	holder := m.waggler("")
	if holder != "w1" {
		t.Fatalf("the Waggler is on %s, want w1", holder)
	}
	join := []string{m.server.node.GossipAddr()}

	// Without the gossip key: the join fails and the mesh never lists it.
	stranger := wagNodeConfig(t, "stranger", false, join, map[string]int{"work": 2}, m.marks.registry(t, "stranger"))
	p.secure(&stranger)
	stranger.GossipKey = []byte("another-key-of-16")[:16]
	stranger.Mesh.JoinTimeout = 2 * time.Second
	sn, err := node.New(stranger)
	if err != nil {
		t.Fatal(err)
	}
	if err := sn.Start(ctxFor(t, 30*time.Second)); err == nil {
		_ = sn.Stop(ctxFor(t, 10*time.Second))
		t.Fatal("a node with another gossip key joined the mesh")
	}
	for _, mem := range m.server.node.Members() {
		if mem.Name == "stranger" {
			t.Fatalf("the mesh lists the node without the gossip key: %+v", mem)
		}
	}

	// The gossip key but a certificate of another CA: it joins the
	// gossip, but its pool cannot register with the Waggler on w1.
	other := newTestPKI(t)
	imp := wagNodeConfig(t, "impostor", false, join, map[string]int{"work": 4}, m.marks.registry(t, "impostor"))
	other.secure(&imp)
	imp.GossipKey = p.key
	startNodeWith(t, imp)
	eventually(t, 30*time.Second, "the impostor in the membership", func() bool {
		for _, mem := range m.server.node.Members() {
			if mem.Name == "impostor" && mem.Status == mesh.StatusAlive {
				return true
			}
		}
		return false
	})
	id := submitSpec(t, m.server.api, markSpec, `{"n": 6}`)
	close(m.marks.release)
	wantState(t, waitDone(t, m.server.api, id, 60*time.Second), robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	for _, r := range m.marks.snapshot() {
		if r.node == "impostor" {
			t.Fatalf("a node with a certificate of another CA ran %s", r.exec)
		}
	}
}

// Certificates that do not fit the node are refused at start, saying why.
func TestCertificateMustFitTheNode(t *testing.T) {
	p := newTestPKI(t)
	worker := p.files("w1", false)
	foreign := newTestPKI(t).files("w1", false)
	for _, c := range []struct {
		name    string
		server  bool
		files   pki.Files
		message string
	}{
		{"another node's certificate", false, p.files("w9", false), `names node "w9", but this node is "w1"`},
		{"a worker's certificate on a server", true, worker, "robonode tls cert create --name w1 --server"},
		{"a certificate of another CA", false, pki.Files{CA: worker.CA, Cert: foreign.Cert, Key: foreign.Key}, "not signed by the mesh CA"},
	} {
		cfg := meshNodeConfig(t, "w1", "", "", c.server, nil, 1)
		cfg.TLS = c.files
		_, err := node.New(cfg)
		if !errors.Is(err, node.ErrConfig) || !strings.Contains(err.Error(), c.message) {
			t.Errorf("%s: %v, want a config error saying %q", c.name, err, c.message)
		}
	}
}

// A node that listens beyond loopback without its defences refuses to
// start, saying what is missing; --insecure lets it.
func TestExposedNodeNeedsCredentials(t *testing.T) {
	cfg := meshNodeConfig(t, "open", "", "", true, nil, 1)
	cfg.GRPCAddr = "0.0.0.0:0"
	_, err := node.New(cfg)
	if !errors.Is(err, node.ErrInsecure) {
		t.Fatalf("an exposed node without credentials: %v, want ErrInsecure", err)
	}
	for _, want := range []string{"0.0.0.0:0", "mutual TLS", "API tokens", "gossip key", "--insecure"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not mention %q: %v", want, err)
		}
	}
	p := newTestPKI(t)
	p.secure(&cfg)
	if _, err := node.New(cfg); err != nil {
		t.Fatalf("an exposed node with TLS, tokens and a gossip key: %v", err)
	}
	cfg = meshNodeConfig(t, "open", "", "", true, nil, 1)
	cfg.GRPCAddr, cfg.Insecure = "0.0.0.0:0", true
	if _, err := node.New(cfg); err != nil {
		t.Fatalf("an exposed node with Insecure: %v", err)
	}
}

// The gossip key rotates without a restart: install K2 everywhere, make
// it primary, remove K1. Then a node with only K2 joins, one with only K1
// cannot, and a node restarted on its data directory keeps K2 (its keyring
// file wins over the K1 it is started with). Keys never come back: lists
// show fingerprints.
func TestGossipKeyRotation(t *testing.T) {
	p := newTestPKI(t)
	dataDirs := map[string]string{}
	m := startWagMeshWith(t, func(name string, cfg *node.Config) {
		p.secure(cfg)
		dataDirs[name] = cfg.DataDir
	}, "w1", "w2")
	m.waggler("")
	k1, k2 := p.key, []byte("fedcba9876543210fedcba9876543210")
	api := m.server.mesh
	keyring := func(op robonetv1.KeyringOp, key []byte) *robonetv1.KeyringResponse {
		t.Helper()
		resp, err := api.Keyring(ctxFor(t, 30*time.Second), &robonetv1.KeyringRequest{Op: op, Key: key})
		if err != nil {
			t.Fatalf("keyring %s: %v", op, err)
		}
		if len(resp.GetNodes()) != 3 {
			t.Fatalf("keyring %s answered for %d nodes, want 3: %v", op, len(resp.GetNodes()), resp.GetNodes())
		}
		for _, n := range resp.GetNodes() {
			if n.GetError() != "" {
				t.Fatalf("keyring %s on %s: %s", op, n.GetNode(), n.GetError())
			}
		}
		return resp
	}
	wantKeys := func(resp *robonetv1.KeyringResponse, keys ...[]byte) {
		t.Helper()
		var want []string
		for _, k := range keys {
			want = append(want, mesh.Fingerprint(k))
		}
		for _, n := range resp.GetNodes() {
			if strings.Join(n.GetFingerprints(), " ") != strings.Join(want, " ") {
				t.Fatalf("%s has %v, want %v", n.GetNode(), n.GetFingerprints(), want)
			}
		}
	}
	wantKeys(keyring(robonetv1.KeyringOp_KEYRING_OP_LIST, nil), k1)
	wantKeys(keyring(robonetv1.KeyringOp_KEYRING_OP_INSTALL, k2), k1, k2)
	wantKeys(keyring(robonetv1.KeyringOp_KEYRING_OP_USE, k2), k2, k1)
	wantKeys(keyring(robonetv1.KeyringOp_KEYRING_OP_REMOVE, k1), k2)
	if _, err := api.Keyring(ctxFor(t, 10*time.Second), &robonetv1.KeyringRequest{Op: robonetv1.KeyringOp_KEYRING_OP_INSTALL, Key: []byte("short")}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a 5-byte key: %v, want InvalidArgument", err)
	}

	join := []string{m.server.node.GossipAddr()}
	joins := func(name string, key []byte) error {
		cfg := wagNodeConfig(t, name, false, join, map[string]int{"work": 1}, m.marks.registry(t, name))
		p.secure(&cfg)
		cfg.GossipKey, cfg.Mesh.JoinTimeout = key, 2*time.Second
		n, err := node.New(cfg)
		if err != nil {
			return err
		}
		if err := n.Start(ctxFor(t, 30*time.Second)); err != nil {
			return err
		}
		return n.Stop(ctxFor(t, 30*time.Second))
	}
	if err := joins("late-k1", k1); err == nil {
		t.Fatal("a node with the removed key joined")
	}
	if err := joins("late-k2", k2); err != nil {
		t.Fatalf("a node with the new key: %v", err)
	}

	// A restart on the data directory keeps K2, although the node is
	// started with K1.
	w2 := m.workers["w2"]
	cfg := wagNodeConfig(t, "w2", false, join, map[string]int{"work": 2}, m.marks.registry(t, "w2"))
	p.secure(&cfg)
	cfg.DataDir = dataDirs["w2"]
	if err := w2.node.Stop(ctxFor(t, 30*time.Second)); err != nil {
		t.Fatal(err)
	}
	startNodeWith(t, cfg)
	eventually(t, 30*time.Second, "the restarted w2 back in the mesh", func() bool {
		for _, mem := range m.server.node.Members() {
			if mem.Name == "w2" && mem.Status == mesh.StatusAlive {
				return true
			}
		}
		return false
	})
}

// A node of the mesh (a valid certificate) that turns hostile on the
// Waggler streams: speaking for another node is refused, a malformed or
// oversized message closes its stream with a status naming the limit,
// and the mesh goes on running work.
func TestHostilePeerStreams(t *testing.T) {
	p := newTestPKI(t)
	m := startWagMeshWith(t, func(_ string, cfg *node.Config) { p.secure(cfg) }, "w1", "w2")
	holder := m.waggler("")
	id, err := pki.Load(p.files("evil", false))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(m.workers[holder].node.GRPCAddr(), grpc.WithTransportCredentials(credentials.NewTLS(id.ClientTLS(holder))))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	wagc := robonetv1.NewWagServiceClient(conn)
	// open sends msgs on a Work stream and returns how it ended.
	open := func(msgs ...*robonetv1.WorkRequest) error {
		t.Helper()
		stream, err := wagc.Work(ctxFor(t, 10*time.Second))
		if err != nil {
			return err
		}
		for _, msg := range msgs {
			if err := stream.Send(msg); err != nil {
				break
			}
		}
		_, err = stream.Recv()
		return err
	}
	register := func(nodeName string) *robonetv1.WorkRequest {
		return &robonetv1.WorkRequest{Msg: &robonetv1.WorkRequest_Register{Register: &robonetv1.WorkRegister{
			Node: nodeName, Capability: "work", Epoch: 1, Workers: []string{nodeName + "/work/1"}}}}
	}
	for _, c := range []struct {
		name string
		msgs []*robonetv1.WorkRequest
		code codes.Code
		says string
	}{
		{"speaking for another node", []*robonetv1.WorkRequest{register("w2")}, codes.PermissionDenied, "speaks for w2"},
		{"a malformed attempt key", []*robonetv1.WorkRequest{{Msg: &robonetv1.WorkRequest_Register{Register: &robonetv1.WorkRegister{
			Node: "evil", Capability: "work", Running: []*robonetv1.RunningAttempt{{Assignment: &robonetv1.Assignment{
				Dispatch: &robonetv1.Dispatch{Key: &robonetv1.AttemptKey{InstanceId: "not-a-uuid", ExecutionId: "x"}}}}}}}}},
			codes.InvalidArgument, "not a UUID"},
		{"an oversized worker id", []*robonetv1.WorkRequest{{Msg: &robonetv1.WorkRequest_Register{Register: &robonetv1.WorkRegister{
			Node: "evil", Capability: "work", Workers: []string{strings.Repeat("w", 1000)}}}}}, codes.ResourceExhausted, "the limit is 256"},
		// A certificate is not enough: a node the mesh has no hash-chain
		// anchor of (it never joined) cannot open a stream.
		{"a stranger to the mesh", []*robonetv1.WorkRequest{register("evil")}, codes.Unavailable, "hash-chain anchor of node evil is not known"},
	} {
		err := open(c.msgs...)
		if status.Code(err) != c.code || !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v, want %s saying %q", c.name, err, c.code, c.says)
		}
	}
	// The mesh goes on.
	wid := submitSpec(t, m.server.api, markSpec, `{"n": 2}`)
	close(m.marks.release)
	wantState(t, waitDone(t, m.server.api, wid, 30*time.Second), robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
}
