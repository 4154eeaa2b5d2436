package engine

// PendingRows returns the rows waiting for the next group commit.
func (e *Engine) PendingRows() int64 { return e.flusher.rows.Load() }

// BoundAttempts bounds the attempts of every task of v (MaxAttemptsShown).
func BoundAttempts(v *InstanceView) { boundAttempts(v) }
