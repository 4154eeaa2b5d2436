package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
	"github.com/robonet/robonet/internal/clock"
)

// flushItem is one shard's write for one instance: results, a snapshot, or
// the completion. Items of an instance are applied in the order they were
// pushed.
type flushItem struct {
	inst       *instance
	results    []port.ActionResult
	state      []byte
	completion *port.Completion
	// gathering: the instance reached GATHERING; it is shown so once
	// that is durable (progressWrites.end).
	gathering bool
	// signals consumed by waits, marked with the results that took them.
	signals []port.SignalUse
	// park: after the snapshot, release the lease and schedule the row
	// (waits.go); the instance leaves memory once that is durable.
	park *port.Park
}

// rows is what the item counts toward FlushMaxRows and the rows pending.
// A GATHERING mark counts none: it rides on the instance's row that its
// results or snapshot update, or is one small update of its own.
func (it *flushItem) rows() int {
	n := len(it.results)
	if it.state != nil {
		n++
	}
	if it.completion != nil {
		n++
	}
	return n
}

// flusher is the group commit. Shards push rows; the flusher writes them in
// batches: when FlushInterval has passed since the first pending row, or
// FlushMaxRows rows are pending, whichever comes first. Rows that arrive
// while a write runs wait for the next one. Per instance the rows of one
// flush are merged into one Progress (results in order, the last snapshot)
// or, once the instance finished, into its Completion, which then carries
// the results not yet written — so an instance is reported complete only
// with every result durable. A call the store cannot take now is retried
// with backoff, never dropped; a call it refuses is split until the write
// it refuses is found and set aside (see write); an instance refused with
// ErrOwnershipLost is evicted.
type flusher struct {
	e     *Engine
	q     *mailbox[flushItem]
	rows  atomic.Int64 // rows pending in q
	items []flushItem

	closing chan struct{} // closed by close: write what is pending and exit
	stopCtx context.Context
	err     error // of the final flush
	done    chan struct{}
}

func newFlusher(e *Engine) *flusher {
	return &flusher{e: e, q: newMailbox[flushItem](), closing: make(chan struct{}), done: make(chan struct{})}
}

func (f *flusher) push(items []flushItem) {
	n := 0
	for i := range items {
		n += items[i].rows()
	}
	f.rows.Add(int64(n))
	f.q.pushAll(items)
}

func (f *flusher) run(ctx context.Context) {
	defer close(f.done)
	linger := f.e.cfg.FlushInterval
	timer := clock.Idle(f.e.cfg.Clock)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.closing:
			f.err = f.flush(f.stopCtx)
			return
		case <-f.q.signal:
		}
		if linger > 0 && f.rows.Load() < int64(f.e.cfg.FlushMaxRows) {
			timer.Reset(linger)
		wait:
			for f.rows.Load() < int64(f.e.cfg.FlushMaxRows) {
				select {
				case <-ctx.Done():
					return
				case <-f.closing:
					f.err = f.flush(f.stopCtx)
					return
				case <-timer.C():
					break wait
				case <-f.q.signal:
				}
			}
			timer.Stop()
		}
		if err := f.flush(ctx); err != nil {
			return // ctx is done
		}
	}
}

// close makes the loop write what is pending with ctx and exit, and waits.
func (f *flusher) close(ctx context.Context) error {
	f.stopCtx = ctx
	close(f.closing)
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return fmt.Errorf("flushing pending writes: %w", ctx.Err())
	}
}

// pendingWrite is the merged write of one instance in one flush.
type pendingWrite struct {
	inst       *instance
	results    []port.ActionResult
	state      []byte
	completion *port.Completion
	gathering  bool // the progress records that the instance reached GATHERING
	signals    []port.SignalUse
	park       *port.Park
	mark       chan struct{} // a completion's or GATHERING's: closed once its outcome is known
}

// rows is what the write counts toward FlushMaxRows.
func (w *pendingWrite) rows() int {
	if w.completion != nil {
		return len(w.completion.Results) + 1
	}
	if w.state != nil || w.gathering || w.park != nil || len(w.signals) > 0 {
		return len(w.results) + 1
	}
	return len(w.results)
}

// gone reports whether the instance left memory since the write was
// queued: evicted (a write refused, its lease lost, or claimed again after
// its lease lapsed, which makes a new instance of the same id). Its write
// is dropped: it would be refused, or, when this engine claimed the
// instance again, it would mix two lives of one instance.
func (w *pendingWrite) gone() bool { return w.inst.h.gone.Load() }

// flush writes everything pending. It returns an error only when ctx ends
// before the writes succeed.
//
// Writes are merged per instance id, not per *instance: an instance queues
// one write however many items it pushed, and the items of an instance
// that left memory are dropped, so that no batch names an instance twice
// (a store refuses such a completion batch as a whole, and retrying it
// would refuse it again, for ever).
func (f *flusher) flush(ctx context.Context) error {
	f.items = f.q.take(f.items)
	if len(f.items) == 0 {
		return nil
	}
	rows := 0
	byID := make(map[uuid.UUID]*pendingWrite, len(f.items))
	var order []*pendingWrite
	for i := range f.items {
		it := &f.items[i]
		rows += it.rows()
		if it.inst.h.gone.Load() {
			continue
		}
		w := byID[it.inst.id]
		if w != nil && w.inst != it.inst {
			// An earlier life of the instance, still held when it pushed
			// the item: the later one stands (the earlier is gone by now).
			w.inst.lg.Debug("dropping the pending write of an earlier life of the instance")
			*w = pendingWrite{inst: it.inst}
		}
		if w == nil {
			w = &pendingWrite{inst: it.inst}
			byID[it.inst.id] = w
			order = append(order, w)
		}
		w.results = append(w.results, it.results...)
		if it.state != nil {
			w.state = it.state
		}
		if it.completion != nil {
			w.completion = it.completion
		}
		w.gathering = w.gathering || it.gathering
		w.signals = append(w.signals, it.signals...)
		if it.park != nil {
			w.park = it.park
		}
	}
	f.rows.Add(-int64(rows))

	var progress, completions []*pendingWrite
	for _, w := range order {
		if w.completion != nil {
			w.completion.Results = append(w.results, w.completion.Results...)
			w.completion.ConsumedSignals = append(w.signals, w.completion.ConsumedSignals...)
			completions = append(completions, w)
		} else if len(w.results) > 0 || w.state != nil || w.gathering || w.park != nil || len(w.signals) > 0 {
			progress = append(progress, w)
		}
	}
	// Progress first: an instance is in one list only, so the order
	// between the lists does not matter; within a list, chunks bound the
	// size of one Store call.
	return errors.Join(f.writeAll(ctx, progressWrites{f}, progress), f.writeAll(ctx, completionWrites{f}, completions))
}

// chunks splits ws into runs of at most max rows (an instance is never
// split).
func chunks(ws []*pendingWrite, maxRows int) [][]*pendingWrite {
	var out [][]*pendingWrite
	start, n := 0, 0
	for i, w := range ws {
		r := w.rows()
		if n > 0 && n+r > maxRows {
			out = append(out, ws[start:i])
			start, n = i, 0
		}
		n += r
	}
	if start < len(ws) {
		out = append(out, ws[start:])
	}
	return out
}

// writeKind is one of the two Store calls of the group commit.
type writeKind interface {
	what() string
	// begin is called once per write before its first attempt.
	begin(w *pendingWrite)
	// call makes the Store call for ws: one outcome per write, or an
	// error for the call as a whole.
	call(ctx context.Context, ws []*pendingWrite) ([]error, error)
	// end is called once per write with its outcome: nil (written),
	// ErrOwnershipLost or another per-write error (refused), or
	// errWriteAbandoned.
	end(w *pendingWrite, outcome error)
}

// errWriteAbandoned is the outcome of a write whose instance left memory
// before it was written, or that was pending when the flusher stopped.
var errWriteAbandoned = errors.New("write abandoned")

// writeAll writes ws in chunks of at most FlushMaxRows rows.
func (f *flusher) writeAll(ctx context.Context, k writeKind, ws []*pendingWrite) error {
	for _, w := range ws {
		k.begin(w)
	}
	for i, chunk := range chunks(ws, f.e.cfg.FlushMaxRows) {
		if err := f.write(ctx, k, chunk); err != nil {
			for _, rest := range chunks(ws, f.e.cfg.FlushMaxRows)[i+1:] {
				for _, w := range rest {
					k.end(w, errWriteAbandoned)
				}
			}
			return err
		}
	}
	return nil
}

// setAsideTries is how many times a write refused on its own (not for a
// reason that passes) is tried before it is set aside.
const setAsideTries = 3

// write makes one Store call for ws until it succeeds, and ends every
// write of ws once. What a failed call does depends on why:
//
//   - The store is unavailable (the database unreachable, failing over,
//     read-only; errors.Is ErrStoreUnavailable): the same writes are
//     retried with backoff, 10 ms growing to 1 s, for as long as it takes,
//     less those whose instance left memory meanwhile. An outcome unknown
//     is retried the same way: every write here is idempotent.
//   - The store refused the call for another reason: one of the writes
//     may be bad. The batch is split in halves, each written on its own,
//     so the bad write is found in log2(n) calls and the others go
//     through. A single write refused setAsideTries times is set aside:
//     logged, counted (robonet_store_writes_set_aside_total) and its
//     instance evicted, so that it holds nothing else back. The instance
//     stays in the store; it is claimed again when its lease lapses.
//
// It returns an error only when ctx ends first.
func (f *flusher) write(ctx context.Context, k writeKind, ws []*pendingWrite) error {
	backoff, refusals := 10*time.Millisecond, 0
	var timer clock.Timer
	for {
		if ws = dropGone(k, ws); len(ws) == 0 {
			return nil
		}
		outcomes, err := f.call(ctx, k, ws)
		switch {
		case err == nil:
			for i, w := range ws {
				var outcome error
				if i < len(outcomes) {
					outcome = outcomes[i]
				}
				k.end(w, outcome)
			}
			return nil
		case ctx.Err() != nil:
			for _, w := range ws {
				k.end(w, errWriteAbandoned)
			}
			return errors.Join(ctx.Err(), err)
		case errors.Is(err, port.ErrStoreUnavailable):
			f.e.cfg.Metrics.StoreRetries.Inc()
			f.e.log.Warn("store write failed; retrying", zap.String("op", k.what()), zap.Int("instances", len(ws)),
				zap.Duration("in", backoff), zap.Bool("outcome_unknown", errors.Is(err, port.ErrOutcomeUnknown)), zap.Error(err))
		case len(ws) > 1:
			f.e.log.Warn("the store refused a batch; writing its halves apart to find the write it refuses",
				zap.String("op", k.what()), zap.Int("instances", len(ws)), zap.Error(err))
			mid := len(ws) / 2
			if err := f.write(ctx, k, ws[:mid]); err != nil {
				for _, w := range ws[mid:] {
					k.end(w, errWriteAbandoned)
				}
				return err
			}
			return f.write(ctx, k, ws[mid:])
		default:
			if refusals++; refusals == setAsideTries {
				f.setAside(k, ws[0], err)
				return nil
			}
		}
		if timer == nil {
			timer = f.e.cfg.Clock.NewTimer(backoff)
			defer timer.Stop()
		} else {
			timer.Reset(backoff)
		}
		select {
		case <-ctx.Done():
			for _, w := range ws {
				k.end(w, errWriteAbandoned)
			}
			return ctx.Err()
		case <-timer.C():
		}
		backoff = min(2*backoff, time.Second)
	}
}

// dropGone ends the writes of instances that left memory and returns the
// others (ws itself when none left, the common case: no copy).
func dropGone(k writeKind, ws []*pendingWrite) []*pendingWrite {
	for i, w := range ws {
		if !w.gone() {
			continue
		}
		live := append(make([]*pendingWrite, 0, len(ws)-1), ws[:i]...)
		for _, w := range ws[i:] {
			if w.gone() {
				k.end(w, errWriteAbandoned)
			} else {
				live = append(live, w)
			}
		}
		return live
	}
	return ws
}

// call makes one Store call and records its latency and size.
func (f *flusher) call(ctx context.Context, k writeKind, ws []*pendingWrite) ([]error, error) {
	m := f.e.cfg.Metrics
	start := time.Now()
	outcomes, err := k.call(ctx, ws)
	m.CommitSeconds.Observe(time.Since(start).Seconds())
	if err == nil {
		rows := 0
		for _, w := range ws {
			rows += w.rows()
		}
		m.CommitRows.Observe(float64(rows))
	}
	return outcomes, err
}

// setAside gives up on a write the store keeps refusing: its instance is
// evicted (the store still holds it; it is claimed again when its lease
// lapses, and tried afresh).
func (f *flusher) setAside(k writeKind, w *pendingWrite, err error) {
	f.e.cfg.Metrics.WritesSetAside.Inc()
	w.inst.lg.Error("the store refuses this instance's write; setting it aside and evicting the instance, "+
		"which is claimed again when its lease lapses", zap.String("op", k.what()), zap.Int("tries", setAsideTries),
		zap.Duration("lease", f.e.cfg.Lease), zap.Error(err))
	k.end(w, fmt.Errorf("set aside after %d refusals: %w", setAsideTries, err))
}

// progressWrites is PersistProgress. A progress that records GATHERING
// is written like a completion: reads of its instance wait for the
// outcome (holder.settled), since the Store, and so every other node, says
// GATHERING as soon as the call commits; from the commit on, this node
// does too.
type progressWrites struct{ f *flusher }

func (progressWrites) what() string { return "persisting progress" }

func (progressWrites) begin(w *pendingWrite) {
	if w.gathering {
		w.mark = make(chan struct{})
		w.inst.h.committing.Store(&w.mark)
	}
}

func (k progressWrites) end(w *pendingWrite, outcome error) {
	switch {
	case errors.Is(outcome, errWriteAbandoned):
	case outcome != nil:
		k.f.lost(w.inst, outcome)
	case w.gathering || w.park != nil:
		inst, gathering, park := w.inst, w.gathering, w.park != nil
		if gathering {
			inst.h.state.CompareAndSwap(port.StateRunning, port.StateGathering)
		}
		inst.h.shard.send(func(s *shard) {
			if gathering {
				s.gathered(inst)
			}
			if park {
				s.parked(inst)
			}
		})
	}
	if w.mark != nil {
		w.inst.h.committing.CompareAndSwap(&w.mark, nil)
		close(w.mark)
	}
}

func (k progressWrites) call(ctx context.Context, ws []*pendingWrite) ([]error, error) {
	owner := k.f.e.cfg.Owner
	batch := make([]port.Progress, len(ws))
	for i, w := range ws {
		batch[i] = port.Progress{InstanceID: w.inst.id, Owner: owner, Results: w.results, State: w.state, Gathering: w.gathering,
			ConsumedSignals: w.signals, Park: w.park}
	}
	return k.f.e.cfg.Store.PersistProgress(ctx, batch)
}

// completionWrites is CompleteInstances. While a completion is being
// written, reads of its instance wait for the outcome (holder.settled):
// the Store may say finished as soon as the call commits.
type completionWrites struct{ f *flusher }

func (completionWrites) what() string { return "completing instances" }

func (completionWrites) begin(w *pendingWrite) {
	w.mark = make(chan struct{})
	w.inst.h.committing.Store(&w.mark)
}

func (k completionWrites) end(w *pendingWrite, outcome error) {
	inst, c := w.inst, w.completion
	switch {
	case errors.Is(outcome, errWriteAbandoned):
	case outcome != nil:
		k.f.lost(inst, outcome)
	default:
		inst.h.state.Store(c.Status)
		inst.h.shard.send(func(s *shard) { s.completed(inst, c) })
	}
	inst.h.committing.CompareAndSwap(&w.mark, nil)
	close(w.mark)
}

func (k completionWrites) call(ctx context.Context, ws []*pendingWrite) ([]error, error) {
	batch := make([]port.Completion, len(ws))
	for i, w := range ws {
		batch[i] = *w.completion
	}
	return k.f.e.cfg.Store.CompleteInstances(ctx, batch)
}

// lost evicts an instance whose write was refused.
func (f *flusher) lost(inst *instance, err error) {
	if !errors.Is(err, port.ErrOwnershipLost) {
		inst.lg.Error("unexpected outcome of a write; evicting the instance", zap.Error(err))
	}
	inst.h.shard.send(func(s *shard) { s.evict(inst, "write refused: "+err.Error()) })
}

// retryBackoff runs op until it returns nil or ctx ends (then it returns
// ctx's error joined with op's last one).
func retryBackoff(ctx context.Context, clk clock.Clock, op func() error) error {
	const (
		first = 10 * time.Millisecond
		limit = time.Second
	)
	backoff := first
	var timer clock.Timer
	for {
		err := op()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return errors.Join(ctx.Err(), err)
		}
		if timer == nil {
			timer = clk.NewTimer(backoff)
			defer timer.Stop()
		} else {
			timer.Reset(backoff)
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-timer.C():
		}
		backoff = min(2*backoff, limit)
	}
}
