package remote

import (
	"context"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/robonet/robonet/engine/port"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/sentinel"
	"github.com/robonet/robonet/wag"
)

// observedTrust is a wag.Trust that signals the misbehaviour it is told
// of on bad.
type observedTrust struct {
	bad chan string
}

func (*observedTrust) Allowance(string) int        { return math.MaxInt }
func (*observedTrust) Rank(string) int             { return 3 }
func (*observedTrust) Quarantined(map[string]bool) {}

func (o *observedTrust) Observe(ob sentinel.Observation) {
	if ob.Kind == sentinel.Misbehaved && o.bad != nil {
		o.bad <- ob.Node
	}
}

// wagglerOfC serves a Waggler host holding the role of "c" at epoch 1,
// its Wagglers telling tr what they see; it returns a client of it and
// the leader's session.
func wagglerOfC(t *testing.T, tr wag.Trust) (robonetv1.WagServiceClient, *LeadLink) {
	t.Helper()
	log := zaptest.NewLogger(t)
	host, err := wag.NewWagglerHost(wag.Config{NodeName: "h", Logger: log, Trust: tr})
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Stop(context.Background()) })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	robonetv1.RegisterWagServiceServer(gs, NewServer(host, log, ServerOptions{}))
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	client := robonetv1.NewWagServiceClient(cc)
	l, err := OpenLead(t.Context(), client, wag.Owner{Term: 1}, "leader", "h", nopUplink{}, log, LeadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if err := l.SetRoles(map[string]uint64{"c": 1}, nil); err != nil {
		t.Fatal(err)
	}
	return client, l
}

// What the node a program connects through saw it do wrong crosses the
// Work stream to the Waggler of its capability, which counts it against
// the program's subject (p/gpu), never its node.
func TestWorkStreamCarriesMisbehaviour(t *testing.T) {
	tr := &observedTrust{bad: make(chan string, 4)}
	client, l := wagglerOfC(t, tr)
	target := NewWorkTarget(client, "p", "c", 1, func() []wag.Running { return nil }, zaptest.NewLogger(t), "h", WorkOptions{})
	t.Cleanup(func() { target.Release() })
	assigned := make(chan struct{}, 1)
	target.Register([]wag.Worker{&slot{id: "p/c/gpu-1", run: func(wag.Assignment) { assigned <- struct{}{} }}}, nil)
	// An attempt assigned to the slot: the stream is up.
	d := port.TaskDispatch{AttemptKey: testKey, Term: 1, Capability: "c", Action: "echo"}
	if errs := l.Dispatch([]wag.Handoff{{TaskDispatch: d, Epoch: 1}}); errs != nil && errs[0] != nil {
		t.Fatal(errs[0])
	}
	select {
	case <-assigned:
	case <-time.After(30 * time.Second):
		t.Fatal("the slot got no attempt")
	}
	target.Misbehaved("p/c/gpu-1", wag.TooFast)
	select {
	case subject := <-tr.bad:
		if subject != "p/gpu" {
			t.Fatalf("misbehaviour counted against %s, want p/gpu", subject)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the Waggler was not told")
	}
}

// A pool names its own node's workers only: a registration naming
// another node's (or another capability's) is a violation.
func TestWorkStreamNamesItsOwnWorkers(t *testing.T) {
	client, _ := wagglerOfC(t, &observedTrust{})
	for _, ids := range [][]string{{"q/c/gpu-1"}, {"p/d/1"}, {"p/c/"}} {
		stream, err := client.Work(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if err := stream.Send(&robonetv1.WorkRequest{Msg: &robonetv1.WorkRequest_Register{Register: &robonetv1.WorkRegister{
			Node: "p", Capability: "c", Epoch: 1, Workers: ids}}}); err != nil {
			t.Fatal(err)
		}
		_, err = stream.Recv()
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "a pool's workers are named p/c/SLOT") {
			t.Errorf("registering %v as p: %v, want INVALID_ARGUMENT", ids, err)
		}
	}
}
