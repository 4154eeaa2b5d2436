package engine

import (
	"context"
	"errors"
	"sync"

	"github.com/robonet/robonet/engine/port"
)

// maxSignalBatch bounds how many signals one store transaction records.
const maxSignalBatch = 256

// signalBatcher group-commits concurrent signals (groupCommit), as
// submitBatcher does submissions: one RecordSignals call for every signal
// waiting when the store is free. A storm of signals — a deploy approving
// every instance that waits for it — otherwise costs a transaction each,
// and on SQLite the one writer is the engine's too.
type signalBatcher struct {
	once sync.Once
	gc   groupCommit[signalCall]
}

type signalCall struct {
	in   port.NewSignal
	out  port.SignalOutcome
	err  error         // of the call as a whole
	done chan struct{} // closed when out, err are set
}

// record records one signal, batched with whatever else is being
// signalled, and waits for its commit.
func (b *signalBatcher) record(store port.Store, in port.NewSignal) (port.SignalOutcome, error) {
	b.once.Do(func() {
		b.gc.next = firstN[signalCall](maxSignalBatch)
		b.gc.write = func(batch []*signalCall) { recordBatch(store, batch) }
	})
	c := &signalCall{in: in, done: make(chan struct{})}
	b.gc.do(c, c.done)
	return c.out, c.err
}

// recordBatch writes calls in one RecordSignals call.
func recordBatch(store port.Store, batch []*signalCall) {
	in := make([]port.NewSignal, len(batch))
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
