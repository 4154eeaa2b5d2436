package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/robonet/robonet/engine/port"
)

// maxSubmitBatch bounds how many submissions one store transaction queues.
const maxSubmitBatch = 256

// submitBatchTimeout bounds one batched QueueInstances call. The batch
// serves several callers, so it runs on a context of its own rather than
// on whichever caller's happens to write it.
const submitBatchTimeout = 30 * time.Second

// submitBatcher group-commits concurrent submissions (groupCommit): one
// QueueInstances call for every submission waiting when the store is
// free.
type submitBatcher struct {
	once sync.Once
	gc   groupCommit[submitCall]
}

type submitCall struct {
	in   port.NewInstance
	q    port.Queued
	err  error
	done chan struct{} // closed when q, err are set
}

// queue queues one instance, batched with whatever else is being
// submitted, and waits for its commit. It takes no context: the batch
// serves several callers and runs on a context of its own (bounded by
// submitBatchTimeout), and an instance that was queued is reported so.
func (b *submitBatcher) queue(store port.Store, in port.NewInstance) (port.Queued, error) {
	b.once.Do(func() {
		b.gc.next = nextSubmitBatch
		b.gc.write = func(batch []*submitCall) {
			ctx, cancel := context.WithTimeout(context.Background(), submitBatchTimeout)
			queueBatch(ctx, store, batch)
			cancel()
			for _, c := range batch {
				close(c.done)
			}
		}
	})
	c := &submitCall{in: in, done: make(chan struct{})}
	b.gc.do(c, c.done)
	return c.q, c.err
}

// nextSubmitBatch takes up to maxSubmitBatch pending submissions, in
// order; two with one idempotency key go in separate batches, so that the
// second finds the first.
func nextSubmitBatch(pending []*submitCall) (batch, rest []*submitCall) {
	keys := map[string]bool{}
	for _, c := range pending {
		if k := c.in.IdempotencyKey; len(batch) == maxSubmitBatch || (k != "" && keys[k]) {
			rest = append(rest, c)
			continue
		}
		if k := c.in.IdempotencyKey; k != "" {
			keys[k] = true
		}
		batch = append(batch, c)
	}
	return batch, rest
}

// queueBatch writes calls in one QueueInstances call. An idempotency
// conflict fails a whole batch, so a batch that meets one is split in
// halves and each written again, down to the submission at fault.
func queueBatch(ctx context.Context, store port.Store, calls []*submitCall) {
	in := make([]port.NewInstance, len(calls))
	for i, c := range calls {
		in[i] = c.in
	}
	q, err := store.QueueInstances(ctx, in)
	switch {
	case err == nil && len(q) != len(calls):
		err = errors.New("the store answered a different number of instances than it was given")
	case errors.Is(err, port.ErrIdempotencyConflict) && len(calls) > 1:
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
