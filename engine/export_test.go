package engine

import (
	"context"

	"github.com/google/uuid"
)

// PendingRows returns the rows waiting for the next group commit.
func (e *Engine) PendingRows() int64 { return e.flusher.rows.Load() }

// BoundAttempts bounds the attempts of every task of v (MaxAttemptsShown).
func BoundAttempts(v *InstanceView) { boundAttempts(v) }

// ListInstancesLive lists as an engine does, with live giving the state of
// the instances it holds.
func (q *Query) ListInstancesLive(ctx context.Context, req ListRequest, live func(uuid.UUID) (InstanceState, bool)) (ListResult, error) {
	return q.listInstances(ctx, req, func(_ context.Context, id uuid.UUID) (InstanceState, bool, error) {
		st, ok := live(id)
		return st, ok, nil
	})
}
