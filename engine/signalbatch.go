package engine

import (
	"context"
	"errors"
	"sync"
)

// maxSignalBatch bounds how many signals one store transaction records.
const maxSignalBatch = 256

// signalBatcher group-commits concurrent signals, as submitBatcher does
// submissions: one RecordSignals call (one transaction, one fsync) for
// every signal waiting when the store is free. A storm of signals — a
// deploy approving every instance that waits for it — otherwise costs a
// transaction each, and on SQLite the one writer is the engine's too.
type signalBatcher struct {
	mu      sync.Mutex
	busy    bool
	pending []*signalCall
}

type signalCall struct {
	in   NewSignal
	out  SignalOutcome
	err  error         // of the call as a whole
	done chan struct{} // closed when out, err are set
}

// record records one signal, batched with whatever else is being
// signalled, and waits for its commit.
func (b *signalBatcher) record(store Store, in NewSignal) (SignalOutcome, error) {
	c := &signalCall{in: in, done: make(chan struct{})}
	b.mu.Lock()
	b.pending = append(b.pending, c)
	start := !b.busy
	b.busy = true
	b.mu.Unlock()
	if start {
		go b.drain(store)
	}
	<-c.done
	return c.out, c.err
}

// drain writes batches from the head of pending until none is left.
func (b *signalBatcher) drain(store Store) {
	for {
		b.mu.Lock()
		n := min(len(b.pending), maxSignalBatch)
		if n == 0 {
			b.busy = false
			b.mu.Unlock()
			return
		}
		batch := b.pending[:n:n]
		b.pending = b.pending[n:]
		b.mu.Unlock()

		in := make([]NewSignal, len(batch))
		for i, c := range batch {
			in[i] = c.in
		}
		ctx, cancel := context.WithTimeout(context.Background(), submitBatchTimeout)
		out, err := store.RecordSignals(ctx, in)
		cancel()
		if err == nil && len(out) != len(batch) {
			err = errors.New("the store answered a different number of signals than it was given")
		}
		for i, c := range batch {
			if err != nil {
				c.err = err
			} else {
				c.out = out[i]
			}
			close(c.done)
		}
	}
}
