package engine

import (
	"context"
	"errors"
	"sync"
	"time"
)

// maxSubmitBatch bounds how many submissions one store transaction queues.
const maxSubmitBatch = 256

// submitBatchTimeout bounds one batched QueueInstances call. The batch
// serves several callers, so it runs on a context of its own rather than
// on whichever caller's happens to write it.
const submitBatchTimeout = 30 * time.Second

// submitBatcher group-commits concurrent submissions: one QueueInstances
// call (one transaction, one fsync) for every submission waiting when the
// store is free, instead of one each — the store's writer is shared with
// the engine's own commits, and on SQLite there is one writer. Whoever
// submits while no batch is being written writes the next one; the others
// wait for their answer or to be promoted to write the next batch. No
// goroutine of its own: it works before the engine starts and needs no
// stopping.
type submitBatcher struct {
	mu      sync.Mutex
	busy    bool
	pending []*submitCall
}

type submitCall struct {
	in      NewInstance
	q       Queued
	err     error
	done    chan struct{} // closed when q, err are set
	promote chan struct{} // closed when this call writes the next batch
}

// queue queues one instance, batched with whatever else is being
// submitted.
func (b *submitBatcher) queue(ctx context.Context, store Store, in NewInstance) (Queued, error) {
	c := &submitCall{in: in, done: make(chan struct{}), promote: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, c)
	lead := !b.busy
	b.busy = true
	b.mu.Unlock()
	if !lead {
		select {
		case <-c.done:
			return c.q, c.err
		case <-c.promote:
		}
	}
	b.write(ctx, store)
	<-c.done // the batch it wrote included it: it heads pending
	return c.q, c.err
}

// write takes a batch from the head of pending, writes it and answers its
// calls; then promotes the next pending call, or marks the batcher idle.
func (b *submitBatcher) write(ctx context.Context, store Store) {
	b.mu.Lock()
	var batch, rest []*submitCall
	keys := map[string]bool{}
	for _, c := range b.pending {
		// Two submissions with one idempotency key go in separate
		// batches, so that the second finds the first.
		if k := c.in.IdempotencyKey; len(batch) == maxSubmitBatch || (k != "" && keys[k]) {
			rest = append(rest, c)
			continue
		}
		if k := c.in.IdempotencyKey; k != "" {
			keys[k] = true
		}
		batch = append(batch, c)
	}
	b.pending = rest
	b.mu.Unlock()

	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), submitBatchTimeout)
	defer cancel()
	queueBatch(wctx, store, batch)
	for _, c := range batch {
		close(c.done)
	}

	b.mu.Lock()
	if len(b.pending) > 0 {
		close(b.pending[0].promote)
	} else {
		b.busy = false
	}
	b.mu.Unlock()
}

// queueBatch writes calls in one QueueInstances call. An idempotency
// conflict fails a whole batch, so a batch that meets one is split in
// halves and each written again, down to the submission at fault.
func queueBatch(ctx context.Context, store Store, calls []*submitCall) {
	in := make([]NewInstance, len(calls))
	for i, c := range calls {
		in[i] = c.in
	}
	q, err := store.QueueInstances(ctx, in)
	switch {
	case err == nil && len(q) != len(calls):
		err = errors.New("the store answered a different number of instances than it was given")
	case errors.Is(err, ErrIdempotencyConflict) && len(calls) > 1:
		queueBatch(ctx, store, calls[:len(calls)/2])
		queueBatch(ctx, store, calls[len(calls)/2:])
		return
	}
	for i, c := range calls {
		if err != nil {
			c.err = err
		} else {
			c.q = q[i]
		}
	}
}
