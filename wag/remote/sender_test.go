package remote

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	robonetv1 "github.com/robonet/robonet/proto/robonet/v1"
)

func assign(ids ...string) *robonetv1.WorkResponse {
	m := &robonetv1.WorkAssign{}
	for _, id := range ids {
		m.Items = append(m.Items, &robonetv1.SlotAssignment{WorkerId: id})
	}
	return &robonetv1.WorkResponse{Msg: &robonetv1.WorkResponse_Assign{Assign: m}}
}

func cancelMsg(id string) *robonetv1.WorkResponse {
	return &robonetv1.WorkResponse{Msg: &robonetv1.WorkResponse_Cancel{Cancel: &robonetv1.WorkCancel{
		Items: []*robonetv1.SlotCancel{{WorkerId: id}}}}}
}

func ack(seq uint64) *robonetv1.WorkResponse {
	return &robonetv1.WorkResponse{Msg: &robonetv1.WorkResponse_Ack{Ack: &robonetv1.WorkAck{Seq: seq}}}
}

// describe renders a message as kind(items) for comparisons.
func describe(m *robonetv1.WorkResponse) string {
	switch x := m.GetMsg().(type) {
	case *robonetv1.WorkResponse_Assign:
		var ids []string
		for _, it := range x.Assign.GetItems() {
			ids = append(ids, it.GetWorkerId())
		}
		return "assign(" + strings.Join(ids, ",") + ")"
	case *robonetv1.WorkResponse_Cancel:
		return "cancel(" + x.Cancel.GetItems()[0].GetWorkerId() + ")"
	case *robonetv1.WorkResponse_Ack:
		return "ack(" + string(rune('0'+x.Ack.GetSeq())) + ")"
	}
	return "?"
}

// Adjacent messages of one kind merge, in order; others, and those someone
// waits for, are sent as they are.
func TestCoalesce(t *testing.T) {
	waited := item[*robonetv1.WorkResponse]{v: assign("w"), done: make(chan struct{})}
	q := []item[*robonetv1.WorkResponse]{
		{v: assign("a")}, {v: assign("b", "c")}, {v: cancelMsg("x")}, {v: cancelMsg("y")},
		{v: assign("d")}, waited, {v: assign("e")}, {v: ack(5)}, {v: ack(7)}, {v: ack(6)},
	}
	var got []string
	for _, it := range coalesce(q) {
		got = append(got, describe(it.v))
	}
	// describe shows a cancel's first item: y joined x's message.
	want := "assign(a,b,c) cancel(x) assign(d) assign(w) assign(e) ack(7)"
	if strings.Join(got, " ") != want {
		t.Fatalf("coalesced\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

func leadResults(keys ...string) *robonetv1.LeadResponse {
	m := &robonetv1.LeadResults{}
	for _, k := range keys {
		m.Results = append(m.Results, &robonetv1.WagResult{Key: &robonetv1.AttemptKey{ExecutionId: k}})
	}
	return &robonetv1.LeadResponse{Msg: &robonetv1.LeadResponse_Results{Results: m}}
}

func leadStarted(keys ...string) *robonetv1.LeadResponse {
	m := &robonetv1.LeadStarted{}
	for _, k := range keys {
		m.Items = append(m.Items, &robonetv1.AttemptStarted{Key: &robonetv1.AttemptKey{ExecutionId: k}})
	}
	return &robonetv1.LeadResponse{Msg: &robonetv1.LeadResponse_Started{Started: m}}
}

func leadAnswer(id uint64) *robonetv1.LeadResponse {
	return &robonetv1.LeadResponse{Msg: &robonetv1.LeadResponse_Answer{Answer: &robonetv1.LeadAnswer{Id: id}}}
}

func describeLead(m *robonetv1.LeadResponse) string {
	var keys []string
	switch x := m.GetMsg().(type) {
	case *robonetv1.LeadResponse_Results:
		for _, r := range x.Results.GetResults() {
			keys = append(keys, r.GetKey().GetExecutionId())
		}
		return "results(" + strings.Join(keys, ",") + ")"
	case *robonetv1.LeadResponse_Started:
		for _, r := range x.Started.GetItems() {
			keys = append(keys, r.GetKey().GetExecutionId())
		}
		return "started(" + strings.Join(keys, ",") + ")"
	case *robonetv1.LeadResponse_Answer:
		return fmt.Sprintf("answer(%d)", x.Answer.GetId())
	}
	return "?"
}

// Interleaved kinds still merge, as far as order allows: a start may be
// delivered earlier than queued (past results and answers), a result never
// earlier — so no result arrives before the start queued ahead of it. A
// start whose result is queued too is not sent at all.
func TestCoalesceOvertaking(t *testing.T) {
	var q []item[*robonetv1.LeadResponse]
	for _, m := range []*robonetv1.LeadResponse{
		leadStarted("a"), leadResults("a"), leadStarted("b", "x"), leadResults("b"), leadStarted("c"),
		leadAnswer(1), leadStarted("d"), leadResults("e"),
	} {
		q = append(q, item[*robonetv1.LeadResponse]{v: m})
	}
	var got []string
	for _, it := range coalesce(q) {
		got = append(got, describeLead(it.v))
	}
	want := "results(a) started(x,c,d) results(b) answer(1) results(e)"
	if strings.Join(got, " ") != want {
		t.Fatalf("coalesced\n got %s\nwant %s", strings.Join(got, " "), want)
	}

	// From a pool: a heartbeat batch may pass reports, nothing passes a
	// registration, and reports pass nothing.
	reg := &robonetv1.WorkRequest{Msg: &robonetv1.WorkRequest_Register{Register: &robonetv1.WorkRegister{}}}
	hb := func() *robonetv1.WorkRequest {
		return &robonetv1.WorkRequest{Msg: &robonetv1.WorkRequest_Heartbeats{Heartbeats: &robonetv1.WorkHeartbeats{Items: []*robonetv1.Heartbeat{{}}}}}
	}
	rep := func() *robonetv1.WorkRequest {
		return &robonetv1.WorkRequest{Msg: &robonetv1.WorkRequest_Reports{Reports: &robonetv1.WorkReports{Items: []*robonetv1.Report{{}}}}}
	}
	var wq []item[*robonetv1.WorkRequest]
	for _, m := range []*robonetv1.WorkRequest{hb(), reg, hb(), rep(), hb(), rep(), hb()} {
		wq = append(wq, item[*robonetv1.WorkRequest]{v: m})
	}
	got = got[:0]
	for _, it := range coalesce(wq) {
		switch x := it.v.GetMsg().(type) {
		case *robonetv1.WorkRequest_Register:
			got = append(got, "register")
		case *robonetv1.WorkRequest_Heartbeats:
			got = append(got, fmt.Sprintf("heartbeats×%d", len(x.Heartbeats.GetItems())))
		case *robonetv1.WorkRequest_Reports:
			got = append(got, fmt.Sprintf("reports×%d", len(x.Reports.GetItems())))
		}
	}
	want = "heartbeats×1 register heartbeats×3 reports×2"
	if strings.Join(got, " ") != want {
		t.Fatalf("coalesced pool messages\n got %s\nwant %s", strings.Join(got, " "), want)
	}
}

// A start whose result is queued behind it is dropped, whole messages of
// them too; a start someone waits for, or of another attempt of the same
// task, stays.
func TestCoalesceDropsAnsweredStarts(t *testing.T) {
	waited := item[*robonetv1.LeadResponse]{v: leadStarted("w"), done: make(chan struct{})}
	retry := leadStarted("r")
	retry.GetStarted().Items[0].Key.Attempt = 2
	q := []item[*robonetv1.LeadResponse]{
		{v: leadStarted("a", "b")}, {v: leadStarted("c")}, waited, {v: retry},
		{v: leadResults("a", "c", "w", "r")}, {v: leadStarted("d")},
	}
	var got []string
	for _, it := range coalesce(q) {
		got = append(got, describeLead(it.v))
	}
	// b and the waited-for w are kept (w unmerged), r's attempt 2 has no
	// result; d has none either.
	if want := "started(b,r,d) started(w) results(a,c,w,r)"; strings.Join(got, " ") != want {
		t.Fatalf("coalesced\n got %s\nwant %s", strings.Join(got, " "), want)
	}
	// Other streams' queues are left alone.
	wq := []item[*robonetv1.WorkResponse]{{v: assign("a")}, {v: assign("b")}}
	if out := dropAnswered(wq); len(out) != 2 {
		t.Fatalf("a pool's queue lost messages: %d left", len(out))
	}
}

// A coalesced message stays under maxCoalesced.
func TestCoalesceBounded(t *testing.T) {
	big := strings.Repeat("x", maxCoalesced/3)
	var q []item[*robonetv1.WorkResponse]
	for range 6 {
		q = append(q, item[*robonetv1.WorkResponse]{v: assign(big)})
	}
	out := coalesce(q)
	if len(out) != 3 {
		t.Fatalf("%d messages, want 3 (two per message under the bound)", len(out))
	}
}

// The sender sends in order and pushAndWait returns once its message went
// out.
func TestSenderOrderAndWait(t *testing.T) {
	var mu sync.Mutex
	var sent []string
	s := newSender(func(m *robonetv1.WorkResponse) error {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, describe(m))
		return nil
	}, zap.NewNop())
	defer s.close()
	for _, id := range []string{"a", "b", "c"} {
		if err := s.push(assign(id)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.pushAndWait(context.Background(), ack(9)); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	all := strings.Join(sent, " ")
	if !strings.HasSuffix(all, "ack(9)") {
		t.Fatalf("sent %q", all)
	}
	var ids string
	for _, m := range sent {
		if strings.HasPrefix(m, "assign(") {
			ids += strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(m, "assign("), ")"), ",", "")
		}
	}
	if ids != "abc" {
		t.Fatalf("assignments sent as %q, want in order abc", ids)
	}
}

// A message gRPC cannot encode, or too large to send, ends the stream like
// any send error, but is logged as the bug or misconfiguration it is; a
// broken stream is not.
func TestSenderSaysWhenAMessageCannotBeEncoded(t *testing.T) {
	for _, c := range []struct {
		err    error
		logged bool
	}{
		{status.Error(codes.Internal, "grpc: error while marshaling: string field contains invalid UTF-8"), true},
		{status.Error(codes.ResourceExhausted, "trying to send message larger than max (17825792 vs. 16777216)"), true},
		{status.Error(codes.Unavailable, "transport is closing"), false},
	} {
		core, logs := observer.New(zap.ErrorLevel)
		s := newSender(func(*robonetv1.WorkResponse) error { return c.err }, zap.New(core))
		if err := s.pushAndWait(context.Background(), ack(1)); !errors.Is(err, c.err) {
			t.Errorf("%v: pushAndWait returned %v", c.err, err)
		}
		<-s.done // the goroutine stops at the error
		if err := s.push(ack(2)); !errors.Is(err, c.err) {
			t.Errorf("%v: a push after the error returned %v", c.err, err)
		}
		if got := logs.FilterMessageSnippet("cannot be sent").Len(); (got == 1) != c.logged {
			t.Errorf("%v: %d errors logged, want logged: %v", c.err, got, c.logged)
		}
		s.close()
	}
}

// BenchmarkSenderProducers has many goroutines report results into one
// stream, as a busy Waggler host's slots do: each takes a task from a
// channel, encodes its result and pushes it; the stream's send encodes the
// message, as gRPC does. It reports the messages sent per result: what
// coalescing saves the stream, its peer and the syscalls between them.
func BenchmarkSenderProducers(b *testing.B) {
	const (
		producers = 32
		work      = 10 // encodings a result costs its producer
	)
	var msgs atomic.Int64
	s := newSender(func(m *robonetv1.LeadResponse) error {
		msgs.Add(1)
		_, err := proto.Marshal(m)
		return err
	}, zap.NewNop())
	defer s.close()
	tasks := make(chan int, producers)
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for i := range tasks {
				m := leadResults(fmt.Sprintf("execution-%d", i))
				for range work {
					if _, err := proto.Marshal(m); err != nil {
						b.Error(err)
					}
				}
				if err := s.push(m); err != nil {
					b.Error(err)
				}
			}
		})
	}
	b.ResetTimer()
	for i := range b.N {
		tasks <- i
	}
	close(tasks)
	wg.Wait()
	if err := s.pushAndWait(context.Background(), leadAnswer(1)); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(msgs.Load()-1)/float64(b.N), "msgs/result")
}
