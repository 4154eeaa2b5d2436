package e2e_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/internal/connect"
	"github.com/robonet/robonet/node"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag/worker"
)

// Who may serve a capability (issue 38): worker programs through the real
// API of a node whose tokens come from a token file.

// The tokens of programNode's file.
const (
	submitToken = "submit-token-0123456789abcdef"
	workerToken = "worker-token-0123456789abcdef" // gpu-box: role worker, capabilities text
	adminToken  = "admin-token-0123456789abcdef"
)

// textSpec spreads n "summarize" tasks over the capability text, which
// the node does not serve itself: only worker programs do.
const textSpec = `
name: texts
version: 1
inputs:
  n: {type: int}
tasks:
  s:
    spread: ${{ lists.range(inputs.n) }}
    capability: text
    action: summarize
    with: {i: "${{ item }}"}
`

// programNode is one node (named e2e, serving core only) whose API takes
// the tokens of a token file, and an admin's connection to it.
type programNode struct {
	*testNode
	api  robonetv1.WorkflowServiceClient // as the admin
	mesh robonetv1.MeshServiceClient     // as the admin
}

func startProgramNode(t *testing.T, adjust func(*node.Config)) *programNode {
	t.Helper()
	file := filepath.Join(t.TempDir(), "api-tokens")
	tokens := submitToken + " name=cli role=submit\n" +
		workerToken + " name=gpu-box role=worker capabilities=text\n" +
		adminToken + " name=ops role=admin\n"
	if err := os.WriteFile(file, []byte(tokens), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t, sqliteStore)
	cfg.APITokenFile = file
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.Capabilities = map[string]int{"core": 2}
	if adjust != nil {
		adjust(&cfg)
	}
	n := startNodeWith(t, cfg)
	admin := n.dial(t, adminToken)
	eventually(t, 30*time.Second, "an engine leader", func() bool { return n.node.Term() > 0 })
	return &programNode{testNode: n, api: robonetv1.NewWorkflowServiceClient(admin), mesh: robonetv1.NewMeshServiceClient(admin)}
}

// dial connects to the node with token.
func (n *testNode) dial(t *testing.T, token string) *grpc.ClientConn {
	t.Helper()
	return dialAs(t, n.node.GRPCAddr(), connect.Credentials{Token: token})
}

// serveProgram runs p on cc until the test ends. It returns nil once the
// node welcomed it, or the error Run ended with before that.
func serveProgram(t *testing.T, p *worker.Program, cc grpc.ClientConnInterface) error {
	t.Helper()
	connected := make(chan struct{}, 1)
	p.OnConnect = func(string) {
		select {
		case connected <- struct{}{}:
		default:
		}
	}
	if p.Logger == nil {
		p.Logger = zaptest.NewLogger(t).Named(p.Name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, cc) }()
	select {
	case <-connected:
	case err := <-done:
		cancel()
		return err
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatalf("program %s neither connected nor was refused", p.Name)
	}
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return nil
}

// gate is the action of a program whose attempts run until the test
// releases them; it keeps how many run at once against how many had
// completed when each started.
type gate struct {
	mu        sync.Mutex
	wave      chan struct{} // closed to release the attempts running now
	running   int
	completed int
	cancelled int
	started   chan struct{} // a value per start
	// overrun lists the starts at which more ran than the program had
	// earned: 1 + completed.
	overrun []string
}

func newGate() *gate { return &gate{wave: make(chan struct{}), started: make(chan struct{}, 64)} }

func (g *gate) handler(ctx context.Context, job *worker.Job) (any, error) {
	g.mu.Lock()
	g.running++
	if g.running > 1+g.completed {
		g.overrun = append(g.overrun, fmt.Sprintf("%d running after %d completed", g.running, g.completed))
	}
	wave := g.wave
	g.mu.Unlock()
	g.started <- struct{}{}
	select {
	case <-wave:
	case <-ctx.Done():
		g.mu.Lock()
		g.running--
		g.cancelled++
		g.mu.Unlock()
		return nil, ctx.Err()
	}
	g.mu.Lock()
	g.running--
	g.completed++
	g.mu.Unlock()
	return map[string]any{"task": job.Task, "index": job.Index}, nil
}

// release lets the attempts running now finish.
func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	close(g.wave)
	g.wave = make(chan struct{})
}

func (g *gate) counts() (running, completed, cancelled int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.running, g.completed, g.cancelled
}

// textProgram is program gpu-box serving text with the given actions, each
// run by g.
func textProgram(capability string, g *gate, slots int, actions ...string) *worker.Program {
	hs := map[string]worker.Handler{}
	for _, a := range actions {
		hs[a] = g.handler
	}
	return &worker.Program{Name: "gpu-box", Capability: capability, Slots: slots, Handlers: hs}
}

// A worker program needs a worker token scoped to its capability: a
// submit token is refused; a worker token scoped to text serves text with
// an action of its own, but not code.exec, nor the built-in exec. An
// operator quarantines the program as NODE/TOKEN, e2e/gpu-box: what it runs
// moves off it and it gets nothing until released.
func TestWorkerProgramTokens(t *testing.T) {
	n := startProgramNode(t, nil)
	g := newGate()
	for _, c := range []struct {
		name, token, capability string
		actions                 []string
		says                    []string
	}{
		{"a submit token", submitToken, "text", []string{"summarize"}, []string{"role worker", "cli has role submit"}},
		{"another capability", workerToken, "code.exec", []string{"summarize"}, []string{"token gpu-box", "capabilities text", "not code.exec"}},
		{"a built-in action", workerToken, "text", []string{"summarize", "exec"}, []string{"action exec", "built-in", "--allow-worker-builtins exec"}},
	} {
		err := serveProgram(t, textProgram(c.capability, g, 2, c.actions...), n.dial(t, c.token))
		if !errors.Is(err, worker.ErrRejected) || status.Code(err) != codes.PermissionDenied {
			t.Fatalf("%s: Run = %v, want ErrRejected with PERMISSION_DENIED", c.name, err)
		}
		for _, w := range c.says {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", c.name, err, w)
			}
		}
	}

	if err := serveProgram(t, textProgram("text", g, 2, "summarize"), n.dial(t, workerToken)); err != nil {
		t.Fatalf("a worker token on its own capability with its own action: %v", err)
	}
	id := submitSpec(t, n.api, textSpec, `{"n": 1}`)
	<-g.started
	g.release()
	wantState(t, waitDone(t, n.api, id, 30*time.Second), robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)

	// roboctl quarantine add e2e/gpu-box, while it runs an attempt.
	id = submitSpec(t, n.api, textSpec, `{"n": 1}`)
	<-g.started
	if _, err := n.mesh.Quarantine(ctxFor(t, 10*time.Second), &robonetv1.QuarantineRequest{
		Op: robonetv1.QuarantineOp_QUARANTINE_OP_ADD, Node: "e2e/gpu-box", Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the quarantined program's attempt cancelled on it", func() bool {
		_, _, cancelled := g.counts()
		return cancelled == 1
	})
	eventually(t, 30*time.Second, "the attempt queued, given to nobody", func() bool {
		w := wagglerOf(t, n.mesh, "text")
		return w.GetQueued() == 1 && w.GetInFlight() == 0
	})
	if _, err := n.mesh.Quarantine(ctxFor(t, 10*time.Second), &robonetv1.QuarantineRequest{
		Op: robonetv1.QuarantineOp_QUARANTINE_OP_RELEASE, Node: "e2e/gpu-box"}); err != nil {
		t.Fatal(err)
	}
	<-g.started // released: it runs the attempt again
	g.release()
	wantState(t, waitDone(t, n.api, id, 30*time.Second), robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)

	if _, err := n.mesh.Quarantine(ctxFor(t, 10*time.Second), &robonetv1.QuarantineRequest{
		Op: robonetv1.QuarantineOp_QUARANTINE_OP_ADD, Node: "e2e/a/b"}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("quarantine e2e/a/b: %v, want INVALID_ARGUMENT", err)
	}
}

// wagglerOf is the Waggler role of capability as the node lists it.
func wagglerOf(t *testing.T, mc robonetv1.MeshServiceClient, capability string) *robonetv1.WagglerRole {
	t.Helper()
	resp, err := mc.ListWagglers(ctxFor(t, 10*time.Second), &robonetv1.ListWagglersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range resp.GetWagglers() {
		if w.GetCapability() == capability {
			return w
		}
	}
	return nil
}

// trustOf is the leader's trust in subject, nil if it has none.
func trustOf(t *testing.T, mc robonetv1.MeshServiceClient, subject string) *robonetv1.NodeTrust {
	t.Helper()
	resp, err := mc.ListTrust(ctxFor(t, 10*time.Second), &robonetv1.ListTrustRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range resp.GetNodes() {
		if n.GetNode() == subject {
			return n
		}
	}
	return nil
}

// A new worker program is on probation, whatever its node's trust (here
// the node it connects to trusts itself): with eight slots and twelve
// attempts waiting, it runs one at a time, then one more per attempt it
// completed — never more than it earned — until it runs as many as its
// slots. Its trust is its own, NODE/PROGRAM, in roboctl trust.
func TestWorkerProgramProbation(t *testing.T) {
	n := startProgramNode(t, nil)
	g := newGate()
	if err := serveProgram(t, textProgram("text", g, 8, "summarize"), n.dial(t, workerToken)); err != nil {
		t.Fatal(err)
	}
	id := submitSpec(t, n.api, textSpec, `{"n": 12}`)
	eventually(t, 30*time.Second, "the twelve attempts held by the waggler of text", func() bool {
		w := wagglerOf(t, n.mesh, "text")
		return w.GetQueued()+w.GetInFlight() == 12
	})
	var waves []int
	for done := 0; done < 12; {
		want := min(1+done, 8, 12-done)
		eventually(t, 30*time.Second, fmt.Sprintf("%d attempts at once after %d completed", want, done), func() bool {
			running, _, _ := g.counts()
			return running == want
		})
		waves = append(waves, want)
		g.release()
		done += want
		eventually(t, 30*time.Second, fmt.Sprintf("%d completed", done), func() bool {
			_, completed, _ := g.counts()
			return completed == done
		})
	}
	wantState(t, waitDone(t, n.api, id, 30*time.Second), robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	g.mu.Lock()
	overrun := g.overrun
	g.mu.Unlock()
	if len(overrun) > 0 {
		t.Fatalf("the program ran more than it had earned: %v", overrun)
	}
	if fmt.Sprint(waves) != "[1 2 4 5]" {
		t.Errorf("ran %v at once, want [1 2 4 5]", waves)
	}
	var tr *robonetv1.NodeTrust
	eventually(t, 10*time.Second, "the program's trust, apart from its node's", func() bool {
		tr = trustOf(t, n.mesh, "e2e/gpu-box")
		return tr != nil && tr.GetEvidence()["task_completed"] == 12
	})
	if tr.GetTier() != "provisional" || tr.GetSelf() || tr.GetPretrusted() {
		t.Errorf("trust in e2e/gpu-box: %v, want provisional after 12 completions", tr)
	}
}

// An operator may vouch for a node's programs (--trust-peer e2e/*): no
// probation then.
func TestWorkerProgramVouchedFor(t *testing.T) {
	n := startProgramNode(t, func(cfg *node.Config) { cfg.TrustPeers = []string{"e2e/*"} })
	g := newGate()
	if err := serveProgram(t, textProgram("text", g, 8, "summarize"), n.dial(t, workerToken)); err != nil {
		t.Fatal(err)
	}
	id := submitSpec(t, n.api, textSpec, `{"n": 8}`)
	eventually(t, 30*time.Second, "eight attempts at once", func() bool {
		running, _, _ := g.counts()
		return running == 8
	})
	g.release()
	wantState(t, waitDone(t, n.api, id, 30*time.Second), robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
}

// What only the node sees a program do wrong is misbehaviour: an answer
// sooner than the floor (--worker-min-runtime, an hour here: every answer
// is too fast; the answer is taken all the same), an answer to an attempt
// it was never given, a second answer. Each is counted on the node
// (robonet_worker_program_misbehaviour_total) and against the program's
// own trust — as its token, e2e/gpu-box, whatever name it gives; three in
// the window and the Sentinel quarantines it. Connecting under another
// name with the same token does not get it out.
func TestWorkerProgramMisbehaviour(t *testing.T) {
	n := startProgramNode(t, func(cfg *node.Config) { cfg.WorkerMinRuntime = time.Hour })
	p := startRawProgramOn(t, n.dial(t, workerToken), &robonetv1.WorkerHello{Name: "raw", Capability: "text", Actions: []string{"summarize"}, Slots: 1})
	eventually(t, 30*time.Second, "a waggler of text with the program's worker", func() bool {
		w := wagglerOf(t, n.mesh, "text")
		return w.GetNode() == "e2e" && w.GetWorkers() == 1
	})
	id := submitSpec(t, n.api, textSpec, `{"n": 1}`)
	msg, err := p.stream.Recv()
	if err != nil || msg.GetRun() == nil {
		t.Fatalf("got %v, %v; want a WorkerRun", msg, err)
	}
	answer := func(attempt string) {
		p.send(t, &robonetv1.ServeRequest{Msg: &robonetv1.ServeRequest_Done{Done: &robonetv1.WorkerDone{
			Slot: 1, AttemptId: attempt, Ok: true, OutputJson: []byte(`{"made": "up"}`)}}})
	}
	answer(msg.GetRun().GetAttemptId())
	wantState(t, waitDone(t, n.api, id, 30*time.Second), robonetv1.InstanceState_INSTANCE_STATE_COMPLETE)
	answer("4242")
	answer(msg.GetRun().GetAttemptId())

	eventually(t, 10*time.Second, "the misbehaviour counted on the node", func() bool {
		m := scrapeMetrics(t, n.testNode)
		return strings.Contains(m, "\nrobonet_worker_program_misbehaviour_total{kind=\"too_fast\"} 1\n") &&
			strings.Contains(m, "\nrobonet_worker_program_misbehaviour_total{kind=\"unsolicited\"} 2\n")
	})
	eventually(t, 30*time.Second, "the Sentinel's quarantine of e2e/gpu-box", func() bool {
		resp, err := n.mesh.Quarantine(ctxFor(t, 10*time.Second), &robonetv1.QuarantineRequest{Op: robonetv1.QuarantineOp_QUARANTINE_OP_LIST})
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range resp.GetNodes() {
			if q.GetNode() == "e2e/gpu-box" {
				if q.GetManual() || !strings.Contains(q.GetReason(), "never given") {
					t.Fatalf("quarantine %v, want the Sentinel's naming the misbehaviour", q)
				}
				return true
			}
		}
		return false
	})
	tr := trustOf(t, n.mesh, "e2e/gpu-box")
	if tr == nil || tr.GetEvidence()["misbehaviour"] != 3 || tr.GetBad() < 29 {
		t.Fatalf("trust in e2e/gpu-box: %v, want 3 misbehaviours against it", tr)
	}
	if self := trustOf(t, n.mesh, "e2e"); self != nil && self.GetEvidence()["misbehaviour"] != 0 {
		t.Errorf("the node is blamed for its program: %v", self)
	}

	// Quarantined: a new attempt waits; the same token under another name
	// is the same subject and gets nothing either (once its worker is
	// registered, the Waggler has placed what it may).
	id = submitSpec(t, n.api, textSpec, `{"n": 1}`)
	eventually(t, 30*time.Second, "the attempt waiting", func() bool {
		w := wagglerOf(t, n.mesh, "text")
		return w.GetQueued() == 1 && w.GetInFlight() == 0
	})
	g := newGate()
	renamed := textProgram("text", g, 1, "summarize")
	renamed.Name = "innocent"
	if err := serveProgram(t, renamed, n.dial(t, workerToken)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the renamed program's worker registered", func() bool {
		return wagglerOf(t, n.mesh, "text").GetWorkers() == 2
	})
	if w := wagglerOf(t, n.mesh, "text"); w.GetQueued() != 1 || w.GetInFlight() != 0 {
		t.Fatalf("waggler of text %v: the renamed program was given the attempt", w)
	}
	if in := waitDoneOrNot(t, n.api, id); in != nil {
		t.Fatalf("the attempt ran: %v", in)
	}
}

// waitDoneOrNot returns instance id if it finished, nil while it runs.
func waitDoneOrNot(t *testing.T, api robonetv1.WorkflowServiceClient, id string) *robonetv1.Instance {
	t.Helper()
	resp, err := api.GetInstance(ctxFor(t, 10*time.Second), &robonetv1.GetInstanceRequest{InstanceId: id})
	if err != nil {
		t.Fatal(err)
	}
	if st := resp.GetInstance().GetState(); st == robonetv1.InstanceState_INSTANCE_STATE_COMPLETE || st == robonetv1.InstanceState_INSTANCE_STATE_FAILED {
		return resp.GetInstance()
	}
	return nil
}
