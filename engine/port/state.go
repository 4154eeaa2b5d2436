package port

import (
	"errors"
	"time"

	"github.com/google/uuid"
)

// InstanceState is the state of a workflow instance: durable in the Store
// (pending, running, and the three terminal states: the string is what the
// store keeps), and, as clients see a live instance, gathering or paused.
type InstanceState string

// Instance states.
const (
	// StatePending: queued, not claimed yet (kept as "queued").
	StatePending InstanceState = "queued"
	// StateRunning: claimed by an engine, some task not resolved.
	StateRunning   InstanceState = "running"
	StateComplete  InstanceState = "complete"
	StateFailed    InstanceState = "failed"
	StateCancelled InstanceState = "cancelled"
	// StateGathering: running, its last tasks done, its outputs being
	// gathered (a view's state only; the store keeps running).
	StateGathering InstanceState = "gathering"
	// StatePaused: live, and held back by PauseInstance: no new attempt
	// of it is dispatched and its timers wait until ResumeInstance (a
	// view's state only; the store keeps its flag beside running or
	// pending).
	StatePaused InstanceState = "paused"
)

// Terminal reports whether s is final.
func (s InstanceState) Terminal() bool {
	return s == StateComplete || s == StateFailed || s == StateCancelled
}

// Durable reports whether the store keeps s (the states a filter of
// stored instances may name).
func (s InstanceState) Durable() bool {
	return s == StatePending || s == StateRunning || s.Terminal()
}

// ScheduleRecord is a schedule as the Store keeps it (inputs as canonical
// JSON).
type ScheduleRecord struct {
	Name           string
	Workflow       string
	Version        uint32
	Inputs         []byte
	Cron           string
	Interval       time.Duration
	Jitter         time.Duration
	AllowDuplicate bool
	Paused         bool
	NextRunAt      time.Time
	LastRunAt      time.Time
	LastInstanceID uuid.UUID
	LastSkipped    string
	CreatedAt      time.Time
}

// ScheduleRun records a slot a schedule filled (or skipped) and the slot
// after it. It applies only while the schedule's NextRunAt is still Slot,
// so two engines that fire the same slot advance it once.
type ScheduleRun struct {
	Name       string
	Slot       time.Time
	Next       time.Time
	RanAt      time.Time
	InstanceID uuid.UUID // uuid.Nil when skipped
	Skipped    string
}

// ErrScheduleExists: a schedule of that name exists.
var ErrScheduleExists = errors.New("schedule already exists")

// Admission tells the engine when starting a new instance would only add
// to a queue: the Waggler layer's count of attempts in flight per
// capability (wag.Router implements it).
//
// A claimed instance that never ran, whose first tasks all need saturated
// capabilities, is held back unstarted — claimed and leased, but not
// hydrated: no graph, no attempts, no event log, a few hundred bytes —
// until one of them drains (Engine.CapacityFreed, or the next
// ClaimInterval). Instances held back wait in order of claim, per set of
// first capabilities, so a capability with a long backlog holds back only
// the instances that start with it. Without admission, every instance
// claimed starts at once, and one whose tasks would wait anyway is held
// in memory all that time: a larger heap to scan, and more of its results
// written as progress before it finishes. Measured in docs/benchmarks.md
// at f91b9cc (the seventeenth pass).
type Admission interface {
	// Saturated reports whether capability has so many attempts in flight
	// that a new instance needing it would only queue behind them.
	Saturated(capability string) bool
}
