// Package wag implements Wagglers and workers: per capability class, the
// Waggler role dispatches tasks to workers, watches their sequenced
// heartbeats and reassigns work when a worker dies; worker pools run actions
// (exec, http, sleep, echo and registered handlers) in isolation.
//
// Durable task state never lives here; the engine owns it. It is built in the
// single-node issue.
package wag
