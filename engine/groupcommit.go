package engine

import "sync"

// groupCommit writes the calls of concurrent callers in batches — one store
// transaction (one fsync) for every call waiting when the store is free,
// instead of one each: the store's writer is shared with the engine's own
// commits, and on SQLite there is one writer. A goroutine lives while
// calls are pending: the first call to find none being written starts it,
// and it writes batch after batch until none is left, then exits. It does
// not hand the next batch to a waiting caller, which would first have to
// be scheduled (a millisecond or more on a busy node, with the store's
// turn lost meanwhile). No stopping needed: it works before the engine
// starts, and every batch it takes has callers waiting for it.
type groupCommit[C any] struct {
	mu      sync.Mutex
	busy    bool // the goroutine runs
	pending []*C
	// next splits the pending calls into the next batch and the rest, in
	// order; write writes a batch and closes each call's done channel.
	next  func(pending []*C) (batch, rest []*C)
	write func(batch []*C)
}

// do adds c to the pending calls and waits until done is closed (by the
// write of the batch that holds it).
func (g *groupCommit[C]) do(c *C, done <-chan struct{}) {
	g.mu.Lock()
	g.pending = append(g.pending, c)
	start := !g.busy
	g.busy = true
	g.mu.Unlock()
	if start {
		go g.drain()
	}
	<-done
}

// drain writes batches from the head of pending until none is left.
func (g *groupCommit[C]) drain() {
	for {
		g.mu.Lock()
		if len(g.pending) == 0 {
			g.busy = false
			g.mu.Unlock()
			return
		}
		var batch []*C
		batch, g.pending = g.next(g.pending)
		g.mu.Unlock()
		g.write(batch)
	}
}

// firstN is a next that takes up to n calls.
func firstN[C any](n int) func([]*C) ([]*C, []*C) {
	return func(pending []*C) ([]*C, []*C) {
		n := min(n, len(pending))
		return pending[:n:n], pending[n:]
	}
}
