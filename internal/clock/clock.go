// Package clock is the one source of time for the services of a node: the
// engine's runloop, the Waggler layer and its workers read Now and arm
// timers through a Clock, so that tests inject the fake of package
// clocktest, whose timers fire when the test advances it, and no test
// sleeps.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and arms timers.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a started timer that delivers on C after d.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f once, after d has elapsed: in its own goroutine
	// with the system clock, in the goroutine that advances a fake.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the part of *time.Timer the services use. Reset and Stop follow
// the Go 1.23 semantics: after either returns, no stale value is received
// from C.
type Timer interface {
	// C delivers the time when the timer fires; nil for an AfterFunc
	// timer.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was
	// active.
	Stop() bool
	// Reset re-arms the timer to fire after d; it reports whether it was
	// active.
	Reset(d time.Duration) bool
}

// System returns the wall clock.
func System() Clock { return system{} }

type system struct{}

func (system) Now() time.Time { return time.Now() }

func (system) NewTimer(d time.Duration) Timer { return sysTimer{time.NewTimer(d)} }

func (system) AfterFunc(d time.Duration, f func()) Timer { return sysTimer{time.AfterFunc(d, f)} }

type sysTimer struct{ t *time.Timer }

func (t sysTimer) C() <-chan time.Time        { return t.t.C }
func (t sysTimer) Stop() bool                 { return t.t.Stop() }
func (t sysTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

// Idle returns a stopped timer of c, for loops that arm it later.
func Idle(c Clock) Timer {
	t := c.NewTimer(time.Hour)
	t.Stop()
	return t
}

// UnixNanos is t in Unix nanoseconds, 0 for the zero time: the form a time
// takes on the wire, in stored state and in a Waggler's remembered results.
func UnixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// FromUnixNanos undoes UnixNanos, in UTC.
func FromUnixNanos(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// Every calls f every d by c, the first time d from now, until ctx ends.
// A call that takes long delays the next: the next is d after it returns.
func Every(ctx context.Context, c Clock, d time.Duration, f func()) {
	t := c.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		f()
		t.Reset(d)
	}
}
