package wag

import (
	"sync"
	"time"
)

// Clock is the source of time for everything in this package: heartbeats,
// ladder ticks, attempt timeouts, the grace before a hung action is
// abandoned, and the sleep action. Production uses RealClock; tests use a
// fake that fires timers when it is advanced.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f once, in its own goroutine or in the caller of the
	// fake's Advance, after d has elapsed.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop prevents the call if it has not started; it reports whether it
	// did so.
	Stop() bool
}

// RealClock returns the Clock of the wall clock.
func RealClock() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// callbacks owns the timer callbacks of one service, so that Stop can wait
// for the ones already running and refuse the ones that fire afterwards:
// with the real clock every fired timer is a goroutine, and a service owns
// and waits for all of its goroutines.
type callbacks struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// afterFunc is clock.AfterFunc with f guarded by the group.
func (g *callbacks) afterFunc(clock Clock, d time.Duration, f func()) Timer {
	return clock.AfterFunc(d, func() {
		g.mu.Lock()
		if g.closed {
			g.mu.Unlock()
			return
		}
		g.wg.Add(1)
		g.mu.Unlock()
		defer g.wg.Done()
		f()
	})
}

// close refuses callbacks from now on and waits for those running.
func (g *callbacks) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

// every calls f every d until the returned stop function is called. The
// callback re-arms itself after f returns, so calls never overlap.
func (g *callbacks) every(clock Clock, d time.Duration, f func()) (stop func()) {
	var (
		mu      sync.Mutex
		timer   Timer
		stopped bool
		tick    func()
	)
	tick = func() {
		f()
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			timer = g.afterFunc(clock, d, tick)
		}
	}
	mu.Lock()
	timer = g.afterFunc(clock, d, tick)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		timer.Stop()
	}
}
