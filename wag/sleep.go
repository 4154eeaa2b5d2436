package wag

import (
	"context"
	"fmt"
	"time"

	"github.com/robonet/robonet/engine/value"
	"github.com/robonet/robonet/internal/clock"
)

// sleepSteps is how many progress steps the sleep action reports.
const sleepSteps = 10

// sleepAction waits for input.duration, reporting progress in steps.
func sleepAction(ctx context.Context, call *Call) (any, error) {
	m, err := inputObject("sleep", call.Input, `{duration: "2s"}`, "duration")
	if err != nil {
		return nil, err
	}
	raw, ok := m["duration"]
	if !ok || raw == nil {
		return nil, inputError("sleep", "duration", "is required, e.g. duration: \"2s\"")
	}
	s, ok := raw.(string)
	if !ok {
		return nil, inputError("sleep", "duration", "must be a duration string such as \"2s\", got %s", value.TypeName(raw))
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return nil, inputError("sleep", "duration", "%q is not a duration; write e.g. \"2s\" or \"1m\"", s)
	}
	clock := call.runtime().clock
	step := d / sleepSteps
	for done := int64(0); done < sleepSteps; done++ {
		call.progress(Progress{StepsDone: done, StepsTotal: sleepSteps, ETA: d - time.Duration(done)*step, Message: "sleeping"})
		wait := step
		if done == sleepSteps-1 {
			wait = d - time.Duration(done)*step
		}
		if err := sleepCtx(ctx, clock, wait); err != nil {
			return nil, fmt.Errorf("sleep: %w", err)
		}
	}
	call.progress(Progress{StepsDone: sleepSteps, StepsTotal: sleepSteps, Message: "slept"})
	return map[string]any{"slept": d.String()}, nil
}

// sleepCtx waits d on the clock, or until ctx is done.
func sleepCtx(ctx context.Context, clk clock.Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	ch := make(chan struct{})
	t := clk.AfterFunc(d, func() { close(ch) })
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		t.Stop()
		return ctxErr(ctx)
	}
}
