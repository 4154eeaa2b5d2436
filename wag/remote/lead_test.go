package remote

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"

	"go.uber.org/zap/zaptest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/robonet/robonet/engine/port"
	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
	"github.com/robonet/robonet/wag"
)

type nopUplink struct{}

func (nopUplink) Results([]wag.SeqResult) error { return nil }
func (nopUplink) Progress([]port.TaskProgress)  {}
func (nopUplink) Started([]wag.Started)         {}

// A leader hands a Waggler host more attempts than one message may carry:
// LeadLink splits them into requests the host accepts, so the session
// survives and each attempt gets its own answer (taken, or busy beyond the
// host's queue). Regression: one LeadDispatch of 49,000 handoffs was
// refused as a violation and sent again forever.
func TestLeadDispatchLargerThanOneMessage(t *testing.T) {
	host, err := wag.NewWagglerHost(wag.Config{NodeName: "h", Logger: zaptest.NewLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Stop(context.Background()) })
	var (
		mu         sync.Mutex
		violations []string
	)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	robonetv1.RegisterWagServiceServer(gs, NewServer(host, zaptest.NewLogger(t), ServerOptions{OnViolation: func(peer, what string) {
		mu.Lock()
		defer mu.Unlock()
		violations = append(violations, what)
	}}))
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	cc, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	l, err := OpenLead(t.Context(), robonetv1.NewWagServiceClient(cc), wag.Owner{Term: 1}, "leader", "h", nopUplink{}, zaptest.NewLogger(t), LeadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	if err := l.SetRoles(map[string]uint64{"c": 1}, nil); err != nil {
		t.Fatal(err)
	}
	n := MaxBatchItems + 5000
	hs := make([]wag.Handoff, n)
	for i := range hs {
		k := testKey
		k.ExecutionID = fmt.Sprintf("s[%d]", i)
		hs[i] = wag.Handoff{TaskDispatch: port.TaskDispatch{AttemptKey: k, Term: 1, Capability: "c", Action: "echo"}, Epoch: 1}
	}
	taken := 0
	for i, err := range pad(l.Dispatch(hs), n) {
		switch {
		case err == nil:
			taken++
		case !errors.Is(err, wag.ErrBusy):
			t.Fatalf("handoff %d: %v (the session broke?)", i, err)
		}
	}
	// The host admits a request while its queue has room; the rest are
	// busy until its workers drain it.
	if taken == 0 || taken == n {
		t.Fatalf("%d of %d handoffs taken, want some but not all (the host's queue is smaller)", taken, n)
	}
	keys := make([]port.AttemptKey, n)
	for i := range hs {
		keys[i] = hs[i].AttemptKey
	}
	if err := l.Cancel(keys); err != nil {
		t.Fatalf("cancelling %d attempts: %v", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(violations) > 0 {
		t.Fatalf("the host saw violations: %v", violations)
	}
}

func pad(errs []error, n int) []error {
	if errs == nil {
		return make([]error, n)
	}
	return errs
}

// Coalesced messages stay within MaxBatchItems.
func TestCoalesceWithinBatchLimit(t *testing.T) {
	var q []item[*robonetv1.LeadResponse]
	for range MaxBatchItems + 10 {
		q = append(q, item[*robonetv1.LeadResponse]{v: leadStarted("k")})
	}
	out := coalesce(q)
	if len(out) != 2 || batchLen(out[0].v) != MaxBatchItems || batchLen(out[1].v) != 10 {
		t.Fatalf("%d messages of %d and %d items", len(out), batchLen(out[0].v), batchLen(out[len(out)-1].v))
	}
}
