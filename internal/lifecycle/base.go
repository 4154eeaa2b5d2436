package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Base is the one Start/Stop of a long-running component, a field of it
// (as river's startstop.BaseStartStop is embedded; a named field keeps Go
// and Wait out of the component's API): it keeps the component's State,
// runs the component's stop exactly once, makes every Stop wait for it,
// and owns the component's goroutines.
//
//	type Thing struct {
//		life lifecycle.Base
//		...
//	}
//
//	func (t *Thing) Start(ctx context.Context) error {
//		if err := t.life.Start("thing"); err != nil {
//			return err
//		}
//		t.life.Go(t.loop)
//		return nil
//	}
//
//	func (t *Thing) Stop(ctx context.Context) error {
//		return t.life.Stop(ctx, func(was lifecycle.State) error {
//			close(t.quit) // the group is waited for after this returns
//			return nil
//		})
//	}
//
// Base has its own lock, always taken last: a component may call Start,
// Running or Go while holding its own mutex, and its stop function may take
// that mutex (Base does not hold its lock while stop runs).
type Base struct {
	mu    sync.Mutex
	state State
	done  chan struct{} // closed once the first stop and the group are over
	err   error         // the first stop's outcome, read after done
	// running counts the group's goroutines; idle, made when Stop begins
	// (Go starts nothing after that), is closed once it is zero.
	running int
	idle    chan struct{}
}

// Start moves New to Running; name says whose error it is otherwise
// (ErrStarted, ErrStopped).
func (b *Base) Start(name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state.Start(name)
}

// State is where the component is now.
func (b *Base) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// Running reports whether the component runs (started, not stopping).
func (b *Base) Running() bool { return b.State().Running() }

// Go runs f on a goroutine of the component's group, which Stop waits for.
// Once Stop has begun it starts nothing and returns false: a goroutine
// that would start while its owner stops has nothing left to do.
func (b *Base) Go(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state.Stopped() {
		return false
	}
	b.running++
	go func() {
		defer b.ended()
		f()
	}()
	return true
}

// ended counts a goroutine of the group out.
func (b *Base) ended() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.running--
	if b.running == 0 && b.idle != nil {
		close(b.idle)
	}
}

// Wait waits for the goroutines started with Go. It is for a stop
// function, which calls it where the order matters (before closing what
// they use); Stop waits again after stop returns.
func (b *Base) Wait() {
	b.mu.Lock()
	idle := b.idle
	b.mu.Unlock()
	if idle == nil {
		panic("lifecycle: Wait called before Stop began (it is for a stop function)")
	}
	<-idle
}

// Stop stops the component once and waits. The first call, whatever the
// component's state, marks it Stopped (so Go starts nothing more) and runs
// stop with the state it left — New (nothing runs yet; release what New
// built) or Running — then waits for the group. Every call, the first
// included and however many run at once, returns only after that is over,
// with stop's error; a call whose ctx ends first returns ctx's error
// instead (the stop, or the wait for the group, goes on). A Halt or an
// Abandon is a Stop with another stop function: whichever comes first
// decides how the component goes.
func (b *Base) Stop(ctx context.Context, stop func(was State) error) error {
	b.mu.Lock()
	first := b.done == nil
	if first {
		b.done = make(chan struct{})
		b.idle = make(chan struct{})
		if b.running == 0 {
			close(b.idle)
		}
	}
	was := b.state.Stop()
	done, idle := b.done, b.idle
	b.mu.Unlock()
	if first {
		b.err = stop(was)
		select {
		case <-idle:
			close(done)
			return b.err
		default:
		}
		go func() {
			<-idle
			close(done)
		}()
		select {
		case <-idle:
			return b.err
		case <-ctx.Done():
			// done closes when the group is over; later calls wait for it.
			return errors.Join(b.err, fmt.Errorf("goroutines still running: %w", ctx.Err()))
		}
	}
	select {
	case <-done:
		return b.err
	case <-ctx.Done():
		return fmt.Errorf("waiting for the first stop: %w", ctx.Err())
	}
}

// Done is closed once the first Stop is over; nil until Stop is called.
func (b *Base) Done() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.done
}
