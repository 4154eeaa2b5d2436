package engine

import "time"

// Clock is the engine's only source of time: the runloop reads Now for every
// graph event and arms Timers for retries, timeouts, deadlines, lease
// refreshes, claim polls and group-commit lingering. Tests inject a fake
// whose timers fire when the test advances it, so no test sleeps.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a started timer that delivers on C after d.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the engine uses. Reset and Stop follow
// the Go 1.23 semantics: after either returns, no stale value is received
// from C.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was
	// active.
	Stop() bool
	// Reset re-arms the timer to fire after d; it reports whether it was
	// active.
	Reset(d time.Duration) bool
}

// SystemClock returns the wall clock.
func SystemClock() Clock { return systemClock{} }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) Timer { return systemTimer{time.NewTimer(d)} }

type systemTimer struct{ t *time.Timer }

func (t systemTimer) C() <-chan time.Time        { return t.t.C }
func (t systemTimer) Stop() bool                 { return t.t.Stop() }
func (t systemTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

// idleTimer returns a stopped timer, for loops that arm it later.
func idleTimer(c Clock) Timer {
	t := c.NewTimer(time.Hour)
	t.Stop()
	return t
}
