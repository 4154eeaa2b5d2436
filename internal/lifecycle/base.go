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
	// closed: the first stop function returned; Go starts nothing more.
	closed bool
	// running counts the group's goroutines; zero, made when it leaves 0,
	// is closed when it comes back to 0.
	running int
	zero    chan struct{}
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
// A stop function may still start goroutines to finish its work (the
// engine sends its last cancels so); once it has returned, Go starts
// nothing and returns false.
func (b *Base) Go(f func()) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	if b.running == 0 {
		b.zero = make(chan struct{})
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
	if b.running--; b.running == 0 {
		close(b.zero)
		b.zero = nil
	}
}

// Wait waits until no goroutine started with Go runs. It is for a stop
// function, which calls it where the order matters (before closing what
// they use); Stop waits again after stop returns.
func (b *Base) Wait() {
	for {
		b.mu.Lock()
		idle := b.zero
		b.mu.Unlock()
		if idle == nil {
			return
		}
		<-idle
	}
}

// Stop stops the component once and waits. The first call, whatever the
// component's state, marks it Stopped and runs stop with the state it left
// — New (nothing runs yet; release what New built) or Running — then
// waits for the group, goroutines stop started included (after stop
// returns, Go starts nothing more). Every call, the first included and
// however many run at once, returns only after that is over, with stop's
// error; a call whose ctx ends first returns ctx's error instead (the
// stop, or the wait for the group, goes on). A Halt or an Abandon is a
// Stop with another stop function: whichever comes first decides how the
// component goes.
func (b *Base) Stop(ctx context.Context, stop func(was State) error) error {
	b.mu.Lock()
	first := b.done == nil
	if first {
		b.done = make(chan struct{})
	}
	was := b.state.Stop()
	done := b.done
	b.mu.Unlock()
	if first {
		b.err = stop(was)
		b.mu.Lock()
		b.closed = true // no goroutine starts after this: idle is final
		idle := b.zero
		b.mu.Unlock()
		if idle == nil {
			close(done)
			return b.err
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
