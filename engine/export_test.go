package engine

import (
	"context"
	"sync"

	"github.com/google/uuid"

	"github.com/robonet/robonet/engine/port"
)

// PendingRows returns the rows waiting for the next group commit.
func (e *Engine) PendingRows() int64 { return e.flusher.rows.Load() }

// BoundAttempts bounds the attempts of every task of v (MaxAttemptsShown).
func BoundAttempts(v *InstanceView) { boundAttempts(v) }

// ListInstancesLive lists as an engine does, with live giving the state of
// the instances it holds.
func (q *Query) ListInstancesLive(ctx context.Context, req ListRequest, live func(uuid.UUID) (port.InstanceState, bool)) (ListResult, error) {
	return q.listInstances(ctx, req, func(_ context.Context, id uuid.UUID) (port.InstanceState, bool, error) {
		st, ok := live(id)
		return st, ok, nil
	})
}

// HoldShard blocks the shard of a held instance until release runs (once
// or more); queued counts the messages waiting in its mailbox meanwhile.
func (e *Engine) HoldShard(id uuid.UUID) (queued func() int, release func()) {
	v, ok := e.held.Load(id)
	if !ok {
		panic("HoldShard: instance not held")
	}
	sh := v.(*holder).shard
	holding, gate := make(chan struct{}), make(chan struct{})
	sh.send(func(*shard) { close(holding); <-gate })
	<-holding
	queued = func() int {
		sh.inbox.mu.Lock()
		defer sh.inbox.mu.Unlock()
		return len(sh.inbox.items)
	}
	var once sync.Once
	return queued, func() { once.Do(func() { close(gate) }) }
}
