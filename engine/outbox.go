package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/robonet/robonet/engine/port"
)

// outOp is a dispatch, or (cancel set) a cancellation of d.AttemptKey.
// d.Capability is set either way: it picks the lane.
type outOp struct {
	h      *holder
	cancel bool
	d      port.TaskDispatch
}

// outbox hands attempts to the Dispatcher, in one lane per capability:
// each lane has its own queue and goroutine, so a capability whose Waggler
// is unreachable (its dispatches retried with backoff) holds up only its
// own attempts. Within a lane, ops go out in the order the shards produced
// them — a cancel never overtakes its dispatch — consecutive dispatches in
// batches of up to DispatchBatch.
//
// A dispatch is never lost: the Dispatcher answers per attempt, and the
// attempts it did not accept are retried with backoff until it does, except
// those refused with ErrStaleTerm (a newer engine leads; this one is being
// deposed) and those of instances that left this engine meanwhile.
type outbox struct {
	e *Engine

	mu     sync.Mutex
	lanes  map[string]*lane
	ctx    context.Context // the runloop's, set by run
	closed bool

	// stopDispatch is set by Stop: dispatches still queued are dropped.
	stopDispatch atomic.Bool
}

// lane is the queue and goroutine of one capability.
type lane struct {
	o          *outbox
	capability string
	q          *mailbox[outOp]
	ops        []outOp
	buf        []port.TaskDispatch
	pending    []outOp // dispatches of the batch not accepted yet

	closing chan struct{}
	stopCtx context.Context
	err     error
	done    chan struct{}
}

func newOutbox(e *Engine) *outbox {
	return &outbox{e: e, lanes: make(map[string]*lane)}
}

// start records the runloop's context; lanes started later run under it.
func (o *outbox) start(ctx context.Context) {
	o.mu.Lock()
	o.ctx = ctx
	o.mu.Unlock()
}

// push hands the ops of one shard iteration to their lanes.
func (o *outbox) push(ops []outOp) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return
	}
	for i := 0; i < len(ops); {
		j := i + 1
		for j < len(ops) && ops[j].d.Capability == ops[i].d.Capability {
			j++
		}
		o.laneLocked(ops[i].d.Capability).q.pushAll(ops[i:j])
		i = j
	}
}

// laneLocked returns the lane of capability, starting it on first use;
// o.mu held.
func (o *outbox) laneLocked(capability string) *lane {
	l := o.lanes[capability]
	if l == nil {
		l = &lane{o: o, capability: capability, q: newMailbox[outOp](), closing: make(chan struct{}), done: make(chan struct{})}
		o.lanes[capability] = l
		ctx := o.ctx
		o.e.goAll(func() { l.run(ctx) })
	}
	return l
}

// close sends every lane's queued cancels with ctx (queued dispatches are
// dropped), ends the lanes and waits for them.
func (o *outbox) close(ctx context.Context) error {
	o.stopDispatch.Store(true)
	o.mu.Lock()
	o.closed = true
	lanes := make([]*lane, 0, len(o.lanes))
	for _, l := range o.lanes {
		l.stopCtx = ctx
		close(l.closing)
		lanes = append(lanes, l)
	}
	o.mu.Unlock()
	var errs []error
	for _, l := range lanes {
		select {
		case <-l.done:
			if l.err != nil {
				errs = append(errs, fmt.Errorf("capability %s: %w", l.capability, l.err))
			}
		case <-ctx.Done():
			return fmt.Errorf("sending cancellations: %w", ctx.Err())
		}
	}
	return errors.Join(errs...)
}

func (l *lane) run(ctx context.Context) {
	defer close(l.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.closing:
			l.err = l.send(l.stopCtx)
			return
		case <-l.q.signal:
			if err := l.send(ctx); err != nil {
				return // ctx is done
			}
		}
	}
}

// send processes everything queued, in order.
func (l *lane) send(ctx context.Context) error {
	l.ops = l.q.take(l.ops)
	ops := l.ops
	var errs []error
	for i := 0; i < len(ops); {
		j := i + 1
		for j < len(ops) && ops[j].cancel == ops[i].cancel && j-i < l.o.e.cfg.DispatchBatch {
			j++
		}
		var err error
		if ops[i].cancel {
			err = l.sendCancels(ctx, ops[i:j])
		} else {
			err = l.sendDispatches(ctx, ops[i:j])
		}
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
		}
		i = j
	}
	return errors.Join(errs...)
}

// sendDispatches sends one batch, retrying the attempts the Dispatcher did
// not accept until it does.
func (l *lane) sendDispatches(ctx context.Context, ops []outOp) error {
	e := l.o.e
	l.pending = append(l.pending[:0], ops...)
	defer clear(l.pending)
	return retryBackoff(ctx, e.cfg.Clock, func() error {
		live := l.pending[:0]
		if !l.o.stopDispatch.Load() {
			for _, op := range l.pending {
				if !op.h.gone.Load() {
					live = append(live, op)
				}
			}
		}
		l.pending = live
		if len(live) == 0 {
			return nil
		}
		l.buf = l.buf[:0]
		for _, op := range live {
			l.buf = append(l.buf, op.d)
		}
		results := e.cfg.Dispatcher.Dispatch(ctx, l.buf)
		clear(l.buf)
		if len(results) != 0 && len(results) != len(live) {
			// A broken Dispatcher: retrying everything is the safe reading
			// (dispatch is at-least-once).
			return fmt.Errorf("the dispatcher answered %d results for %d attempts", len(results), len(live))
		}
		var (
			retry []outOp
			first error
			stale int
		)
		for i, err := range results {
			switch {
			case err == nil:
			case errors.Is(err, port.ErrStaleTerm):
				stale++
			default:
				retry = append(retry, live[i])
				if first == nil {
					first = err
				}
			}
		}
		if stale > 0 {
			e.log.Warn("dispatches refused: a newer term leads; this engine is being deposed",
				zap.String("capability", l.capability), zap.Int("attempts", stale))
		}
		l.pending = append(l.pending[:0], retry...)
		if first != nil && ctx.Err() == nil {
			e.log.Warn("dispatch not accepted; retrying", zap.String("capability", l.capability),
				zap.Int("attempts", len(retry)), zap.Int("accepted", len(live)-len(retry)-stale), zap.Error(first))
		}
		return first
	})
}

// sendCancels sends one batch of cancellations, retrying on error.
func (l *lane) sendCancels(ctx context.Context, ops []outOp) error {
	e := l.o.e
	keys := make([]port.AttemptKey, len(ops))
	for i := range ops {
		keys[i] = ops[i].d.AttemptKey
	}
	return retryBackoff(ctx, e.cfg.Clock, func() error {
		err := e.cfg.Dispatcher.Cancel(ctx, e.cfg.Term, keys)
		if errors.Is(err, port.ErrStaleTerm) {
			return nil // a newer engine owns these attempts now
		}
		if err != nil && ctx.Err() == nil {
			e.log.Warn("cancel failed; retrying", zap.String("capability", l.capability), zap.Int("attempts", len(keys)), zap.Error(err))
		}
		return err
	})
}
