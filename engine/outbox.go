package engine

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"go.uber.org/zap"
)

// outOp is a dispatch, or (cancel set) a cancellation of d.AttemptKey.
type outOp struct {
	h      *holder
	cancel bool
	d      TaskDispatch
}

// outbox hands attempts to the Dispatcher. Shards push dispatches and
// cancels; one goroutine sends them in order, consecutive dispatches in
// batches of up to DispatchBatch. A failed Dispatch is retried with backoff
// until it is accepted — a dispatch is never lost — but attempts of
// instances that left this engine meanwhile are dropped from the retry.
// Cancels follow the dispatches queued before them, so a cancel never
// overtakes its dispatch.
type outbox struct {
	e   *Engine
	q   *mailbox[outOp]
	ops []outOp
	buf []TaskDispatch

	// stopDispatch is set by Stop: dispatches still queued are dropped.
	stopDispatch atomic.Bool
	closing      chan struct{}
	stopCtx      context.Context
	err          error
	done         chan struct{}
}

func newOutbox(e *Engine) *outbox {
	return &outbox{e: e, q: newMailbox[outOp](), closing: make(chan struct{}), done: make(chan struct{})}
}

func (o *outbox) run(ctx context.Context) {
	defer close(o.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-o.closing:
			o.err = o.send(o.stopCtx)
			return
		case <-o.q.signal:
			if err := o.send(ctx); err != nil {
				return // ctx is done
			}
		}
	}
}

// close sends the queued cancels with ctx (queued dispatches are dropped),
// ends the loop and waits for it.
func (o *outbox) close(ctx context.Context) error {
	o.stopDispatch.Store(true)
	o.stopCtx = ctx
	close(o.closing)
	select {
	case <-o.done:
		return o.err
	case <-ctx.Done():
		return fmt.Errorf("sending cancellations: %w", ctx.Err())
	}
}

// send processes everything queued, in order.
func (o *outbox) send(ctx context.Context) error {
	o.ops = o.q.take(o.ops)
	ops := o.ops
	var errs []error
	for i := 0; i < len(ops); {
		j := i + 1
		for j < len(ops) && ops[j].cancel == ops[i].cancel && j-i < o.e.cfg.DispatchBatch {
			j++
		}
		var err error
		if ops[i].cancel {
			err = o.sendCancels(ctx, ops[i:j])
		} else {
			err = o.sendDispatches(ctx, ops[i:j])
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

// sendDispatches sends one batch, retrying until the Dispatcher accepts it.
func (o *outbox) sendDispatches(ctx context.Context, ops []outOp) error {
	return retryBackoff(ctx, o.e.cfg.Clock, func() error {
		o.buf = o.buf[:0]
		if !o.stopDispatch.Load() {
			for i := range ops {
				if !ops[i].h.gone.Load() {
					o.buf = append(o.buf, ops[i].d)
				}
			}
		}
		if len(o.buf) == 0 {
			return nil
		}
		err := o.e.cfg.Dispatcher.Dispatch(ctx, o.buf)
		clear(o.buf)
		if err != nil && ctx.Err() == nil {
			o.e.log.Warn("dispatch failed; retrying", zap.Int("attempts", len(ops)), zap.Error(err))
		}
		return err
	})
}

// sendCancels sends one batch of cancellations, retrying on error.
func (o *outbox) sendCancels(ctx context.Context, ops []outOp) error {
	keys := make([]AttemptKey, len(ops))
	for i := range ops {
		keys[i] = ops[i].d.AttemptKey
	}
	return retryBackoff(ctx, o.e.cfg.Clock, func() error {
		err := o.e.cfg.Dispatcher.Cancel(ctx, keys)
		if err != nil && ctx.Err() == nil {
			o.e.log.Warn("cancel failed; retrying", zap.Int("attempts", len(keys)), zap.Error(err))
		}
		return err
	})
}
