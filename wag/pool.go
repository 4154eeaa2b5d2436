package wag

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/clock"
	"github.com/robonet/robonet/internal/lifecycle"
)

// Target is the Waggler a pool works for, as the pool sees it: a *Waggler
// on this node, or the Waggler of another node behind the work stream. The
// pool registers its slots (with what they run, for a successor to adopt)
// and sends it heartbeats and reports.
type Target interface {
	// Register adds the pool's slots as workers and adopts what they run.
	Register(workers []Worker, running []Running)
	// Heartbeats takes the heartbeats of one interval, one per running
	// attempt; an empty batch says the node is alive.
	Heartbeats(hbs []Heartbeat)
	// Report delivers a final report; false means the Waggler is gone and
	// the pool keeps the report for the next one.
	Report(r Report) bool
	// Release is called when the pool leaves this Waggler for another: it
	// returns the reports it took but could not deliver, for the pool to
	// send to the next.
	Release() []Report
	// Leave says the workers are gone for good (their pool was removed):
	// what they ran fails over now rather than after the heartbeat ladder.
	Leave(workerIDs []string)
	// Misbehaved says the worker program behind one of the pool's workers
	// did m (WorkerHost.Misbehaved).
	Misbehaved(workerID string, m Misbehaviour)
}

// errStopping is the cancel cause of attempts running when the node stops.
var errStopping = errors.New("node stopping")

// errCancelled is the cancel cause of attempts the engine cancelled.
var errCancelled = errors.New("attempt cancelled")

// pool is the local worker pool of one capability: a fixed number of worker
// goroutines (slots), each running one attempt at a time, and one heartbeat
// ticker that reports every running attempt to the Waggler.
//
// A slot whose action ignores cancellation is abandoned after the cancel
// grace: the slot gets a fresh goroutine at once, and the old one exits when
// (if ever) the action returns, its result discarded.
type pool struct {
	capability string
	poolName   string // an external pool's name; "" for the node's own
	node       string
	registry   *Registry
	clock      clock.Clock
	interval   time.Duration
	grace      time.Duration
	maxOutput  int
	rt         *runtimeEnv
	log        *zap.Logger

	base     context.Context // parent of every attempt; cancelled on stop
	stopBase context.CancelCauseFunc
	quit     chan struct{}
	cb       callbacks
	stopBeat func()
	// life's group holds the worker goroutines, abandoned ones included.
	life lifecycle.Base

	mu        sync.Mutex
	slots     []*slot
	target    Target   // the Waggler reports go to; nil while there is none
	targetKey string   // the TargetSource it came from
	unsent    []Report // reports no Waggler took yet, oldest first
	meter     poolMeter
}

// slot is one worker of a pool.
type slot struct {
	p           *pool
	id          string
	num         int             // 1-based, the N of id
	incarnation int             // bumped when the goroutine is abandoned
	assign      chan Assignment // of the current incarnation
	cur         *run
	// cancelGen is a generation cancelled while its assignment still sat in
	// the channel: it is skipped when it comes out.
	cancelGen uint64
}

// run is one attempt on one slot.
type run struct {
	a       Assignment
	slot    *slot
	call    *Call
	cancel  context.CancelCauseFunc
	started time.Time

	// guarded by pool.mu
	seq       uint64
	timeout   clock.Timer
	grace     clock.Timer
	stopped   bool // cancellation requested (by Cancel, timeout or stop)
	cancelled bool // by the Waggler: heartbeats about it would be stale
	timedOut  bool
	abandoned bool

	progress atomic.Pointer[Progress]

	// owned by the heartbeat ticker
	lastTicks uint64
	lastAt    time.Time
}

// setProgress is the action's Call.Progress: the latest report, its text
// fitted to what a heartbeat carries, for the next heartbeat.
func (r *run) setProgress(pr Progress) {
	pr.Message = FitText(pr.Message, MaxProgressTextBytes)
	r.progress.Store(&pr)
}

// slotPrefix names the slots of an external pool apart from the node's
// own: "node/capability/name-1".
func slotPrefix(cfg Config) string {
	if cfg.poolName == "" {
		return ""
	}
	return cfg.poolName + "-"
}

func newPool(cfg Config, capability string, size int, rt *runtimeEnv, log *zap.Logger) *pool {
	p := &pool{
		capability: capability,
		poolName:   cfg.poolName,
		node:       cfg.NodeName,
		registry:   cfg.Registry,
		clock:      cfg.Clock,
		interval:   cfg.HeartbeatInterval,
		grace:      cfg.CancelGrace,
		maxOutput:  cfg.MaxOutputBytes,
		rt:         rt,
		log:        log.With(zap.String("capability", capability)),
		quit:       make(chan struct{}),
	}
	p.base, p.stopBase = context.WithCancelCause(context.Background())
	for i := range size {
		p.slots = append(p.slots, &slot{
			p:      p,
			id:     cfg.NodeName + "/" + capability + "/" + slotPrefix(cfg) + strconv.Itoa(i+1),
			num:    i + 1,
			assign: make(chan Assignment, 1),
		})
	}
	return p
}

// leave tells the pool's Waggler that its slots are gone for good and
// detaches from it; called after stop, when nothing runs any more.
func (p *pool) leave() {
	p.mu.Lock()
	t := p.target
	p.mu.Unlock()
	if t != nil {
		ids := make([]string, len(p.slots))
		for i, s := range p.slots {
			ids[i] = s.id
		}
		t.Leave(ids)
	}
	p.attach(nil)
}

// workers returns the Waggler's handles on the slots.
func (p *pool) workers() []Worker {
	out := make([]Worker, len(p.slots))
	for i, s := range p.slots {
		out[i] = localWorker{s}
	}
	return out
}

// start runs the worker goroutines and the heartbeat ticker.
func (p *pool) start() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.life.Start("wag: pool") != nil {
		return // running already, or stopped: nothing to start
	}
	for _, s := range p.slots {
		p.spawn(s)
	}
	p.stopBeat = p.cb.every(p.clock, p.interval, p.beat)
}

// spawn starts the goroutine of a slot's current incarnation; p.mu held.
func (p *pool) spawn(s *slot) {
	inc, ch := s.incarnation, s.assign
	p.life.Go(func() { p.loop(s, inc, ch) })
}

func (p *pool) loop(s *slot, inc int, ch chan Assignment) {
	for {
		select {
		case <-p.quit:
			return
		case a := <-ch:
			if !p.execute(s, inc, a) {
				return
			}
		}
	}
}

// localWorker is the Waggler's handle on a slot.
type localWorker struct{ s *slot }

func (w localWorker) ID() string { return w.s.id }

func (w localWorker) Run(a Assignment) {
	p := w.s.p
	p.mu.Lock()
	ch, stopping := w.s.assign, p.life.State().Stopped()
	p.mu.Unlock()
	if stopping {
		return
	}
	select {
	case ch <- a:
	default: // the Waggler gives a slot one assignment at a time
		now := p.clock.Now()
		p.report(Report{Key: a.AttemptKey, Generation: a.Generation, WorkerID: w.s.id,
			Error: "worker " + w.s.id + " is busy (internal error: assigned twice)", StartedAt: now, FinishedAt: now})
	}
}

func (w localWorker) Cancel(key port.AttemptKey, gen uint64) {
	p := w.s.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if r := w.s.cur; r != nil && r.a.AttemptKey == key && r.a.Generation == gen {
		r.cancelled = true
		p.stopRun(r, errCancelled)
		return
	}
	w.s.cancelGen = gen // not started yet
}

// execute runs one assignment on a slot and reports it. It returns false
// when the goroutine must exit (abandoned, or the pool is stopping).
func (p *pool) execute(s *slot, inc int, a Assignment) bool {
	ctx, cancel := context.WithCancelCause(p.base)
	defer cancel(context.Canceled)
	r := p.newRun(s, a, cancel)
	switch started, cancelledEarly := p.begin(r, inc); {
	case cancelledEarly:
		// Cancelled before it started: the report only frees the worker.
		now := p.clock.Now()
		p.report(Report{Key: a.AttemptKey, Generation: a.Generation, WorkerID: s.id, Error: errCancelled.Error(), StartedAt: now, FinishedAt: now, Cancelled: true})
		return true
	case !started:
		return false
	}

	out, err := p.invoke(ctx, r.call)
	finished := p.clock.Now()

	end := p.end(r)
	if end.abandoned {
		r.call.Logger().Info("abandoned action returned at last: result discarded")
		return false
	}
	if end.stopping {
		return false // the Waggler is closed: nobody waits for this result
	}
	rep := p.finalReport(r, out, err, finished, end)
	p.mu.Lock()
	p.meter.record(finished, finished.Sub(r.started), rep.OK)
	p.mu.Unlock()
	p.report(rep)
	return true
}

// newRun is the run of a on slot s, its action's context cancelled by
// cancel.
func (p *pool) newRun(s *slot, a Assignment, cancel context.CancelCauseFunc) *run {
	r := &run{a: a, slot: s, cancel: cancel}
	r.call = &Call{
		Key:            a.AttemptKey,
		Task:           a.Task,
		Index:          a.Index,
		Capability:     a.Capability,
		Action:         a.Action,
		Workflow:       a.Workflow,
		Worker:         s.id,
		Slot:           s.num,
		Timeout:        a.Timeout,
		Input:          a.Input,
		Progress:       r.setProgress,
		MaxOutputBytes: p.maxOutput,
		rt:             p.rt,
		log:            p.log,
	}
	return r
}

// begin makes r its slot's current run, started now, and arms its
// timeout. It does not when the slot's goroutine is to exit (incarnation
// inc abandoned, or the pool stopping: neither result is true), or when the
// Waggler cancelled the assignment before it started (cancelledEarly).
func (p *pool) begin(r *run, inc int) (started, cancelledEarly bool) {
	s, a := r.slot, &r.a
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.life.State().Stopped() || s.incarnation != inc {
		return false, false
	}
	if s.cancelGen == a.Generation {
		s.cancelGen = 0
		return false, true
	}
	s.cur = r
	r.started = p.clock.Now()
	if a.Timeout > 0 {
		r.timeout = p.cb.afterFunc(p.clock, a.Timeout, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			if s.cur == r && !r.stopped {
				r.timedOut = true
				p.stopRun(r, fmt.Errorf("attempt %w after %v", errTimedOut, a.Timeout))
			}
		})
	}
	return true, false
}

// runEnd is how a run ended, as the pool's lock saw it once its action
// returned.
type runEnd struct {
	abandoned, timedOut, cancelled, stopping bool
}

// end takes r off its slot once its action returned and stops its timers.
func (p *pool) end(r *run) runEnd {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := runEnd{abandoned: r.abandoned, timedOut: r.timedOut, cancelled: r.cancelled, stopping: p.life.State().Stopped()}
	if r.slot.cur == r {
		r.slot.cur = nil
	}
	stopTimer(r.timeout)
	stopTimer(r.grace)
	return e
}

// finalReport is the report of r, whose action returned out or err at
// finished: its output, checked, or its error (saying it timed out, when
// it did and the action's error does not).
func (p *pool) finalReport(r *run, out any, err error, finished time.Time, end runEnd) Report {
	a := &r.a
	rep := Report{Key: a.AttemptKey, Generation: a.Generation, WorkerID: r.slot.id, StartedAt: r.started, FinishedAt: finished, Cancelled: end.cancelled}
	if err != nil {
		msg := err.Error()
		if end.timedOut && !errors.Is(err, errTimedOut) {
			msg = fmt.Sprintf("attempt timed out after %v: %s", a.Timeout, msg)
		}
		rep.Error = FitText(msg, MaxErrorBytes)
	} else if v, enc, err := p.checkOutput(out); err != nil {
		rep.Error = FitText(err.Error(), MaxErrorBytes)
	} else {
		rep.OK, rep.Output, rep.OutputJSON = true, v, enc
	}
	return rep
}

// invoke calls the action's handler, containing panics.
func (p *pool) invoke(ctx context.Context, call *Call) (out any, err error) {
	h, ok := p.registry.Lookup(call.Action)
	if !ok {
		return nil, fmt.Errorf("unknown action %q: this node's %s workers run %s", call.Action, p.capability, strings.Join(p.registry.Names(), ", "))
	}
	defer func() {
		if x := recover(); x != nil {
			out, err = nil, fmt.Errorf("action %s panicked: %v\n%s", call.Action, x, shortStack())
		}
	}()
	return h(ctx, call)
}

// checkOutput normalizes an action's output and enforces MaxOutputBytes.
func (p *pool) checkOutput(out any) (any, []byte, error) {
	// Both steps are bounded by the limit: an output that repeats one
	// large value by reference is cheap to return and must not become
	// expensive to check.
	tooLarge := func() error {
		return fmt.Errorf("output is more than %d bytes of JSON (MaxOutputBytes, the node's output-bytes limit): return a reference (a path or URL) to large data instead", p.maxOutput)
	}
	v, err := value.NormalizeLimit(out, p.maxOutput)
	if errors.Is(err, value.ErrTooLarge) {
		return nil, nil, tooLarge()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("the action's output is not a JSON-like value: %w", err)
	}
	enc, err := value.EncodeLimit(v, p.maxOutput)
	if err != nil {
		if errors.Is(err, value.ErrTooLarge) {
			return nil, nil, tooLarge()
		}
		return nil, nil, fmt.Errorf("the action's output cannot be encoded: %w", err)
	}
	return v, enc, nil // the encoding goes along: the engine need not make it again
}

// stopRun cancels a run and arms the grace after which it is abandoned;
// p.mu held.
func (p *pool) stopRun(r *run, cause error) {
	if r.stopped {
		return
	}
	r.stopped = true
	r.cancel(cause)
	if p.life.State().Stopped() {
		return // stop waits for the actions itself
	}
	r.grace = p.cb.afterFunc(p.clock, p.grace, func() { p.abandon(r) })
}

// abandon gives up on a run whose action ignored cancellation: the slot
// gets a fresh goroutine and the Waggler a failed report, which frees the
// worker. The old goroutine exits when the action returns, if it ever does.
func (p *pool) abandon(r *run) {
	s := r.slot
	p.mu.Lock()
	if s.cur != r || p.life.State().Stopped() {
		p.mu.Unlock()
		return
	}
	r.abandoned = true
	s.cur = nil
	s.incarnation++
	s.assign = make(chan Assignment, 1)
	p.spawn(s)
	timedOut, cancelled := r.timedOut, r.cancelled
	p.mu.Unlock()

	why := "cancelled"
	if timedOut && !cancelled {
		why = fmt.Sprintf("timed out after %v", r.a.Timeout)
	}
	msg := fmt.Sprintf("attempt %s, and the action did not return within %v: it was abandoned (its result, if any, will be discarded)", why, p.grace)
	r.call.Logger().Warn("action ignored cancellation: abandoned", zap.Duration("grace", p.grace))
	p.report(Report{Key: r.a.AttemptKey, Generation: r.a.Generation, WorkerID: s.id, Error: msg, StartedAt: r.started, FinishedAt: p.clock.Now(), Cancelled: cancelled})
}

// beat sends a heartbeat for every running attempt. Heartbeats say the
// worker is alive, so they continue while a timed-out action winds down;
// only attempts the Waggler cancelled (and so forgot) get none.
func (p *pool) beat() {
	p.mu.Lock()
	runs := make([]*run, 0, len(p.slots))
	seqs := make([]uint64, 0, len(p.slots))
	for _, s := range p.slots {
		if r := s.cur; r != nil && !r.cancelled {
			r.seq++
			runs = append(runs, r)
			seqs = append(seqs, r.seq)
		}
	}
	t := p.target
	p.mu.Unlock()
	if t == nil {
		return // no Waggler to hear them: the next one adopts the runs
	}
	now := p.clock.Now()
	hbs := make([]Heartbeat, len(runs))
	for i, r := range runs {
		hb := Heartbeat{Key: r.a.AttemptKey, Generation: r.a.Generation, WorkerID: r.slot.id, Seq: seqs[i], SentAt: now}
		if pr := r.progress.Load(); pr != nil {
			hb.Progress = *pr
		}
		hb.CPUPercent, hb.MemBytes = r.sample(now)
		hbs[i] = hb
	}
	t.Heartbeats(hbs)
}

// attachTo makes src's Waggler the pool's, unless it is already.
func (p *pool) attachTo(src TargetSource) {
	p.mu.Lock()
	same := p.target != nil && p.targetKey == src.Key
	p.mu.Unlock()
	if same {
		return
	}
	t := src.New(p.running)
	p.mu.Lock()
	p.targetKey = src.Key
	p.mu.Unlock()
	p.attach(t)
}

// running lists what the slots run.
func (p *pool) running() []Running {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

// runningLocked lists what the slots run (not what was cancelled); p.mu
// held.
func (p *pool) runningLocked() []Running {
	var out []Running
	for _, s := range p.slots {
		if r := s.cur; r != nil && !r.cancelled {
			out = append(out, Running{Assignment: r.a, WorkerID: s.id, StartedAt: r.started})
		}
	}
	return out
}

// report delivers a final report to the pool's Waggler, or keeps it for
// the next one when there is none (or it has gone).
func (p *pool) report(r Report) {
	p.mu.Lock()
	t := p.target
	if t == nil || len(p.unsent) > 0 {
		p.unsent = append(p.unsent, r) // keep the order
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	if !t.Report(r) {
		p.mu.Lock()
		p.unsent = append(p.unsent, r)
		p.mu.Unlock()
	}
}

// attach makes t the pool's Waggler: it registers the slots with what they
// run (so a successor adopts them), then gets the reports kept while the
// pool had none. nil detaches.
func (p *pool) attach(t Target) {
	p.mu.Lock()
	old := p.target
	p.target = t
	if t == nil {
		p.targetKey = ""
	}
	p.mu.Unlock()
	if old != nil && old != t {
		if kept := old.Release(); len(kept) > 0 {
			p.mu.Lock()
			p.unsent = append(kept, p.unsent...)
			p.mu.Unlock()
		}
	}
	p.mu.Lock()
	if t == nil || p.life.State().Stopped() {
		p.mu.Unlock()
		return
	}
	running := p.runningLocked()
	unsent := p.unsent
	p.unsent = nil
	p.mu.Unlock()
	t.Register(p.workers(), running)
	for i, r := range unsent {
		if !t.Report(r) {
			p.mu.Lock()
			p.unsent = append(slices.Clone(unsent[i:]), p.unsent...)
			p.mu.Unlock()
			return
		}
	}
}

// sample measures the CPU and memory of the run's process, if it has one.
func (r *run) sample(now time.Time) (cpu float64, mem uint64) {
	pid := r.call.pid.Load()
	if pid <= 0 {
		return 0, 0
	}
	ticks, rss, ok := procSample(int(pid))
	if !ok {
		return 0, 0
	}
	if !r.lastAt.IsZero() && now.After(r.lastAt) && ticks >= r.lastTicks {
		cpu = float64(ticks-r.lastTicks) / clockTicks / now.Sub(r.lastAt).Seconds() * 100
	}
	r.lastTicks, r.lastAt = ticks, now
	return cpu, rss
}

// stop cancels every running attempt and waits, until ctx is done, for
// every worker goroutine — abandoned ones included — to return. Every call
// waits for the first.
func (p *pool) stop(ctx context.Context) error {
	return p.life.Stop(ctx, func(was lifecycle.State) error { return p.shutdown(ctx, was) })
}

func (p *pool) shutdown(ctx context.Context, was lifecycle.State) error {
	p.mu.Lock()
	for _, s := range p.slots {
		if r := s.cur; r != nil {
			stopTimer(r.timeout)
			stopTimer(r.grace)
			r.stopped = true
		}
	}
	p.mu.Unlock()
	p.stopBase(errStopping)
	close(p.quit)
	if was == lifecycle.Running {
		p.stopBeat()
	}
	p.cb.close()

	done := make(chan struct{})
	go func() {
		p.life.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		p.mu.Lock()
		var running []string
		for _, s := range p.slots {
			if r := s.cur; r != nil {
				running = append(running, r.a.IdempotencyKey())
			}
		}
		p.mu.Unlock()
		return fmt.Errorf("capability %s: actions still running after stop (%w): %s", p.capability, context.Cause(ctx), strings.Join(running, ", "))
	}
}

func stopTimer(t clock.Timer) {
	if t != nil {
		t.Stop()
	}
}

// shortStack is the stack of a recovered panic, without the runtime's own
// frames, cut to a few KiB.
func shortStack() string {
	const max = 2048
	lines := strings.Split(string(debug.Stack()), "\n")
	var b strings.Builder
	for i := 1; i+1 < len(lines); i += 2 { // line 0 is "goroutine N [running]:"
		fn, loc := lines[i], lines[i+1]
		if strings.HasPrefix(fn, "runtime/debug.Stack") || strings.HasPrefix(fn, "panic(") ||
			strings.HasPrefix(fn, "runtime.") || strings.Contains(fn, "wag.shortStack") {
			continue
		}
		if b.Len()+len(fn)+len(loc)+2 > max {
			b.WriteString("…")
			break
		}
		b.WriteString(fn)
		b.WriteByte('\n')
		b.WriteString(loc)
		b.WriteByte('\n')
	}
	return strings.TrimRight(b.String(), "\n")
}
