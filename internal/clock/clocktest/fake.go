// Package clocktest is the fake clock of every test: time moves only when
// the test advances it, due timers fire in order (channel timers deliver,
// AfterFunc timers run in the advancing goroutine), and tests wait for a
// timer to be armed instead of sleeping.
package clocktest

import (
	"sync"
	"testing"
	"time"

	"github.com/robonet/robonet/internal/clock"
)

// waitLimit bounds WaitTimer.
const waitLimit = 20 * time.Second

// Fake is a clock.Clock for tests.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	timers  map[*timer]struct{} // armed
	changed chan struct{}       // closed and replaced when timers change
}

var _ clock.Clock = (*Fake)(nil)

// New returns a fake clock at a fixed time.
func New() *Fake {
	return &Fake{
		now:     time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
		timers:  map[*timer]struct{}{},
		changed: make(chan struct{}),
	}
}

// Now returns the fake time.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// NewTimer arms a channel timer.
func (c *Fake) NewTimer(d time.Duration) clock.Timer {
	t := &timer{c: c, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// AfterFunc arms a timer that calls f in the goroutine that advances the
// clock past it.
func (c *Fake) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := &timer{c: c, f: f}
	t.Reset(d)
	return t
}

func (c *Fake) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// Advance moves time forward by d, firing every timer due on the way
// (including timers those arm), each at its own time and in order.
func (c *Fake) Advance(d time.Duration) {
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next *timer
		for t := range c.timers {
			if !t.at.After(target) && (next == nil || t.at.Before(next.at) || (t.at.Equal(next.at) && t.seq < next.seq)) {
				next = t
			}
		}
		if next == nil {
			c.now = target
			c.notifyLocked()
			c.mu.Unlock()
			return
		}
		delete(c.timers, next)
		if next.at.After(c.now) {
			c.now = next.at
		}
		now := c.now
		if next.f == nil {
			select {
			case next.ch <- now:
			default:
			}
		}
		c.notifyLocked()
		c.mu.Unlock()
		if next.f != nil {
			next.f()
		}
	}
}

// WaitTimer waits until a timer is armed to fire within d from now, and
// returns how far ahead it is.
func (c *Fake) WaitTimer(t testing.TB, d time.Duration) time.Duration {
	t.Helper()
	limit := time.NewTimer(waitLimit)
	defer limit.Stop()
	for {
		c.mu.Lock()
		var (
			next  time.Duration
			found bool
		)
		for tm := range c.timers {
			if ahead := tm.at.Sub(c.now); ahead <= d && (!found || ahead < next) {
				next, found = ahead, true
			}
		}
		changed := c.changed
		c.mu.Unlock()
		if found {
			return next
		}
		select {
		case <-changed:
		case <-limit.C:
			t.Fatalf("no timer was armed within %s of now", d)
		}
	}
}

// AdvanceToTimer waits for a timer within d and advances time to it.
func (c *Fake) AdvanceToTimer(t testing.TB, d time.Duration) {
	t.Helper()
	c.Advance(c.WaitTimer(t, d))
}

// HasTimerWithin reports whether a timer is armed to fire within d.
func (c *Fake) HasTimerWithin(d time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for tm := range c.timers {
		if tm.at.Sub(c.now) <= d {
			return true
		}
	}
	return false
}

// Armed returns how many timers are armed.
func (c *Fake) Armed() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

type timer struct {
	c   *Fake
	ch  chan time.Time // channel timers
	f   func()         // AfterFunc timers
	at  time.Time
	seq uint64
}

func (t *timer) C() <-chan time.Time { return t.ch }

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, armed := t.c.timers[t]
	delete(t.c.timers, t)
	t.drain()
	t.c.notifyLocked()
	return armed
}

func (t *timer) Reset(d time.Duration) bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	_, armed := t.c.timers[t]
	t.drain()
	t.at = t.c.now.Add(d)
	t.c.seq++
	t.seq = t.c.seq
	if d <= 0 && t.f == nil {
		delete(t.c.timers, t)
		t.ch <- t.c.now
	} else {
		t.c.timers[t] = struct{}{}
	}
	t.c.notifyLocked()
	return armed
}

// drain empties the channel so that no stale time is received after Stop
// or Reset; t.c.mu held.
func (t *timer) drain() {
	if t.ch == nil {
		return
	}
	select {
	case <-t.ch:
	default:
	}
}
