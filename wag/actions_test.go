package wag

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/internal/clock/clocktest"
)

func TestEchoReturnsItsInput(t *testing.T) {
	in := map[string]any{"a": []any{int64(1), "x"}}
	out, err := echoAction(context.Background(), &Call{Input: in})
	if err != nil || reflect.ValueOf(out).Pointer() != reflect.ValueOf(in).Pointer() {
		t.Fatalf("echo: %v %v", out, err)
	}
}

func TestSleepReportsProgressOnTheClock(t *testing.T) {
	clk := clocktest.New()
	progress := make(chan Progress, 100)
	call := &Call{Input: map[string]any{"duration": "2s"}, Progress: func(p Progress) { progress <- p },
		rt: &runtimeEnv{clock: clk}}
	done := make(chan any, 1)
	go func() {
		out, err := sleepAction(context.Background(), call)
		if err != nil {
			done <- err
			return
		}
		done <- out
	}()
	for i := range int64(sleepSteps) {
		p := recv(t, progress, "progress")
		if p.StepsDone != i || p.StepsTotal != sleepSteps || p.ETA != 2*time.Second-time.Duration(i)*200*time.Millisecond {
			t.Fatalf("step %d: %+v", i, p)
		}
		if d := clk.WaitTimer(t, time.Second); d != 200*time.Millisecond {
			t.Fatalf("step %d armed a timer %s ahead, want 200ms", i, d)
		}
		clk.Advance(200 * time.Millisecond)
	}
	if p := recv(t, progress, "the last progress"); p.StepsDone != sleepSteps {
		t.Fatalf("last %+v", p)
	}
	if out := recv(t, done, "the result"); !reflect.DeepEqual(out, map[string]any{"slept": "2s"}) {
		t.Fatalf("output %v", out)
	}
}

func TestSleepHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errCancelled)
	_, err := sleepAction(ctx, &Call{Input: map[string]any{"duration": "1h"}, rt: &runtimeEnv{clock: clocktest.New()}})
	if !errors.Is(err, errCancelled) {
		t.Fatalf("error %v", err)
	}
}

func TestSleepBadInput(t *testing.T) {
	for in, want := range map[string]string{
		"":     "sleep: input.duration is required",
		"soon": `sleep: input.duration "soon" is not a duration`,
		"-1s":  `sleep: input.duration "-1s" is not a duration`,
	} {
		input := map[string]any{}
		if in != "" {
			input["duration"] = in
		}
		if _, err := sleepAction(context.Background(), &Call{Input: input}); err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: %v", in, err)
		}
	}
	if _, err := sleepAction(context.Background(), &Call{Input: map[string]any{"duration": int64(2)}}); err == nil || !strings.Contains(err.Error(), "must be a duration string") {
		t.Errorf("number: %v", err)
	}
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	if got := r.Names(); !slices.Equal(got, []string{"echo", "exec", "http", "sleep"}) || !slices.Equal(got, BuiltinActions()) {
		t.Fatalf("built-ins %v, BuiltinActions %v", got, BuiltinActions())
	}
	if err := r.Register("echo", echoAction); !errors.Is(err, ErrActionExists) {
		t.Fatalf("duplicate: %v", err)
	}
	if err := r.Register("Bad Name", echoAction); err == nil {
		t.Fatal("bad name accepted")
	}
	if err := r.Register("img.resize", nil); err == nil {
		t.Fatal("nil handler accepted")
	}
	if err := r.Register("img.resize", echoAction); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Lookup("img.resize"); !ok {
		t.Fatal("lookup failed")
	}
	if len(NewEmptyRegistry().Names()) != 0 {
		t.Fatal("empty registry is not empty")
	}
}

// TestCancelBeforeStart cancels an assignment that sits in a slot's
// channel before its goroutine took it: it never runs, and the report only
// frees the worker.
func TestCancelBeforeStart(t *testing.T) {
	rep := &recordingReporter{reports: make(chan Report, 4)}
	ran := make(chan struct{}, 1)
	cfg := Config{Logger: zaptest.NewLogger(t), Registry: registryWith(t, map[string]Handler{
		"mark": func(context.Context, *Call) (any, error) { ran <- struct{}{}; return nil, nil },
	})}.WithDefaults()
	p := newPool(cfg, "code.exec", 1, &runtimeEnv{clock: cfg.Clock}, cfg.Logger)
	p.attach(rep)
	w := p.workers()[0]
	a := Assignment{TaskDispatch: task("mark", nil), Generation: 7}
	w.Run(a)
	w.Cancel(a.AttemptKey, 7)
	p.start()
	r := recv(t, rep.reports, "the report")
	if r.OK || r.Generation != 7 || r.Error != errCancelled.Error() || !r.Cancelled {
		t.Fatalf("report %+v", r)
	}
	b := Assignment{TaskDispatch: task("mark", nil), Generation: 8}
	w.Run(b)
	if r := recv(t, rep.reports, "the next report"); !r.OK || r.Generation != 8 {
		t.Fatalf("report %+v", r)
	}
	if len(ran) != 1 {
		t.Fatalf("the handler ran %d times, want once", len(ran))
	}
	if err := p.stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestCancelledReportsSaySo: the report on an assignment the Waggler
// cancelled says so, whether the action returned on the cancel or was
// abandoned; a timed-out attempt's report is a failure, not a cancel.
func TestCancelledReportsSaySo(t *testing.T) {
	rep := &recordingReporter{reports: make(chan Report, 4)}
	release, started := make(chan struct{}), make(chan struct{}, 4)
	cfg := Config{Logger: zaptest.NewLogger(t), CancelGrace: 20 * time.Millisecond, Registry: registryWith(t, map[string]Handler{
		"wait": func(ctx context.Context, _ *Call) (any, error) {
			started <- struct{}{}
			<-ctx.Done()
			return nil, context.Cause(ctx)
		},
		"hang": func(context.Context, *Call) (any, error) {
			started <- struct{}{}
			<-release // ignores cancellation
			return "too late", nil
		},
	})}.WithDefaults()
	p := newPool(cfg, "code.exec", 1, &runtimeEnv{clock: cfg.Clock}, cfg.Logger)
	p.attach(rep)
	p.start()
	defer func() {
		close(release)
		if err := p.stop(context.Background()); err != nil {
			t.Error(err)
		}
	}()
	w := p.workers()[0]
	run := func(action string, gen uint64, timeout time.Duration) Assignment {
		a := Assignment{TaskDispatch: task(action, nil), Generation: gen}
		a.Timeout = timeout
		w.Run(a)
		recv(t, started, "the start of "+action)
		return a
	}

	a := run("wait", 1, 0)
	w.Cancel(a.AttemptKey, a.Generation)
	if r := recv(t, rep.reports, "the cancelled report"); !r.Cancelled || r.OK || !strings.Contains(r.Error, errCancelled.Error()) {
		t.Fatalf("report %+v: want a cancelled report", r)
	}
	b := run("hang", 2, 0)
	w.Cancel(b.AttemptKey, b.Generation)
	if r := recv(t, rep.reports, "the abandoned report"); !r.Cancelled || !strings.Contains(r.Error, "abandoned") {
		t.Fatalf("report %+v: want a cancelled report on the abandoned run", r)
	}
	run("wait", 3, 10*time.Millisecond)
	if r := recv(t, rep.reports, "the timed-out report"); r.Cancelled || r.OK || !strings.Contains(r.Error, "timed out") {
		t.Fatalf("report %+v: a timeout is the attempt's failure, not a cancel", r)
	}
}

type recordingReporter struct{ reports chan Report }

func (r *recordingReporter) Register([]Worker, []Running)    {}
func (r *recordingReporter) Heartbeats([]Heartbeat)          {}
func (r *recordingReporter) Release() []Report               { return nil }
func (r *recordingReporter) Leave([]string)                  {}
func (r *recordingReporter) Misbehaved(string, Misbehaviour) {}
func (r *recordingReporter) Report(report Report) bool {
	r.reports <- report
	return true
}

var _ port.ResultSink = (*recordingSink)(nil)
