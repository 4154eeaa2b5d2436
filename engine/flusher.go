package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/robonet/robonet/internal/clock"
)

// flushItem is one shard's write for one instance: results, a snapshot, or
// the completion. Items of an instance are applied in the order they were
// pushed.
type flushItem struct {
	inst       *instance
	results    []ActionResult
	state      []byte
	completion *Completion
}

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
// with every result durable. A write that fails as a whole is retried with
// backoff, never dropped; an instance refused with ErrOwnershipLost is
// evicted.
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
	results    []ActionResult
	state      []byte
	completion *Completion
}

// flush writes everything pending. It returns an error only when ctx ends
// before the writes succeed.
func (f *flusher) flush(ctx context.Context) error {
	f.items = f.q.take(f.items)
	if len(f.items) == 0 {
		return nil
	}
	rows := 0
	byInst := make(map[*instance]*pendingWrite, len(f.items))
	var order []*pendingWrite
	for i := range f.items {
		it := &f.items[i]
		rows += it.rows()
		w := byInst[it.inst]
		if w == nil {
			w = &pendingWrite{inst: it.inst}
			byInst[it.inst] = w
			order = append(order, w)
		}
		w.results = append(w.results, it.results...)
		if it.state != nil {
			w.state = it.state
		}
		if it.completion != nil {
			w.completion = it.completion
		}
	}
	f.rows.Add(-int64(rows))

	var progress, completions []*pendingWrite
	for _, w := range order {
		if w.completion != nil {
			w.completion.Results = append(w.results, w.completion.Results...)
			completions = append(completions, w)
		} else {
			progress = append(progress, w)
		}
	}
	// Progress first: an instance is in one list only, so the order
	// between the lists does not matter; within a list, chunks bound the
	// size of one Store call.
	return errors.Join(f.writeProgress(ctx, progress), f.writeCompletions(ctx, completions))
}

// chunks splits ws into runs of at most max rows (an instance is never
// split).
func chunks(ws []*pendingWrite, maxRows int, rows func(*pendingWrite) int) [][]*pendingWrite {
	var out [][]*pendingWrite
	start, n := 0, 0
	for i, w := range ws {
		r := rows(w)
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

func (f *flusher) writeProgress(ctx context.Context, ws []*pendingWrite) error {
	owner := f.e.cfg.Owner
	for _, chunk := range chunks(ws, f.e.cfg.FlushMaxRows, func(w *pendingWrite) int {
		if w.state != nil {
			return len(w.results) + 1
		}
		return len(w.results)
	}) {
		batch := make([]Progress, len(chunk))
		for i, w := range chunk {
			batch[i] = Progress{InstanceID: w.inst.id, Owner: owner, Results: w.results, State: w.state}
		}
		rows := 0
		for _, p := range batch {
			rows += len(p.Results)
			if p.State != nil {
				rows++
			}
		}
		var outcomes []error
		err := f.retry(ctx, "persisting progress", rows, func() (err error) {
			outcomes, err = f.e.cfg.Store.PersistProgress(ctx, batch)
			return err
		})
		if err != nil {
			return err
		}
		for i, w := range chunk {
			if i < len(outcomes) && outcomes[i] != nil {
				f.lost(w.inst, outcomes[i])
			}
		}
	}
	return nil
}

func (f *flusher) writeCompletions(ctx context.Context, ws []*pendingWrite) error {
	for _, chunk := range chunks(ws, f.e.cfg.FlushMaxRows, func(w *pendingWrite) int {
		return len(w.completion.Results) + 1
	}) {
		batch := make([]Completion, len(chunk))
		for i, w := range chunk {
			batch[i] = *w.completion
		}
		rows := 0
		for _, c := range batch {
			rows += len(c.Results) + 1
		}
		// Reads of these instances wait for the outcome (holder.settled):
		// the Store may say finished as soon as the call commits.
		marks := make([]chan struct{}, len(chunk))
		for i, w := range chunk {
			marks[i] = make(chan struct{})
			w.inst.h.committing.Store(&marks[i])
		}
		var outcomes []error
		err := f.retry(ctx, "completing instances", rows, func() (err error) {
			outcomes, err = f.e.cfg.Store.CompleteInstances(ctx, batch)
			return err
		})
		for i, w := range chunk {
			inst, c := w.inst, w.completion
			switch {
			case err != nil:
			case i < len(outcomes) && outcomes[i] != nil:
				f.lost(inst, outcomes[i])
			default:
				inst.h.state.Store(statusState(c.Status))
				inst.h.shard.send(func(s *shard) { s.completed(inst, c) })
			}
			inst.h.committing.Store(nil)
			close(marks[i])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// lost evicts an instance whose write was refused.
func (f *flusher) lost(inst *instance, err error) {
	if !errors.Is(err, ErrOwnershipLost) {
		inst.lg.Error("unexpected outcome of a write; evicting the instance", zap.Error(err))
	}
	inst.h.shard.send(func(s *shard) { s.evict(inst, "write refused: "+err.Error()) })
}

// retry runs op until it succeeds or ctx ends, backing off from 10 ms to
// 1 s between attempts.
func (f *flusher) retry(ctx context.Context, what string, rows int, op func() error) error {
	m := f.e.cfg.Metrics
	return retryBackoff(ctx, f.e.cfg.Clock, func() error {
		start := time.Now()
		err := op()
		m.CommitSeconds.Observe(time.Since(start).Seconds())
		if err == nil {
			m.CommitRows.Observe(float64(rows))
		}
		if err != nil && ctx.Err() == nil {
			f.e.log.Warn("store write failed; retrying", zap.String("op", what), zap.Error(err))
		}
		return err
	})
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
