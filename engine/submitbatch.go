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
// the engine's own commits, and on SQLite there is one writer. A goroutine
// lives while submissions are pending: the first submission to find none
// being written starts it, and it writes batch after batch until none is
// left, then exits. It does not hand the next batch to a waiting
// submitter, which would first have to be scheduled (a millisecond or
// more on a busy node, with the store's turn lost meanwhile). No stopping
// needed: it works before the engine starts, and every batch it takes has
// callers waiting for it.
type submitBatcher struct {
	mu      sync.Mutex
	busy    bool // the goroutine runs
	pending []*submitCall
}

type submitCall struct {
	in   NewInstance
	q    Queued
	err  error
	done chan struct{} // closed when q, err are set
}

// queue queues one instance, batched with whatever else is being
// submitted, and waits for its commit. It takes no context: the batch
// serves several callers and runs on a context of its own (bounded by
// submitBatchTimeout), and an instance that was queued is reported so.
func (b *submitBatcher) queue(store Store, in NewInstance) (Queued, error) {
	c := &submitCall{in: in, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, c)
	start := !b.busy
	b.busy = true
	b.mu.Unlock()
	if start {
		go b.drain(store)
	}
	<-c.done
	return c.q, c.err
}

// drain writes batches from the head of pending until none is left.
func (b *submitBatcher) drain(store Store) {
	for {
		b.mu.Lock()
		if len(b.pending) == 0 {
			b.busy = false
			b.mu.Unlock()
			return
		}
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

		ctx, cancel := context.WithTimeout(context.Background(), submitBatchTimeout)
		queueBatch(ctx, store, batch)
		cancel()
		for _, c := range batch {
			close(c.done)
		}
	}
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
