package wag

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
)

// fakeNext records what a Tally sends to the Router.
type fakeNext struct {
	mu         sync.Mutex
	dispatched []port.TaskDispatch
	cancelled  []port.AttemptKey
	refuse     map[string]error // by execution id
}

func (f *fakeNext) Nodes(string) []string { return []string{"n1", "n2"} }

func (f *fakeNext) Dispatch(_ context.Context, ds []port.TaskDispatch) []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var errs []error
	for i, d := range ds {
		if err := f.refuse[d.ExecutionID]; err != nil {
			if errs == nil {
				errs = make([]error, len(ds))
			}
			errs[i] = err
			continue
		}
		f.dispatched = append(f.dispatched, d)
	}
	return errs
}

func (f *fakeNext) Cancel(_ context.Context, _ uint64, keys []port.AttemptKey) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = append(f.cancelled, keys...)
	return nil
}

// fakeSink records what the Tally reports to the engine.
type fakeSink struct {
	mu       sync.Mutex
	results  []port.TaskResult
	progress []port.TaskProgress
}

func (s *fakeSink) TaskResult(_ context.Context, r port.TaskResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results = append(s.results, r)
}

func (s *fakeSink) TaskProgress(_ context.Context, p port.TaskProgress) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.progress = append(s.progress, p)
}

type verifyRig struct {
	v     *Tally
	next  *fakeNext
	sink  *fakeSink
	votes map[string]bool
}

func newVerifyRig() *verifyRig {
	r := &verifyRig{next: &fakeNext{}, sink: &fakeSink{}, votes: map[string]bool{}}
	r.v = NewTally(TallyConfig{Sink: r.sink, Outcome: func(node string, agreed bool) { r.votes[node] = agreed }})
	r.v.SetNext(r.next)
	return r
}

var verifiedKey = port.AttemptKey{InstanceID: uuid.MustParse("0b0e8c61-6c8f-4b4a-9f1c-2a9d9d9d0001"), ExecutionID: "check[0]", Attempt: 1}

func verified(n int) port.TaskDispatch {
	return port.TaskDispatch{AttemptKey: verifiedKey, Term: 4, Task: "check", Capability: "c", Action: "a", Verify: n}
}

// ran reports run i finishing on node with output (nil: failed).
func (r *verifyRig) ran(i int, node string, output any) {
	res := port.TaskResult{AttemptKey: runKey(verifiedKey, i), OK: output != nil, Output: output, WorkerID: node + "/c/1"}
	if output == nil {
		res.Error = "exit status 1 on " + node // texts differ between hosts
	}
	r.v.TaskResult(context.Background(), res)
}

func (r *verifyRig) only(t *testing.T) port.TaskResult {
	t.Helper()
	if len(r.sink.results) != 1 {
		t.Fatalf("%d results reached the engine, want 1: %+v", len(r.sink.results), r.sink.results)
	}
	return r.sink.results[0]
}

func TestVerifyTwoAgree(t *testing.T) {
	r := newVerifyRig()
	if errs := r.v.Dispatch(context.Background(), []port.TaskDispatch{verified(2)}); errs != nil {
		t.Fatal(errs)
	}
	if len(r.next.dispatched) != 2 {
		t.Fatalf("%d runs dispatched, want 2", len(r.next.dispatched))
	}
	for i, d := range r.next.dispatched {
		if d.ExecutionID != runKey(verifiedKey, i+1).ExecutionID || d.Group != verifiedKey.IdempotencyKey() || d.Verify != 0 || d.Term != 4 {
			t.Fatalf("run %d: %+v", i+1, d)
		}
	}
	r.ran(1, "n1", map[string]any{"sum": int64(7)})
	if len(r.sink.results) != 0 {
		t.Fatal("a result before both runs agreed")
	}
	r.ran(2, "n2", map[string]any{"sum": int64(7)})
	res := r.only(t)
	if res.AttemptKey != verifiedKey || !res.OK || res.WorkerID != "n1/c/1" {
		t.Fatalf("result %+v", res)
	}
	if !r.votes["n1"] || !r.votes["n2"] || len(r.votes) != 2 {
		t.Fatalf("votes %v", r.votes)
	}
}

// Two that disagree: a third run, off both nodes, breaks the tie; the
// outvoted node is reported.
func TestVerifyTieBreak(t *testing.T) {
	r := newVerifyRig()
	r.v.Dispatch(context.Background(), []port.TaskDispatch{verified(2)})
	r.ran(1, "n1", "honest")
	r.ran(2, "liar", "forged")
	if len(r.sink.results) != 0 || len(r.next.dispatched) != 3 {
		t.Fatalf("after a disagreement: %d results, %d runs dispatched", len(r.sink.results), len(r.next.dispatched))
	}
	third := r.next.dispatched[2]
	if !slices.Equal(third.Avoid, []string{"n1", "liar"}) || third.Group != verifiedKey.IdempotencyKey() {
		t.Fatalf("the third run: avoid %v group %q", third.Avoid, third.Group)
	}
	r.ran(3, "n3", "honest")
	if res := r.only(t); !res.OK || res.Output != "honest" {
		t.Fatalf("result %+v, want the majority's output", res)
	}
	if !r.votes["n1"] || r.votes["liar"] || !r.votes["n3"] {
		t.Fatalf("votes %v: the liar must be outvoted", r.votes)
	}
}

func TestVerifyNoMajority(t *testing.T) {
	r := newVerifyRig()
	r.v.Dispatch(context.Background(), []port.TaskDispatch{verified(2)})
	r.ran(1, "n1", "a")
	r.ran(2, "n2", "b")
	r.ran(3, "n3", "c")
	if res := r.only(t); res.OK || !strings.Contains(res.Error, "3 different outcomes") {
		t.Fatalf("result %+v", res)
	}
	if len(r.votes) != 0 {
		t.Fatalf("no majority, yet votes %v", r.votes)
	}
}

// With verify 3, two that agree decide at once; the third is cancelled.
// Failures agree with failures whatever their texts.
func TestVerifyThreeEarlyMajority(t *testing.T) {
	r := newVerifyRig()
	r.v.Dispatch(context.Background(), []port.TaskDispatch{verified(3)})
	r.ran(2, "n2", nil)
	r.ran(3, "n3", nil)
	if res := r.only(t); res.OK || res.AttemptKey != verifiedKey {
		t.Fatalf("result %+v, want the agreed failure", res)
	}
	if !slices.Equal(r.next.cancelled, []port.AttemptKey{runKey(verifiedKey, 1)}) {
		t.Fatalf("cancelled %v, want the first run", r.next.cancelled)
	}
	r.ran(1, "n1", "late") // a cancelled run reporting anyway: not the attempt's result
	if len(r.sink.results) != 2 || r.sink.results[1].AttemptKey != runKey(verifiedKey, 1) {
		t.Fatalf("a late run's result: %+v", r.sink.results)
	}
}

// A lost run ends the attempt without a verdict; its siblings are
// cancelled and nobody is judged.
func TestVerifyLostRun(t *testing.T) {
	r := newVerifyRig()
	r.v.Dispatch(context.Background(), []port.TaskDispatch{verified(2)})
	r.v.TaskResult(context.Background(), port.TaskResult{AttemptKey: runKey(verifiedKey, 1), Lost: true, Error: "no waggler"})
	if res := r.only(t); !res.Lost || res.AttemptKey != verifiedKey {
		t.Fatalf("result %+v, want the attempt lost", res)
	}
	if !slices.Equal(r.next.cancelled, []port.AttemptKey{runKey(verifiedKey, 2)}) || len(r.votes) != 0 {
		t.Fatalf("cancelled %v votes %v", r.next.cancelled, r.votes)
	}
}

// A run refused at dispatch refuses the attempt (the engine offers it
// again) and cancels the runs that were accepted.
func TestVerifyDispatchRefused(t *testing.T) {
	r := newVerifyRig()
	busy := errors.New("busy")
	r.next.refuse = map[string]error{runKey(verifiedKey, 2).ExecutionID: busy}
	plain := port.TaskDispatch{AttemptKey: port.AttemptKey{InstanceID: verifiedKey.InstanceID, ExecutionID: "other", Attempt: 1}, Term: 4}
	errs := r.v.Dispatch(context.Background(), []port.TaskDispatch{plain, verified(2)})
	if len(errs) != 2 || errs[0] != nil || !errors.Is(errs[1], busy) {
		t.Fatalf("errors %v", errs)
	}
	if !slices.Equal(r.next.cancelled, []port.AttemptKey{runKey(verifiedKey, 1)}) {
		t.Fatalf("cancelled %v", r.next.cancelled)
	}
	// Offered again: dispatched afresh.
	r.next.refuse = nil
	if errs := r.v.Dispatch(context.Background(), []port.TaskDispatch{verified(2)}); errs != nil {
		t.Fatal(errs)
	}
}

// Unverified attempts and their results pass through; the first run's
// progress is the attempt's; cancelling the attempt cancels its runs.
func TestVerifyPassThroughAndCancel(t *testing.T) {
	r := newVerifyRig()
	plain := port.TaskDispatch{AttemptKey: port.AttemptKey{InstanceID: verifiedKey.InstanceID, ExecutionID: "plain", Attempt: 1}, Term: 4}
	r.v.Dispatch(context.Background(), []port.TaskDispatch{plain, verified(2)})
	if r.next.dispatched[0].AttemptKey != plain.AttemptKey || r.next.dispatched[0].Group != "" {
		t.Fatalf("the plain attempt was changed: %+v", r.next.dispatched[0])
	}
	r.v.TaskResult(context.Background(), port.TaskResult{AttemptKey: plain.AttemptKey, OK: true})
	r.v.TaskProgress(context.Background(), port.TaskProgress{AttemptKey: runKey(verifiedKey, 1), WorkerID: "n1/c/1", Message: "one"})
	r.v.TaskProgress(context.Background(), port.TaskProgress{AttemptKey: runKey(verifiedKey, 2), WorkerID: "n2/c/1", Message: "two"})
	r.v.TaskProgress(context.Background(), port.TaskProgress{AttemptKey: runKey(verifiedKey, 2), Message: "waiting: ..."})
	if len(r.sink.results) != 1 || len(r.sink.progress) != 2 || r.sink.progress[0].AttemptKey != verifiedKey ||
		r.sink.progress[0].Message != "one" || r.sink.progress[1].Message != "waiting: ..." {
		t.Fatalf("results %+v progress %+v", r.sink.results, r.sink.progress)
	}
	if err := r.v.Cancel(context.Background(), 4, []port.AttemptKey{verifiedKey}); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(r.next.cancelled, runKey(verifiedKey, 1)) || !slices.Contains(r.next.cancelled, runKey(verifiedKey, 2)) {
		t.Fatalf("cancelled %v", r.next.cancelled)
	}
}

// A run that finishes on a node that gave another run its outcome already
// (a successor Waggler inherits the runs still out, not those done, and
// may place one on the same node) is no independent vote: it does not
// count, and a replacement run goes out kept off that node. Runs that keep
// landing on voters' nodes fail the attempt.
func TestVerifySameNodeRunDoesNotCount(t *testing.T) {
	r := newVerifyRig()
	if errs := r.v.Dispatch(context.Background(), []port.TaskDispatch{verified(2)}); errs != nil {
		t.Fatal(errs)
	}
	r.ran(1, "n1", "forged")
	r.ran(2, "n1", "forged") // the same node twice: would be a majority of one node
	if len(r.sink.results) != 0 {
		t.Fatalf("two runs on one node decided the attempt: %+v", r.sink.results)
	}
	if len(r.next.dispatched) != 3 {
		t.Fatalf("%d runs dispatched, want a replacement as the third", len(r.next.dispatched))
	}
	rep := r.next.dispatched[2]
	if rep.AttemptKey != runKey(verifiedKey, 3) || !slices.Equal(rep.Avoid, []string{"n1"}) || rep.Group == "" {
		t.Fatalf("replacement %+v: want run 3 kept off n1, in the group", rep)
	}
	r.ran(3, "n2", 42) // disagrees with n1: a tie-breaking fourth run
	if len(r.sink.results) != 0 || len(r.next.dispatched) != 4 {
		t.Fatalf("after n1 and n2 disagree: results %+v, %d runs dispatched", r.sink.results, len(r.next.dispatched))
	}
	if tb := r.next.dispatched[3]; tb.AttemptKey != runKey(verifiedKey, 4) || !slices.Equal(tb.Avoid, []string{"n1", "n2"}) {
		t.Fatalf("tie-breaking run %+v: want run 4 kept off n1 and n2", tb)
	}
	r.ran(4, "n3", 42)
	if res := r.only(t); !res.OK || res.Output != 42 {
		t.Fatalf("result %+v, want the majority's 42", res)
	}
	if !maps.Equal(r.votes, map[string]bool{"n1": false, "n2": true, "n3": true}) {
		t.Fatalf("votes %v: n1 outvoted once, not twice", r.votes)
	}

	r = newVerifyRig()
	r.v.Dispatch(context.Background(), []port.TaskDispatch{verified(2)})
	r.ran(1, "n1", 42)
	for i := 2; i <= 2+maxVoidRuns; i++ {
		r.ran(i, "n1", 42)
	}
	if res := r.only(t); res.OK || !strings.Contains(res.Error, "cannot be verified on distinct nodes") {
		t.Fatalf("result %+v, want a failure naming the placement", res)
	}
}
