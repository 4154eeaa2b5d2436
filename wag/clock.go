package wag

import (
	"sync"
	"time"

	"github.com/robonet/robonet/internal/clock"
)

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
func (g *callbacks) afterFunc(clk clock.Clock, d time.Duration, f func()) clock.Timer {
	return clk.AfterFunc(d, func() {
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
func (g *callbacks) every(clk clock.Clock, d time.Duration, f func()) (stop func()) {
	var (
		mu      sync.Mutex
		timer   clock.Timer
		stopped bool
		tick    func()
	)
	tick = func() {
		f()
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			timer = g.afterFunc(clk, d, tick)
		}
	}
	mu.Lock()
	timer = g.afterFunc(clk, d, tick)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		timer.Stop()
	}
}
