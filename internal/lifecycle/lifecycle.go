// Package lifecycle is the one Start/Stop shape of roboNet's long-running
// components (the node, the mesh, the engine, the Router, the Waggler
// hosts and their Wagglers, the worker hosts and their pools): each goes
// New → Running → Stopped, once. Starting a running or stopped component is
// an error; Stop is idempotent and may come without Start; nothing is
// restarted — a stopped component is replaced by a new one.
//
// A component holds a Base (base.go), which keeps its State, runs its stop
// once, makes every Stop — a second one, a concurrent one, a Halt —
// wait for the first and return its error, and owns its goroutines. State
// alone is for parts inside a component that stop under the component's
// lock (a Waggler inside its host).
package lifecycle

import (
	"errors"
	"fmt"
)

// State is where a component is in its life.
type State uint8

// The states, in order.
const (
	New State = iota
	Running
	Stopped
)

// Errors of Start, wrapped with the component's name.
var (
	ErrStarted = errors.New("already started")
	ErrStopped = errors.New("stopped; build a new one")
)

// Start moves New to Running; name says whose error it is otherwise.
func (s *State) Start(name string) error {
	switch *s {
	case Running:
		return fmt.Errorf("%s: %w", name, ErrStarted)
	case Stopped:
		return fmt.Errorf("%s: %w", name, ErrStopped)
	}
	*s = Running
	return nil
}

// Stop moves to Stopped and returns the state it left: the caller stops
// what the component runs unless it was Stopped already (a second Stop)
// or New (nothing runs yet).
func (s *State) Stop() (was State) {
	was, *s = *s, Stopped
	return was
}

// Running reports whether the component runs.
func (s State) Running() bool { return s == Running }

// Stopped reports whether the component was stopped.
func (s State) Stopped() bool { return s == Stopped }

func (s State) String() string {
	switch s {
	case New:
		return "new"
	case Running:
		return "running"
	case Stopped:
		return "stopped"
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}
