// Package metrics defines roboNet's Prometheus series. A node has one
// Registry; the engine of every leadership term and the Waggler layer
// record into the series registered there, so counters carry on across
// terms. Components built without a registry (tests, tools) get series
// that count but are exported nowhere.
//
// Series with a capability label are curried once per capability and
// cached: the hot paths (a dispatch, a result) pay an atomic add, not a
// label lookup.
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

const namespace = "robonet"

// TaskBuckets cover an echo (tens of microseconds) to a long task (an
// hour), in seconds: the buckets of every series of attempts' run times.
var TaskBuckets = []float64{0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600}

// fastBuckets cover in-memory and store work, in seconds.
var fastBuckets = []float64{0.00001, 0.00005, 0.0001, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1, 5}

// capabilityCounter is a counter with a capability label.
func capabilityCounter(name, help string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: name, Help: help}, []string{"capability"})
}

// Engine is the engine's series.
type Engine struct {
	dispatched *prometheus.CounterVec
	retried    *prometheus.CounterVec
	completed  *prometheus.CounterVec
	failed     *prometheus.CounterVec
	duration   *prometheus.HistogramVec

	// InstancesSubmitted counts instances queued by submissions.
	InstancesSubmitted prometheus.Counter
	instancesFinished  *prometheus.CounterVec
	// Propagation is the engine's time to apply one result: the graph's
	// readiness propagation and the effects it yields.
	Propagation prometheus.Histogram
	// CommitRows and CommitSeconds are the group commit's rows (results
	// and snapshots) per store call and the call's latency.
	CommitRows    prometheus.Histogram
	CommitSeconds prometheus.Histogram
	// StoreRetries counts group-commit calls retried because the store
	// was unavailable (the database unreachable or failing over).
	StoreRetries prometheus.Counter
	// WritesSetAside counts instances' writes the store kept refusing,
	// set aside so that they hold no other write back.
	WritesSetAside prometheus.Counter

	caps sync.Map // capability → *Capability
}

// Capability is the engine's series of one capability.
type Capability struct {
	Dispatched prometheus.Counter  // attempts dispatched
	Retried    prometheus.Counter  // retries scheduled after a failed attempt
	Completed  prometheus.Counter  // attempts that succeeded
	Failed     prometheus.Counter  // attempts that failed (retried or not)
	Duration   prometheus.Observer // an attempt's start to finish on its worker, seconds
}

// NewEngine builds the engine's series and registers them with reg (nil:
// nowhere). It panics if they are registered there already: one node, one
// set.
func NewEngine(reg prometheus.Registerer) *Engine {
	m := &Engine{
		dispatched: capabilityCounter("tasks_dispatched_total", "Task attempts the engine dispatched, by capability."),
		retried:    capabilityCounter("tasks_retried_total", "Retries the engine scheduled after a failed attempt, by capability."),
		completed:  capabilityCounter("tasks_completed_total", "Task attempts that succeeded, by capability."),
		failed:     capabilityCounter("tasks_failed_total", "Task attempts that failed (including those retried), by capability."),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: namespace, Name: "task_duration_seconds",
			Help: "Task attempts' run time on their worker, start to finish, by capability.", Buckets: TaskBuckets}, []string{"capability"}),
		InstancesSubmitted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "instances_submitted_total",
			Help: "Workflow instances queued by submissions."}),
		instancesFinished: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Name: "instances_finished_total",
			Help: "Workflow instances that ended, by status (complete, failed, cancelled)."}, []string{"status"}),
		Propagation: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "readiness_propagation_seconds",
			Help: "The engine's time to apply one task result: readiness propagation through the graph and its effects.", Buckets: fastBuckets}),
		CommitRows: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "store_commit_rows",
			Help: "Rows (results and snapshots) per group commit to the store.", Buckets: prometheus.ExponentialBuckets(1, 4, 9)}),
		CommitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: namespace, Name: "store_commit_seconds",
			Help: "Latency of one group commit to the store.", Buckets: fastBuckets}),
		StoreRetries: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "store_write_retries_total",
			Help: "Group commits retried because the store was unavailable (the database unreachable, failing over or read-only)."}),
		WritesSetAside: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "store_writes_set_aside_total",
			Help: "Instances' writes the store kept refusing, set aside (the instance evicted) so that they held no other write back."}),
	}
	if reg != nil {
		reg.MustRegister(m.dispatched, m.retried, m.completed, m.failed, m.duration, m.InstancesSubmitted, m.instancesFinished,
			m.Propagation, m.CommitRows, m.CommitSeconds, m.StoreRetries, m.WritesSetAside)
	}
	return m
}

// Capability returns the series of one capability.
func (m *Engine) Capability(name string) *Capability {
	return curried(&m.caps, name, func() *Capability {
		return &Capability{
			Dispatched: m.dispatched.WithLabelValues(name),
			Retried:    m.retried.WithLabelValues(name),
			Completed:  m.completed.WithLabelValues(name),
			Failed:     m.failed.WithLabelValues(name),
			Duration:   m.duration.WithLabelValues(name),
		}
	})
}

// curried returns the series of one capability from cache, currying them
// on first use.
func curried[T any](cache *sync.Map, name string, build func() *T) *T {
	if c, ok := cache.Load(name); ok {
		return c.(*T)
	}
	c, _ := cache.LoadOrStore(name, build())
	return c.(*T)
}

// InstanceFinished counts an instance that ended with status.
func (m *Engine) InstanceFinished(status string) { m.instancesFinished.WithLabelValues(status).Inc() }

// Wag is the Waggler layer's series.
type Wag struct {
	received  *prometheus.CounterVec
	missed    *prometheus.CounterVec
	replayed  *prometheus.CounterVec
	failovers *prometheus.CounterVec
	inherited *prometheus.CounterVec

	// ExecRefused counts the exec attempts this node refused: the program
	// is outside its --exec-allow policy, or it has none and listens beyond
	// loopback.
	ExecRefused prometheus.Counter

	caps sync.Map // capability → *WagCapability
}

// WagCapability is the Waggler series of one capability.
type WagCapability struct {
	HeartbeatsReceived prometheus.Counter // accepted heartbeats
	HeartbeatsMissed   prometheus.Counter // heartbeats missing from a worker's sequence
	HeartbeatsReplayed prometheus.Counter // replays and reorders, ignored
	WorkerFailovers    prometheus.Counter // attempts moved off a worker declared dead
	WagglerFailovers   prometheus.Counter // the capability's Waggler role moved to another node (the leader counts)
}

// NewWag builds the Waggler series and registers them with reg (nil:
// nowhere).
func NewWag(reg prometheus.Registerer) *Wag {
	m := &Wag{
		received:  capabilityCounter("heartbeats_received_total", "Worker heartbeats this node's Wagglers accepted, by capability."),
		missed:    capabilityCounter("heartbeats_missed_total", "Heartbeats missing from a worker's sequence (lost on the way), by capability; a worker that goes silent shows in worker_failovers_total."),
		replayed:  capabilityCounter("heartbeats_replayed_total", "Heartbeats ignored as replays or reorders, by capability."),
		failovers: capabilityCounter("worker_failovers_total", "Attempts moved off a worker declared dead, by capability."),
		inherited: capabilityCounter("waggler_failovers_total", "Times the leader saw a capability's Waggler role move to another node (its holder failed, left or was quarantined), by capability."),
		ExecRefused: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Name: "exec_refused_total",
			Help: "Exec attempts this node refused to run: the program is outside its --exec-allow policy, or it has no policy and listens beyond loopback."}),
	}
	if reg != nil {
		reg.MustRegister(m.received, m.missed, m.replayed, m.failovers, m.inherited, m.ExecRefused)
	}
	return m
}

// Capability returns the Waggler series of one capability.
func (m *Wag) Capability(name string) *WagCapability {
	return curried(&m.caps, name, func() *WagCapability {
		return &WagCapability{
			HeartbeatsReceived: m.received.WithLabelValues(name),
			HeartbeatsMissed:   m.missed.WithLabelValues(name),
			HeartbeatsReplayed: m.replayed.WithLabelValues(name),
			WorkerFailovers:    m.failovers.WithLabelValues(name),
			WagglerFailovers:   m.inherited.WithLabelValues(name),
		}
	})
}
